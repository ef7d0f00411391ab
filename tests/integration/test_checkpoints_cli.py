"""`mirrorflow checkpoints | sync-group-offsets | translate` from a terminal."""

from __future__ import annotations

from click.testing import CliRunner

from mirrorflow.cli import main

from .kafkatools import create_topics
from .mirror_setup import mm2_config, mm2_text, replicate_once
from .test_failover_helpers import commit_at, committed, produce_numbered


def test_offset_commands_run_the_jobs_and_explain_what_they_did(kafka_clusters, tmp_path) -> None:
    a, b = kafka_clusters(2)
    extra = "A->B.sync.group.offsets.enabled = true\n"
    path = tmp_path / "mm2.properties"
    path.write_text(mm2_text([a, b], ["A->B"], extra))
    create_topics(a.bootstrap, ("orders", 1))
    produce_numbered(a.bootstrap, "orders", 1, 30)
    commit_at(a.bootstrap, "shop", {("orders", 0): 12})
    replicate_once(mm2_config([a, b], ["A->B"], extra), "A", "B", "cli-run")
    runner = CliRunner()

    translated = runner.invoke(
        main, ["translate", str(path), "--flow", "A->B", "--group", "shop", "--offset", "orders:0:99"]
    )
    assert translated.exit_code == 0, translated.output
    assert "exact" in translated.output and "ahead" in translated.output and "A.orders" in translated.output

    written = runner.invoke(main, ["checkpoints", str(path)])
    assert written.exit_code == 0, written.output
    assert "checkpoints A->B" in written.output

    synced = runner.invoke(main, ["sync-group-offsets", str(path), "--flow", "A->B"])
    assert synced.exit_code == 0, synced.output
    assert committed(b.bootstrap, "shop", [("A.orders", 0)]) == {("A.orders", 0): 12}

    refused = runner.invoke(main, ["sync-group-offsets", str(path), "--flow", "B->A"])
    assert refused.exit_code != 0 and "B->A.enabled = true" in refused.output
