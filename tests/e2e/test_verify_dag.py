"""The verify DAGs: one per enabled flow with its trigger form, and runs under `airflow dags test`
with the real spark-submit after a replicate run, on an exact copy and on a faulty one."""

from __future__ import annotations

import json

from airflow.sdk import Param

from mirrorflow.airflow.forms import sample_fraction, verify_form_problems
from mirrorflow.config import load_config
from mirrorflow.ops.verification.report import SUMMARY_KIND
from mirrorflow.replicate.run_reading import iter_run_records

from ..integration.kafkatools import create_topics, produce
from ..integration.mirror_setup import mm2_text, replicate_once
from ..integration.test_verify import _faulty_copy, records
from .asset_events import stored_asset_events
from .test_control_dags import dagbag
from .test_replicate_dag import librdkafka_errors


def test_each_enabled_flow_has_a_manual_verify_dag_with_a_form(monkeypatch, tmp_path) -> None:
    bag = dagbag(monkeypatch, tmp_path, "B->A.enabled = true\n")
    for source, target in (("A", "B"), ("B", "A")):
        dag = bag.dags[f"mirrorflow__{source}__{target}__verify"]
        assert dag.schedule is None and "verify" in dag.tags
        assert dag.params.dump() == {"topics": ".*", "until": "now", "sample": None}
        assert dag.get_task("plan").downstream_task_ids == {"verify", "report"}
        report = dag.get_task("report")
        assert report.trigger_rule == "all_done_min_one_success" and report.retries == 0
        compare = dag.get_task("verify")
        assert compare.application.endswith("spark_apps/mirrorflow_verify.py")
        assert compare.application_args[:4] == [
            "--config",
            str(tmp_path / "mm2.properties"),
            "--flow",
            f"{source}->{target}",
        ]
    # The schema takes any number (Airflow would refuse others with a schema dump); the plan
    # task reads it, and refuses 0 and 1.5 in a sentence naming the field.
    sample = bag.dags["mirrorflow__A__B__verify"].params.get_param("sample")
    for taken in (0, 1.5, 0.05, None):
        Param(**{"default": None, **sample.schema}).resolve(taken)
    for refused in (0, 1.5):
        (problem,) = verify_form_problems({"topics": ".*", "until": "now", "sample": refused})
        assert problem.startswith(f"Sample (fraction): {refused!r} is not a fraction above 0 and at most 1")


def test_the_form_checks_name_each_field() -> None:
    assert (
        verify_form_problems({"topics": "orders|pay.*", "until": "2026-11-21T17:00:00Z", "sample": 0.05})
        == []
    )
    assert sample_fraction("") is None and sample_fraction("0.5") == 0.5
    problems = verify_form_problems({"topics": "orders(", "until": "yesterday", "sample": 2})
    assert [p.split(":")[0] for p in problems] == [
        "Topics (regex, full match)",
        "Verify up to",
        "Sample (fraction)",
    ]


def _summary(backup, run_id: str) -> dict:
    (body,) = [
        body
        for _, _, run, kind, body in iter_run_records({"bootstrap.servers": backup.bootstrap})
        if kind == SUMMARY_KIND and run == run_id
    ]
    return json.loads(body)


def test_verify_dag_proves_an_exact_copy(airflow_home, kafka_clusters, unique, tmp_path) -> None:
    a, b = kafka_clusters(2)
    topic, other = unique("orders"), unique("not-replicated")
    create_topics(a.bootstrap, (topic, 2), (other, 1))
    produce(a.bootstrap, topic, records(200, partitions=2))
    produce(a.bootstrap, other, records(5))
    text = mm2_text([a, b], ["A->B"], f"A->B.topics = {topic}\ntasks.max = 2\n")
    config = tmp_path / "mm2.properties"
    config.write_text(text)
    replicate_once(load_config(text), "A", "B", unique("copy"))

    # The form's defaults: the flow's own topics (not every topic), up to now, every record.
    result = airflow_home.dags_test("mirrorflow__A__B__verify", env={"MIRRORFLOW_CONFIG": str(config)})

    assert result.succeeded, result.log[-4000:]
    assert "mirrorflow_verify.py" in result.log and not librdkafka_errors(result.log)
    summary = _summary(b, result.run_id)
    assert summary["verdict"] == "verified", summary
    assert summary["totals"]["matched"] == summary["totals"]["source_records"] == 200
    assert list(summary["topics"]) == [topic] and summary["sample"] is None
    # A verification that passed says so to the DAGs scheduled on the flow's verified Asset.
    events = stored_asset_events(airflow_home, result.dag_id, result.run_id)
    assert list(events) == [f"mirrorflow://{b.bootstrap}/A/verified"]
    verified = events[f"mirrorflow://{b.bootstrap}/A/verified"]
    assert (verified["verdict"], verified["matched"], verified["topics"]) == ("verified", 200, [topic])


def test_verify_dag_fails_report_naming_each_wrong_record(
    airflow_home, kafka_clusters, unique, tmp_path
) -> None:
    a, b = kafka_clusters(2)
    # The flow's internal topics exist once it has run; its own topic filter selects nothing.
    text = mm2_text([a, b], ["A->B"], f"A->B.topics = {unique('none')}\n")
    replicate_once(load_config(text), "A", "B", unique("copy"))
    topic, remote = _faulty_copy((a, b, None), unique, load_config(text), 20)
    config = tmp_path / "mm2.properties"
    config.write_text(text)
    env = {"MIRRORFLOW_CONFIG": str(config)}

    result = airflow_home.dags_test(
        "mirrorflow__A__B__verify", env=env, conf={"topics": topic, "until": "now", "sample": 1.0}
    )

    assert result.state == "failed", result.log[-4000:]
    states = airflow_home.task_states(result.dag_id, result.run_id, env=env)
    assert states == {"plan": "success", "verify": "success", "report": "failed"}, states
    assert f"{topic}-0 source offset 3 -> {remote} offset 3: different (value differ)" in result.log
    assert f"{topic}-0 source offset 4: missing" in result.log
    summary = _summary(b, result.run_id)
    assert summary["verdict"] == "failed" and summary["sample"] == 1.0
    assert summary["totals"]["wrong"] == {"missing": 1, "different": 1, "unexpected": 0, "repeated": 1}
    assert stored_asset_events(airflow_home, result.dag_id, result.run_id) == {}
