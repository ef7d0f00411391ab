"""The DAG file parses into the expected DAGs, with no network access, for the example configs."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from airflow.models import DagBag

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def dagbag(monkeypatch: pytest.MonkeyPatch) -> DagBag:
    monkeypatch.setenv("MIRRORFLOW_CONFIG", str(ROOT / "include" / "config" / "demo.properties"))
    monkeypatch.setenv("MIRRORFLOW_DEMO_PRIMARY", "127.0.0.1:1")
    monkeypatch.setenv("MIRRORFLOW_DEMO_BACKUP", "127.0.0.1:2")
    return DagBag(dag_folder=str(ROOT / "dags"))


def test_dag_file_imports_cleanly(dagbag: DagBag) -> None:
    assert dagbag.import_errors == {}


def test_replicate_dag_shape(dagbag: DagBag) -> None:
    dag = dagbag.dags["mirrorflow__primary__backup__replicate"]
    assert dag is not None
    assert dag.max_active_runs == 1
    assert not dag.catchup
    assert {t.task_id for t in dag.tasks} == {"plan", "copy", "report"}
    assert dag.get_task("plan").downstream_task_ids == {"copy", "report"}
    assert dag.get_task("copy").downstream_task_ids == {"report"}
    assert dag.get_task("report").trigger_rule == "all_done_min_one_success"
    assert dag.get_task("copy").retries == 2
    assert dag.schedule == "*/5 * * * *"


def test_copy_task_arguments_hold_no_cluster_settings(dagbag: DagBag) -> None:
    copy = dagbag.dags["mirrorflow__primary__backup__replicate"].get_task("copy")
    args = " ".join(copy.application_args)
    assert "bootstrap" not in args and "password" not in args
    assert copy.application.endswith("spark_apps/mirrorflow_copy.py")
    assert copy.conf["spark.speculation"] == "false"


def test_a_micro_batch_flow_runs_one_window_per_dag_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The one-line change of docs/concepts/micro-batch.md: the demo's config plus the mode."""
    config = tmp_path / "micro-batch.properties"
    demo = (ROOT / "include" / "config" / "demo.properties").read_text()
    config.write_text(demo + "primary->backup.mirrorflow.replicate.mode = micro-batch\n")
    monkeypatch.setenv("MIRRORFLOW_CONFIG", str(config))
    monkeypatch.setenv("MIRRORFLOW_DEMO_PRIMARY", "127.0.0.1:1")
    monkeypatch.setenv("MIRRORFLOW_DEMO_BACKUP", "127.0.0.1:2")
    dag = DagBag(dag_folder=str(ROOT / "dags")).dags["mirrorflow__primary__backup__replicate"]
    assert dag.max_active_runs == 2  # the next window starts while this one hands over
    assert dag.schedule == timedelta(hours=1)
    assert type(dag.timetable).__name__ == "DeltaTriggerTimetable"  # runs at each interval's start
    assert {t.task_id for t in dag.tasks} == {"plan", "copy", "report"}
    assert dag.get_task("copy").application.endswith("spark_apps/mirrorflow_window.py")


def test_migrate_dag_has_a_trigger_form(dagbag: DagBag) -> None:
    dag = dagbag.dags["mirrorflow_migrate"]
    assert dag.schedule is None or str(dag.timetable.summary) in ("None", "")
    params = dag.params
    assert params["source"] == "primary" and params["target"] == "backup"
    assert params.get_param("delivery").schema["enum"] == ["exactly-once", "at-least-once"]
    assert params["until"] == "now"
    # Asked again once should Airflow fail an answered approval (docs/reference/limits.md); the
    # cut-over itself is never retried.
    approve, cutover = dag.get_task("approve"), dag.get_task("cutover")
    assert (approve.retries, approve.retry_delay.total_seconds(), cutover.retries) == (1, 5, 0)


def test_missing_config_is_an_import_error_that_says_what_to_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MIRRORFLOW_CONFIG", "/nonexistent/mm2.properties")
    bag = DagBag(dag_folder=str(ROOT / "dags"))
    (error,) = bag.import_errors.values()
    assert "MIRRORFLOW_CONFIG" in error


def test_every_dag_is_tagged_by_one_rule_and_manual_ones_start_unpaused(dagbag: DagBag) -> None:
    from mirrorflow.airflow.tags import KINDS

    kinds = set()
    for dag_id, dag in dagbag.dags.items():
        (kind,) = set(dag.tags) & set(KINDS)  # Airflow keeps tags as a set
        flow = set(dag.tags) - {"mirrorflow", kind}
        kinds.add(kind)
        assert "mirrorflow" in dag.tags and flow in (set(), {"primary->backup"}), (dag_id, dag.tags)
        assert (flow == set()) == (kind in ("migrate", "failover", "heartbeats")), (dag_id, dag.tags)
        if dag.schedule is None:  # manual: nothing to hold back, and no "Unpause on trigger" to do it
            assert dag.is_paused_upon_creation is False, dag_id
    assert kinds >= {"replicate", "verify", "migrate", "failover", "heartbeats"}
