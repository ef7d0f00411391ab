"""The status app through an outage on real clusters: with the target's broker stopped, the page,
the JSON and the metrics keep the last values read, marked stale with their age, under a banner
saying since when the cluster is unreachable; requests answer from the snapshot at once; when the
broker is back the marks clear. Before the first snapshot, requests answer "collecting"."""

from __future__ import annotations

import html
import threading
import time

from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from mirrorflow.airflow.status_app import create_app, when
from mirrorflow.control.heartbeats import emit_heartbeats

from .kafkatools import create_topics, produce
from .mirror_setup import mm2_config, replicate_once

# Generous bounds: a request must answer from the snapshot, never wait for a Kafka timeout (2 s).
ANSWER_S = 1.0
# Series whose values move with time or with the outage itself; every other one keeps its value.
MOVING = {
    "mirrorflow_status_snapshot_age_seconds",
    "mirrorflow_cluster_up",
    "mirrorflow_cluster_unreachable_seconds",
    "mirrorflow_heartbeat_age_seconds",
    "mirrorflow_flow_stale",
    "mirrorflow_flow_data_age_seconds",
    # the page's badges as series: a flow read from a cluster that does not answer turns "stale",
    # and the ages judged keep growing
    "mirrorflow_flow_copy_state",
    "mirrorflow_flow_copy_level",
    "mirrorflow_flow_copy_age_seconds",
    "mirrorflow_heartbeat_job_age_seconds",
}


