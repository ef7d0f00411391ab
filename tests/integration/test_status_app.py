"""The status page app (JSON, Prometheus metrics, HTML) on real Kafka clusters after a real run."""

from __future__ import annotations

import json

import pytest
from confluent_kafka.admin import AdminClient
from fastapi import HTTPException

from mirrorflow.airflow.status_app import TOKEN_ENV
from mirrorflow.control.heartbeats import emit_heartbeats
from mirrorflow.replicate import runs
from mirrorflow.replicate.report import TOPIC_ROWS

from ..unit.test_run_summary import SUMMARY_BOUND
from .kafkatools import create_topics, produce
from .mirror_setup import mm2_config, replicate_once
from .test_run_records import big_report, write_chunks


@pytest.fixture
def replicated(kafka_clusters, unique):
    a, b = kafka_clusters(2)
    topic = unique("orders")
    create_topics(a.bootstrap, (topic, 2))
    produce(a.bootstrap, topic, [{"value": f"{i}".encode(), "partition": i % 2} for i in range(50)])
    config = mm2_config([a, b], ["A->B"])
    summary = replicate_once(config, "A", "B", run_id="status-run")
    emit_heartbeats(list(config.heartbeat_flows), duration_s=0)
    return config, topic, summary


def test_status_json_metrics_and_page(replicated, status_app, monkeypatch: pytest.MonkeyPatch) -> None:
    config, topic, summary = replicated
    monkeypatch.delenv(TOKEN_ENV, raising=False)
    client = status_app(config)

    status = client.get("/status").json()
    (flow,) = status["flows"]
    assert flow["flow"] == "A->B" and flow["last_run"]["run_id"] == "status-run"
    assert flow["last_run"]["totals"]["records"] == 50

    text = client.get("/metrics").text
    assert 'mirrorflow_flow_last_run_records{flow="A->B"} 50.0' in text
    assert 'mirrorflow_flow_last_run_failed_partitions{flow="A->B"} 0.0' in text
    assert f'mirrorflow_flow_lag_records{{flow="A->B",topic="{topic}"}} 0.0' in text
    assert f'mirrorflow_flow_last_run_lost_to_retention{{flow="A->B",topic="{topic}"}} 0.0' in text
    assert 'mirrorflow_cluster_up{cluster="A"} 1.0' in text
    # The page's badges, judged as the page judges them, in the JSON and the metrics: the run just
    # ended (copying), no verification yet, each heartbeat job fresh against its 1 s interval.
    health = status["health"]
    assert health["flows"]["A->B"]["copy"]["state"] == "copying"
    assert health["flows"]["A->B"]["verification"]["state"] == "never verified"
    assert {j["job"]: j["state"] for j in health["heartbeat_jobs"]} == {"A->B": "healthy", "B->A": "healthy"}
    assert 'mirrorflow_flow_copy_state{flow="A->B",state="copying"} 1.0' in text
    assert 'mirrorflow_flow_copy_expected_seconds{flow="A->B"} 300.0' in text
    assert 'mirrorflow_heartbeat_job_expected_seconds{cluster="B",source="A"} 1.0' in text

    page = client.get("/ui")
    assert page.status_code == 200 and 'fetch("ui?fragment=1"' in page.text
    # Server-rendered from the snapshot: the run linked to its DAG run and report log, the topic
    # with its lag now; the heartbeats were emitted after the copy, so B has no upstream yet.
    run = "../dags/mirrorflow__A__B__replicate/runs/status-run"
    assert f'<a href="{run}" target="_top"' in page.text
    assert f'<a href="{run}/tasks/report" target="_top"' in page.text
    assert f'<span class="mono">{topic}</span>' in page.text
    assert "<th>Copy</th><th>Verification</th>" in page.text and ">never verified</span>" in page.text
    assert '<tr><td>B</td><td><span class="muted">no upstream clusters</span></td>' in page.text
    fragment = client.get("/ui", params={"fragment": 1}).text
    assert "<html" not in fragment and "status-run" in fragment and "<h2>Flows</h2>" in fragment
    dark = client.get("/ui", params={"theme": "dark"}).text
    assert dark.startswith('<!doctype html>\n<html data-theme="dark"')


