"""Heartbeats that stopped, on a micro-batch flow (issue 36, item 2): the page showed the backup
heartbeat green at 14 minutes old, because its thresholds came from the batch schedule (every 5
minutes) that a micro-batch flow does not use. A heartbeat is now judged against its emit interval
(plus each hop's micro-batch interval for one copied from upstream), so two minutes without one is
late and red, on real clusters through the real status app: page, JSON and metrics."""

from __future__ import annotations

import re
import time

import pytest

from mirrorflow.airflow.status_app import TOKEN_ENV
from mirrorflow.mm2.formats import Heartbeat

from .kafkatools import create_topics, produce
from .mirror_setup import mm2_config

STOPPED_S = 120
MICRO_BATCH = "A->B.mirrorflow.replicate.mode = micro-batch\nA->B.mirrorflow.microbatch.interval.ms = 250\n"


def _plant(bootstrap: str, topic: str, source: str, target: str, at_ms: int) -> None:
    """The newest heartbeat of `topic`, as MM2's heartbeat job (or a copy of its topic) writes it."""
    create_topics(bootstrap, (topic, 1, {"cleanup.policy": "compact"}))
    beat = Heartbeat(source, target, at_ms)
    produce(bootstrap, topic, [{"key": beat.key_bytes(), "value": beat.value_bytes()}])


def test_a_micro_batch_flows_heartbeats_turn_late_minutes_before_the_batch_schedule_would(
    kafka_clusters, status_app, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = kafka_clusters(2)
    config = mm2_config([a, b], ["A->B"], MICRO_BATCH)
    now_ms = int(time.time() * 1000)
    stopped_ms = now_ms - STOPPED_S * 1000
    # Into B: the A->B job's heartbeats, and A's own copied by the micro-batch flow, stopped two
    # minutes ago; into A: the B->A job's, fresh.
    _plant(b.bootstrap, "heartbeats", "A", "B", stopped_ms)
    _plant(b.bootstrap, "A.heartbeats", "A", "B", stopped_ms)
    _plant(a.bootstrap, "heartbeats", "B", "A", now_ms)
    monkeypatch.delenv(TOKEN_ENV, raising=False)
    client = status_app(config)

    jobs = {j["job"]: j for j in client.get("/status").json()["health"]["heartbeat_jobs"]}
    assert jobs["B->A"]["state"] == "healthy", jobs
    # 1 s interval: amber past 3 s and red past 10 s, each plus the minute Airflow may take to
    # start the next heartbeat run; the batch schedule's 5 minutes would have said healthy.
    assert (jobs["A->B"]["state"], jobs["A->B"]["level"]) == ("late", "bad"), jobs
    metrics = client.get("/metrics").text
    assert 'mirrorflow_heartbeat_job_expected_seconds{cluster="B",source="A"} 1.0' in metrics
    # A's heartbeat copied to B: its emit interval plus the flow's 250 ms interval, not 5 minutes.
    assert 'mirrorflow_heartbeat_expected_seconds{cluster="B",upstream="A"} 1.25' in metrics
    page = client.get("/ui", params={"fragment": 1}).text
    upstream = re.search(r"<tr><td>B</td>.*?</tr>", page, re.S)
    assert upstream and 'class="badge bad"' in upstream.group(0) and "late" in upstream.group(0), page
