"""The migration DAG as a cut-over workflow under `airflow dags test`, with the real spark-submit:
copy -> verify -> preview -> human approval -> failover of the groups -> final report. The
approval is answered from outside the run, as a person does in Airflow's Required Actions."""

from __future__ import annotations

import json
import threading

from mirrorflow.airflow.migrate_steps import STEPS
from mirrorflow.ops.migration_evidence import MIGRATION_SUMMARY_KIND
from mirrorflow.replicate.run_reading import iter_run_records

from ..integration.kafkatools import create_topics, produce
from ..integration.test_failover_helpers import commit_at, committed
from .asset_events import stored_asset_events
from .hitl import answer
from .test_control_dags import dagbag
from .test_replicate_dag import _env

DAG_ID = "mirrorflow_migrate"


def test_the_form_and_the_steps_after_the_copy(monkeypatch, tmp_path) -> None:
    dag = dagbag(monkeypatch, tmp_path, "").dags[DAG_ID]
    params = dag.params.dump()
    assert (params["verify"], params["groups"], params["approval"], params["dry_run"]) == (
        True,
        None,
        True,
        False,
    )
    order = list(STEPS)
    for before, after in zip(order, order[1:], strict=False):
        assert after in dag.get_task(before).downstream_task_ids, (before, after)
    assert dag.get_task("cutover").downstream_task_ids == {"final_report"}
    assert dag.get_task("check").downstream_task_ids == {"plan", "final_report"}
    assert dag.get_task("final_report").trigger_rule == "all_done"
    # A form mistake fails once, at once: not retried as the DAG's other steps are (3 times, 30 s apart).
    assert dag.get_task("check").retries == 0
    for optional_after in ("preview", "approve", "cutover"):
        assert dag.get_task(optional_after).trigger_rule == "none_failed"
    assert dag.get_task("verify").application.endswith("spark_apps/mirrorflow_verify.py")


def _migration_summaries(backup) -> list[dict]:
    return [
        json.loads(body)
        for _, _, _, kind, body in iter_run_records({"bootstrap.servers": backup.bootstrap})
        if kind == MIGRATION_SUMMARY_KIND
    ]


def test_a_dry_run_cut_over_walks_the_whole_path_and_moves_nothing(
    airflow_home, kafka_clusters, unique
) -> None:
    """The cut-over's dry run under `airflow dags test` (the approval answered as the Required
    Actions UI does): copied, verified, approved, and nothing committed. The real cut-over and a
    rejected one are the browser test's (tests/e2e/test_browser.py), through Airflow's UI."""
    primary, backup = kafka_clusters(2)
    topic, group = unique("orders"), unique("shop")
    create_topics(primary.bootstrap, (topic, 2))
    produce(primary.bootstrap, topic, [{"value": b"%d" % i, "partition": i % 2} for i in range(200)])
    commit_at(primary.bootstrap, group, {(topic, 0): 40, (topic, 1): 70})
    conf = {"source": "primary", "target": "backup", "topics": topic, "groups": group, "dry_run": True}
    env = _env(primary, backup)
    result: dict = {}
    run = threading.Thread(
        target=lambda: result.update(run=airflow_home.dags_test(DAG_ID, env=env, conf=conf))
    )
    run.start()
    shown = answer(airflow_home, env, DAG_ID, "approve", "Approve", timeout_s=400)
    run.join(600)
    outcome = result["run"]
    assert outcome.succeeded, outcome.log[-5000:]
    # The approver saw the verdict and each partition's copy, verification and translated offset.
    assert (
        "**Verification**: **verified**: 200 record(s) of 2 partition(s) compared up to the migration's ends"
        in shown
    )
    assert f"| {group} | {topic} | 0 | 40 | 100 | 100 | 40 | exact |" in shown
    # The report step logs the run's table per topic and its totals, as the replicate DAG's does.
    assert "total: 1 topic(s), 2 partition(s) copied, 200 offset(s) planned, 200 record(s)" in outcome.log
    summary = _migration_summaries(backup)[-1]
    assert summary["records"] == 200 and summary["verdict"] == "verified" and summary["failed_steps"] == []
    # The whole path is walked; the cut-over only says what it would commit.
    assert summary["approval"] == "approved" and summary["would_move"] == [group] and summary["done"]
    assert summary["groups_moved"] == []
    assert committed(backup.bootstrap, group, [(f"primary.{topic}", 0), (f"primary.{topic}", 1)]) == {}
    # Through the aliases of the pair the form chose: the copy's topic and the verification; a
    # dry run moved nobody, so no cut-over event.
    events = stored_asset_events(airflow_home, DAG_ID, outcome.run_id)
    copied = f"kafka://{backup.bootstrap}/primary.{topic}"
    assert set(events) == {copied, f"mirrorflow://{backup.bootstrap}/primary/verified"}
    assert (events[copied]["mode"], events[copied]["records"]) == ("migrate", 200)