def test_lag_history_across_refreshes(kafka_clusters, status_app) -> None:
    """Each refresh adds the flow's and each topic's lag now to the history the sparklines draw."""
    a, b = kafka_clusters(2)
    create_topics(a.bootstrap, ("clicks", 1), ("views", 1))
    config = mm2_config([a, b], ["A->B"])
    client = status_app(config, refresh_s=3600)
    for batch in (3, 4, 5):
        produce(a.bootstrap, "clicks", [{"value": b"c"}] * batch)
        produce(a.bootstrap, "views", [{"value": b"v"}])
        client.refresh()
    history = client.snapshots.history
    assert [v for _, v in history.flow("A->B")] == [0, 4, 9, 15], "the first read, then three"
    assert [v for _, v in history.topic("A->B", "clicks")] == [0, 3, 7, 12]
    assert [v for _, v in history.topic("A->B", "views")] == [0, 1, 2, 3]
    page = client.get("/ui").text
    assert "lag now over the last 4 reads" in page and "min 0, max 15, now 15" in page
    assert page.count('<svg class="spark"') == 3, "the flow and its two topics"


def test_metrics_token_and_login(replicated, status_app, monkeypatch: pytest.MonkeyPatch) -> None:
    config, _, _ = replicated

    def no_login() -> None:
        raise HTTPException(status_code=401, detail="log in")

    client = status_app(config, login_required=no_login)
    assert client.get("/status").status_code == 401
    assert client.get("/ui").status_code == 401
    monkeypatch.setenv(TOKEN_ENV, "s3cret")
    assert client.get("/metrics").status_code == 401
    assert client.get("/metrics", headers={"Authorization": "Bearer wrong"}).status_code == 401
    assert client.get("/metrics", headers={"Authorization": "Bearer s3cret"}).status_code == 200


def test_unreachable_cluster_is_reported_not_fatal(kafka_clusters, status_app) -> None:
    (a,) = kafka_clusters(1)

    class Gone:
        alias, bootstrap = "B", "127.0.0.1:1"

    config = mm2_config([a, Gone()], ["A->B"])
    status = status_app(config, timeout_s=2.0).get("/status").json()
    assert {c["alias"]: bool(c["error"]) for c in status["clusters"]} == {"A": False, "B": True}


def test_the_status_of_a_20000_partition_run_is_bounded_and_whole(kafka_clusters, status_app) -> None:
    """The page and JSON show a 20,000-partition run as its bounded summary; a summary stored in
    chunks is read whole, and a newer one whose writer died mid-way is passed over."""
    a, b = kafka_clusters(2)
    config = mm2_config([a, b], ["A->B"])
    target = {"bootstrap.servers": b.bootstrap}
    runs.ensure_runs_topic(AdminClient(target), 1)
    report = big_report("status-20000")
    report.lag_left = {u["topic"]: 7 for u in report.units}
    app = status_app(config, first_read=False)

    # A summary as large as they were before they were bounded: stored in chunks, read whole.
    unbounded = {"run_id": "unbounded", "totals": report.totals(), "failed": report.failed}
    runs.write_run_record(target, "A->B", "unbounded", "summary", json.dumps(unbounded))
    app.refresh()
    shown = app.get("/status").json()["flows"][0]["last_run"]
    assert shown["run_id"] == "unbounded" and len(shown["failed"]) == len(report.failed) > 200

    summary = report.summary()
    runs.write_run_record(target, "A->B", report.run_id, "summary", json.dumps(summary))
    body = json.dumps(summary).encode()
    write_chunks(target, "A->B", "died", "summary", [(0, body[: len(body) // 2], False)], body)
    app.refresh()
    (flow,) = app.get("/status").json()["flows"]
    assert flow["last_run"]["run_id"] == "status-20000"
    assert len(json.dumps(flow["last_run"])) < SUMMARY_BOUND
    assert flow["last_run"]["totals"]["partitions"] == 20_000
    assert flow["last_run"]["totals"]["lag_left"] == 7 * 2_000
    assert len(flow["last_run"]["topics"]) == TOPIC_ROWS and flow["last_run"]["topics_count"] == 2_000
    metrics = app.get("/metrics").text
    assert metrics.count('mirrorflow_flow_lag_records{flow="A->B"') == TOPIC_ROWS
    page = app.get("/ui").text
    assert "Topics, the worst first" in page and "… and 1,950 more topic(s)" in page
    assert len(page) < 200_000