def series(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def timed_get(client: TestClient, path: str) -> tuple[object, float]:
    started = time.monotonic()
    response = client.get(path)
    return response, time.monotonic() - started


def test_last_known_values_stay_through_a_target_outage(kafka_clusters, status_app) -> None:
    a, b = kafka_clusters(2)
    create_topics(a.bootstrap, ("orders", 2))
    produce(a.bootstrap, "orders", [{"value": b"%d" % i, "partition": i % 2} for i in range(30)])
    config = mm2_config([a, b], ["A->B", "B->A"])
    emit_heartbeats(list(config.heartbeat_flows), duration_s=0)
    replicate_once(config, "A", "B", "ab-1")
    replicate_once(config, "B", "A", "ba-1")
    produce(a.bootstrap, "orders", [{"value": b"late", "partition": 0}] * 5)
    # The test refreshes by hand; the thread's own refreshes would come every hour.
    app = status_app(config, timeout_s=2.0, refresh_s=3600)

    before = app.get("/status").json()
    was = {f["flow"]: f for f in before["flows"]}
    assert before["snapshot"]["state"] == "ready" and before["banners"] == []
    assert was["A->B"]["stale"] is False and was["A->B"]["as_of_ms"] == before["generated_ms"]
    assert was["A->B"]["lag"]["orders"] == 5 and was["A->B"]["last_run"]["run_id"] == "ab-1"
    b_before = next(c for c in before["clusters"] if c["alias"] == "B")
    assert [u["alias"] for u in b_before["upstreams"]] == ["A"]
    metrics_before = series(app.get("/metrics").text)
    assert metrics_before[("mirrorflow_flow_stale", (("flow", "A->B"),))] == 0.0

    b.kafka.stop()
    app.refresh()
    # A second refresh while the target is still down, running as the requests come in: they
    # answer from the snapshot at once, and the outage keeps the time it started.
    refreshing = threading.Thread(target=app.refresh)
    refreshing.start()
    metrics, metrics_s = timed_get(app, "/metrics")
    down, status_s = timed_get(app, "/status")
    page, page_s = timed_get(app, "/ui")
    assert refreshing.is_alive(), "the refresh waits on the stopped broker; the requests did not"
    refreshing.join(30)
    assert max(metrics_s, status_s, page_s) < ANSWER_S, (metrics_s, status_s, page_s)
    assert app.get("/status").json()["flows"] == down.json()["flows"]

    status = down.json()
    flows = {f["flow"]: f for f in status["flows"]}
    into_b, out_of_b = flows["A->B"], flows["B->A"]
    assert into_b["stale"] is True and into_b["error"].startswith("target B unreachable: cluster B at ")
    assert len(into_b["error"]) < 600
    for kept in ("last_run", "last_run_ms", "lag", "last_verification", "as_of_ms"):
        assert into_b[kept] == was["A->B"][kept], kept
    since = into_b["unreachable_since_ms"]
    assert before["generated_ms"] < since <= status["generated_ms"]
    # B->A's run records live on A and are read now; its lag needs B: the last one read is kept.
    assert out_of_b["stale"] is True and out_of_b["error"].startswith("source B unreachable: ")
    assert out_of_b["last_run"]["run_id"] == "ba-1"
    assert out_of_b["lag"] == was["B->A"]["lag"]

    b_down = next(c for c in status["clusters"] if c["alias"] == "B")
    assert b_down["stale"] is True and b_down["error"] and b_down["as_of_ms"] == b_before["as_of_ms"]
    assert b_down["unreachable_since_ms"] == since
    (upstream,) = b_down["upstreams"]
    assert upstream["last_heartbeat_ms"] == b_before["upstreams"][0]["last_heartbeat_ms"]
    assert upstream["age_s"] > b_before["upstreams"][0]["age_s"]

    (banner,) = status["banners"]
    assert banner["kind"] == "cluster" and banner["name"] == "B"
    assert banner["text"].startswith(f"B (target of A->B, source of B->A) unreachable since {when(since)} (")
    assert banner["text"].endswith(f" ago); showing values as of {when(b_before['as_of_ms'])}")
    # On the page its times are shown as every other time there (local time and age, UTC on hover).
    shown = next(part for part in page.text.split('<div class="banner">')[1:])
    assert html.escape("B (target of A->B, source of B->A) unreachable since ") in shown
    assert f'data-ms="{since}"' in shown and f'data-ms="{b_before["as_of_ms"]}"' in shown
    assert "showing values as of" in shown
    # The page keeps the flow's last values, greyed with their age, and still links its last run.
    stale_row = next(r for r in page.text.split("<tr") if "A-&gt;B</a> (last known)" in r)
    assert 'class="stale" title="values as of ' in stale_row
    assert "../dags/mirrorflow__A__B__replicate/runs/ab-1" in stale_row

    after = series(metrics.text)
    assert after.keys() >= metrics_before.keys(), "every series stays while the target is down"
    for key, value in metrics_before.items():
        if key[0] not in MOVING:
            assert after[key] == value, key
    assert after[("mirrorflow_flow_stale", (("flow", "A->B"),))] == 1.0
    assert after[("mirrorflow_flow_stale", (("flow", "B->A"),))] == 1.0
    assert after[("mirrorflow_cluster_up", (("cluster", "B"),))] == 0.0
    assert after[("mirrorflow_cluster_unreachable_seconds", (("cluster", "B"),))] > 0
    assert after[("mirrorflow_cluster_unreachable_seconds", (("cluster", "A"),))] == 0.0
    age = after[("mirrorflow_flow_data_age_seconds", (("flow", "A->B"),))]
    assert age >= (since - before["generated_ms"]) / 1000

    b.kafka.start()
    # Right after a restart the broker may still refuse a request or two (leader epochs being
    # loaded): the next refresh reads it whole, as the thread's next one would.
    deadline = time.monotonic() + 30
    app.refresh()
    while any(row["error"] for row in app.get("/status").json()["clusters"]):
        assert time.monotonic() < deadline, app.get("/status").json()["clusters"]
        time.sleep(0.5)
        app.refresh()
    back = app.get("/status").json()
    assert back["banners"] == []
    for row in back["flows"] + back["clusters"]:
        assert (row["stale"], row["error"], row["unreachable_since_ms"]) == (False, None, None), row
        assert row["as_of_ms"] == back["generated_ms"]
    assert {f["flow"]: f["last_run"]["run_id"] for f in back["flows"]} == {"A->B": "ab-1", "B->A": "ba-1"}
    metrics_back = series(app.get("/metrics").text)
    assert metrics_back[("mirrorflow_flow_stale", (("flow", "A->B"),))] == 0.0
    assert metrics_back[("mirrorflow_cluster_up", (("cluster", "B"),))] == 1.0
    assert metrics_back[("mirrorflow_cluster_unreachable_seconds", (("cluster", "B"),))] == 0.0


def test_requests_answer_collecting_then_from_the_background_snapshot(kafka_clusters) -> None:
    """The first snapshot takes at least one timeout here (cluster B never answers): requests
    say "collecting" within about a second instead of waiting for it; the thread then refreshes
    on its own, and stops with the app."""
    (a,) = kafka_clusters(1)

    class Gone:
        alias, bootstrap = "B", "127.0.0.1:1"

    config = mm2_config([a, Gone()], ["A->B"])
    app = create_app(lambda: config, timeout_s=2.0, refresh_s=0.5)
    snapshots = app.state.status_snapshots
    with TestClient(app) as client:
        first, first_s = timed_get(client, "/status")
        assert first_s < 1.5, first_s
        collecting = first.json()
        assert collecting["snapshot"]["state"] == "collecting"
        assert collecting["snapshot"]["collecting_since_ms"] is not None
        assert (collecting["clusters"], collecting["flows"], collecting["banners"]) == ([], [], [])
        metrics, metrics_s = timed_get(client, "/metrics")
        assert metrics_s < 1.5 and "mirrorflow_status_ready 0.0" in metrics.text
        assert snapshots.running

        deadline = time.monotonic() + 30
        while client.get("/status").json()["snapshot"]["state"] != "ready":
            assert time.monotonic() < deadline, "no snapshot within 30 s"
            time.sleep(0.2)
        first_ready = client.get("/status").json()
        (flow,) = first_ready["flows"]
        assert flow["stale"] is True and flow["as_of_ms"] is None and flow["last_run"] is None
        (banner,) = first_ready["banners"]
        assert banner["text"].startswith("B (target of A->B) unreachable since ")
        assert banner["text"].endswith("; no values read since the status page started")
        assert "mirrorflow_status_ready 1.0" in client.get("/metrics").text
        # Without a request asking for it, the thread reads again (each read waits 2 s on B).
        while client.get("/status").json()["generated_ms"] == first_ready["generated_ms"]:
            assert time.monotonic() < deadline, "the snapshot was not refreshed"
            time.sleep(0.2)
        again = client.get("/status").json()
        assert again["flows"][0]["unreachable_since_ms"] == flow["unreachable_since_ms"]
    assert not snapshots.running, "the refresh thread stops with the app"
