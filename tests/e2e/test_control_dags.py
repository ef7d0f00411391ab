"""The checkpoint, group-sync and failover DAGs: which exist for which settings, and each run under
`airflow dags test` against real Kafka clusters."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from airflow.models import DagBag

from mirrorflow.mm2.formats import Checkpoint

from ..integration.kafkatools import create_topics, read_all
from ..integration.mirror_setup import mm2_config, replicate_once
from ..integration.test_failover_helpers import commit_at, committed, produce_numbered
from .test_replicate_dag import librdkafka_errors

ROOT = Path(__file__).resolve().parents[2]
SINGLE_BROKER = (
    "replication.factor = 1\noffset-syncs.topic.replication.factor = 1\n"
    "checkpoints.topic.replication.factor = 1\noffset.storage.replication.factor = 1\n"
)


def dagbag(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, extra: str) -> DagBag:
    path = tmp_path / "mm2.properties"
    path.write_text(
        "clusters = A, B\nA.bootstrap.servers = 127.0.0.1:1\nB.bootstrap.servers = 127.0.0.1:2\n"
        "A->B.enabled = true\n" + SINGLE_BROKER + extra
    )
    monkeypatch.setenv("MIRRORFLOW_CONFIG", str(path))
    bag = DagBag(dag_folder=str(ROOT / "dags"))
    assert bag.import_errors == {}
    return bag


def test_each_job_has_a_dag_at_its_mm2_interval_only_where_mm2_runs_it(monkeypatch, tmp_path) -> None:
    defaults = dagbag(monkeypatch, tmp_path, "")
    checkpoints = defaults.dags["mirrorflow__A__B__checkpoints"]
    assert checkpoints.schedule == timedelta(seconds=60) and checkpoints.max_active_runs == 1
    assert [t.task_id for t in checkpoints.tasks] == ["emit_checkpoints"]
    assert "mirrorflow__A__B__sync_group_offsets" not in defaults.dags  # off by default, as in MM2
    assert "mirrorflow__B__A__checkpoints" not in defaults.dags  # B->A does not replicate

    synced = dagbag(
        monkeypatch,
        tmp_path,
        "A->B.sync.group.offsets.enabled = true\nA->B.sync.group.offsets.interval.seconds = 15\n"
        "emit.checkpoints.interval.seconds = 45\n",
    )
    assert synced.dags["mirrorflow__A__B__sync_group_offsets"].schedule == timedelta(seconds=15)
    assert synced.dags["mirrorflow__A__B__checkpoints"].schedule == timedelta(seconds=45)

    for off in (
        "A->B.emit.checkpoints.enabled = false\nA->B.sync.group.offsets.enabled = true\n",
        "emit.checkpoints.interval.seconds = -1\n",
        "A->B.emit.offset-syncs.enabled = false\n",
    ):
        dags = dagbag(monkeypatch, tmp_path, off).dags
        assert "mirrorflow__A__B__checkpoints" not in dags, off
        assert "mirrorflow__A__B__sync_group_offsets" not in dags, off


def test_failover_dag_has_a_trigger_form_that_defaults_to_a_dry_run(monkeypatch, tmp_path) -> None:
    dag = dagbag(monkeypatch, tmp_path, "").dags["mirrorflow_failover"]
    params = dag.params
    assert params.get_param("from_cluster").schema["enum"] == ["A", "B"]
    assert (params["from_cluster"], params["to_cluster"]) == ("A", "B")
    assert params["dry_run"] is True and params["from_checkpoints"] is False
    assert params.get_param("groups").schema["type"] == "string"


def _mirrored(kafka_clusters, tmp_path: Path, extra: str = ""):
    a, b = kafka_clusters(2)
    text = (
        f"clusters = A, B\nA.bootstrap.servers = {a.bootstrap}\nB.bootstrap.servers = {b.bootstrap}\n"
        "A->B.enabled = true\n" + SINGLE_BROKER + extra
    )
    path = tmp_path / "mm2.properties"
    path.write_text(text)
    create_topics(a.bootstrap, ("orders", 2))
    produce_numbered(a.bootstrap, "orders", 2, 60)
    commit_at(a.bootstrap, "shop", {("orders", 0): 11, ("orders", 1): 20}, metadata="v1")
    replicate_once(mm2_config([a, b], ["A->B"], extra), "A", "B", "e2e-run")
    return a, b, {"MIRRORFLOW_CONFIG": str(path)}


def test_checkpoint_group_sync_and_failover_dags_run(airflow_home, kafka_clusters, tmp_path) -> None:
    a, b, env = _mirrored(kafka_clusters, tmp_path, "A->B.sync.group.offsets.enabled = true\n")
    partitions = [("A.orders", 0), ("A.orders", 1)]

    checkpoints = airflow_home.dags_test("mirrorflow__A__B__checkpoints", env=env)
    assert checkpoints.succeeded, checkpoints.log[-4000:]
    written = [Checkpoint.decode(r.key, r.value) for r in read_all(b.bootstrap, "A.checkpoints.internal")]
    assert {(c.group, c.topic, c.partition, c.upstream_offset, c.metadata) for c in written} == {
        ("shop", "A.orders", 0, 11, "v1"),
        ("shop", "A.orders", 1, 20, "v1"),
    }
    translated = {(c.topic, c.partition): c.downstream_offset for c in written}

    synced = airflow_home.dags_test("mirrorflow__A__B__sync_group_offsets", env=env)
    assert synced.succeeded, synced.log[-4000:]
    assert committed(b.bootstrap, "shop", partitions) == translated

    commit_at(a.bootstrap, "shop", {("orders", 0): 25})
    conf = {
        "from_cluster": "A",
        "to_cluster": "B",
        "groups": "shop",
        "dry_run": False,
        "from_checkpoints": False,
    }
    moved = airflow_home.dags_test("mirrorflow_failover", env=env, conf=conf)
    assert moved.succeeded, moved.log[-4000:]
    assert not librdkafka_errors(moved.log)
    assert "failover A -> B (live)" in moved.log
    after = committed(b.bootstrap, "shop", partitions)
    assert after[("A.orders", 1)] == translated[("A.orders", 1)]
    assert after[("A.orders", 0)] > translated[("A.orders", 0)]
