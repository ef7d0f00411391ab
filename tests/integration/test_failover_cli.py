"""`mirrorflow failover` from a terminal."""

from __future__ import annotations

from click.testing import CliRunner

from mirrorflow.cli import main

from .kafkatools import create_topics
from .mirror_setup import mm2_config, mm2_text, replicate_once
from .test_failover_helpers import commit_at, committed, produce_numbered


def test_failover_command_prints_the_table_and_dry_run_changes_nothing(kafka_clusters, tmp_path) -> None:
    a, b = kafka_clusters(2)
    path = tmp_path / "mm2.properties"
    path.write_text(mm2_text([a, b], ["A->B"]))
    create_topics(a.bootstrap, ("orders", 1))
    produce_numbered(a.bootstrap, "orders", 1, 30)
    commit_at(a.bootstrap, "shop", {("orders", 0): 12})
    replicate_once(mm2_config([a, b], ["A->B"]), "A", "B", "cli-run")
    runner = CliRunner()
    args = ["failover", str(path), "--from", "A", "--to", "B", "--groups", "shop"]

    dry = runner.invoke(main, [*args, "--dry-run"])
    assert dry.exit_code == 0, dry.output
    assert "dry run: failover A -> B (live)" in dry.output and "would move 1 group(s)" in dry.output
    assert committed(b.bootstrap, "shop", [("A.orders", 0)]) == {}

    moved = runner.invoke(main, args)
    assert moved.exit_code == 0, moved.output
    assert committed(b.bootstrap, "shop", [("A.orders", 0)]) == {("A.orders", 0): 12}

    back = runner.invoke(main, ["failover", str(path), "--from", "B", "--to", "A", "--groups", "shop"])
    assert back.exit_code == 1 and "Failback from B to A needs the flow B->A" in back.output
