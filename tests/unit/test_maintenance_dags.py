"""Which maintenance DAGs a config yields, and their schedules (parsing only, no network)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from airflow.models import DagBag

from mirrorflow.airflow.maintenance import build
from mirrorflow.config import load_config

ROOT = Path(__file__).resolve().parents[2]
BASE = "clusters = A, B, C\nA.bootstrap.servers = a:9092\nB.bootstrap.servers = b:9092\nC.bootstrap.servers = c:9092\n"


def dags(text: str, tmp_path: Path) -> dict:
    path = tmp_path / "mm2.properties"
    path.write_text(BASE + text)
    return build(str(path), load_config(str(path)), None)


def test_default_settings(tmp_path) -> None:
    built = dags("A->B.enabled = true\n", tmp_path)
    # MM2 runs a heartbeat herder for every pair while emit.heartbeats.enabled is on (the
    # default): one DAG emits for all six, each run for an hour (24 runs a day in all).
    hb = built["mirrorflow_heartbeats"]
    assert set(built) == {
        "mirrorflow_heartbeats",
        "mirrorflow__A__B__refresh_topics",
        "mirrorflow__A__B__sync_topic_configs",
        "mirrorflow__A__B__sync_topic_acls",
    }
    assert hb.timetable.delta == timedelta(hours=1)
    for pair in ("A → B", "B → A", "A → C", "C → A", "B → C", "C → B"):
        assert f"| {pair} |" in hb.doc_md
    assert "| A → B | `heartbeats` on B | 1 s | replicates |" in hb.doc_md
    # The heartbeat-only pair says why it exists and how to turn it off.
    assert "`A.heartbeats` on B" in hb.doc_md and "`B->A.emit.heartbeats.enabled = false`" in hb.doc_md
    assert "no enabled flow carries its heartbeats on" in hb.doc_md  # C's heartbeats go nowhere
    for dag in built.values():
        assert dag.max_active_runs == 1 and not dag.catchup
    for job in ("refresh_topics", "sync_topic_configs", "sync_topic_acls"):
        assert built[f"mirrorflow__A__B__{job}"].timetable.delta == timedelta(seconds=600)
        assert [t.task_id for t in built[f"mirrorflow__A__B__{job}"].tasks] == ["sync"]
    assert [t.task_id for t in hb.tasks] == ["emit"]


def test_disabled_jobs_get_no_dag_and_intervals_set_schedules(tmp_path) -> None:
    built = dags(
        "A->B.enabled = true\n"
        "emit.heartbeats.enabled = false\n"
        "A->B.emit.heartbeats.enabled = true\n"
        "A->B.emit.heartbeats.interval.seconds = 45\n"
        "mirrorflow.heartbeats.run.seconds = 60\n"
        "A->B.sync.topic.acls.enabled = false\n"
        "A->B.sync.topic.configs.interval.seconds = -1\n"
        "A->B.refresh.topics.interval.seconds = 20\n",
        tmp_path,
    )
    assert set(built) == {"mirrorflow_heartbeats", "mirrorflow__A__B__refresh_topics"}
    assert "| B → A |" not in built["mirrorflow_heartbeats"].doc_md
    assert built["mirrorflow_heartbeats"].timetable.delta == timedelta(seconds=90)
    # Below a minute, a topic job runs once a minute.
    assert built["mirrorflow__A__B__refresh_topics"].timetable.delta == timedelta(minutes=1)


def test_a_heartbeat_run_under_a_minute_is_refused(tmp_path) -> None:
    path = tmp_path / "mm2.properties"
    path.write_text(BASE + "A->B.enabled = true\nmirrorflow.heartbeats.run.seconds = 5\n")
    with pytest.raises(Exception, match="mirrorflow.heartbeats.run.seconds"):
        load_config(str(path))


def test_negative_heartbeat_interval_removes_the_heartbeat_dag(tmp_path) -> None:
    built = dags("emit.heartbeats.interval.seconds = -1\n", tmp_path)
    assert built == {}


@pytest.mark.parametrize("wanted", ["mirrorflow_heartbeats", "mirrorflow__A__B__sync_topic_acls"])
def test_only_the_wanted_dag_is_built_when_airflow_runs_one(tmp_path, wanted) -> None:
    path = tmp_path / "mm2.properties"
    path.write_text(BASE + "A->B.enabled = true\n")
    assert set(build(str(path), load_config(str(path)), wanted)) == {wanted}


def test_the_dag_file_includes_the_maintenance_dags(monkeypatch) -> None:
    monkeypatch.setenv("MIRRORFLOW_CONFIG", str(ROOT / "include" / "config" / "demo.properties"))
    monkeypatch.setenv("MIRRORFLOW_DEMO_PRIMARY", "127.0.0.1:1")
    monkeypatch.setenv("MIRRORFLOW_DEMO_BACKUP", "127.0.0.1:2")
    bag = DagBag(dag_folder=str(ROOT / "dags"))
    assert bag.import_errors == {}
    assert {
        "mirrorflow_heartbeats",
        "mirrorflow__primary__backup__refresh_topics",
        "mirrorflow__primary__backup__sync_topic_configs",
        "mirrorflow__primary__backup__sync_topic_acls",
    } <= set(bag.dag_ids)
    assert "mirrorflow__backup__primary__refresh_topics" not in bag.dag_ids
