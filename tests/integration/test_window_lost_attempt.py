"""A task attempt Spark lost with its executor still counts on the status page.

Spark runs a window's task again when its executor is lost; the new attempt counts its records
from zero. The status page reads the run-records topic backwards only until it has the newest
status record of each task (control/window_status.py), so the lost attempt's records, further
back, dropped out of the flow's figures. A new attempt now reads its task's earlier attempts'
status records and carries their counts in its own (window/figures.py). Here the lost attempt is
forged: its status record is stored just before the new attempt's first batch, and enough of
another flow's records after it that the page's first read stops short of it."""

from __future__ import annotations

import time

from confluent_kafka import Producer

from mirrorflow.control.window_status import FIRST_SCAN, window_lag
from mirrorflow.replicate.copy import UnitResult
from mirrorflow.replicate.runs import RUNS_TOPIC, run_key
from mirrorflow.replicate.window import task
from mirrorflow.replicate.window.channel import STATUS, StatusWriter
from mirrorflow.replicate.window.figures import TaskFigures

from .kafkatools import create_topics, produce
from .mirror_setup import mm2_config
from .window_tools import WindowRun

LOST_RECORDS = 500


def lost_attempt_status(topic: str, at_ms: int) -> dict:
    """The last status record of an attempt that had copied LOST_RECORDS records of `topic`."""
    figures = TaskFigures()
    for _ in range(LOST_RECORDS // 5):
        figures.batch({topic: 2_000}, [UnitResult(topic, 0, f"A.{topic}", 0, 5, records=5, bytes=500)], at_ms)
    body = figures.status(index=0, tasks=1, attempt="lost-attempt", batches=LOST_RECORDS // 5, partitions=2)
    return {**body, "at_ms": at_ms}


def test_a_new_attempt_carries_what_the_lost_attempt_copied_to_the_status_page(
    shared_clusters, unique, monkeypatch
) -> None:
    a, b, _ = shared_clusters
    topic = unique("lost-attempt")
    create_topics(a.bootstrap, (topic, 2))
    produce(a.bootstrap, topic, [{"key": b"%d" % i, "value": b"v", "partition": i % 2} for i in range(40)])
    config = mm2_config(
        [a, b], ["A->B"], f"topics = {topic}\ntasks.max = 1\nmirrorflow.replicate.mode = micro-batch\n"
    )
    run_id = unique("window")
    window = WindowRun(config, run_id, length_s=8, handover=False, in_process=True)
    real_takeover = task.write_takeover

    def lost_attempt_first(producer_config, flow, run, **kwargs):
        # Before this attempt's writers open: the attempt Spark lost, then another flow's records.
        lost = StatusWriter(producer_config, flow, run)
        lost.send(lost_attempt_status(topic, int(time.time() * 1000) - 60_000))
        lost.close(30)
        noise = Producer({"bootstrap.servers": b.bootstrap})
        for i in range(FIRST_SCAN * 6):
            noise.produce(RUNS_TOPIC, key=run_key("X->Y", "other", STATUS), value=b"{}", partition=0)
            if i % 500 == 0:
                noise.poll(0)
        assert noise.flush(30) == 0
        return real_takeover(producer_config, flow, run, **kwargs)

    monkeypatch.setattr(task, "write_takeover", lost_attempt_first)
    window.start()
    result = window.result(120)
    assert result.ok, result.error
    copied = result.report.totals()["records"]
    assert copied == 40

    lag = window_lag(b.client_config(), "A->B", timeout_s=30)
    assert lag is not None and lag["run_id"] == run_id
    # The page read only the newest span (the lost record is FIRST_SCAN * 6 records further
    # back), yet it counts the lost attempt's records beside this attempt's.
    assert lag["records"] == copied + LOST_RECORDS, lag
    assert lag["topics"][topic]["records"] == copied + LOST_RECORDS
    # The lag is the live attempt's, not the lost one's 2 s.
    assert lag["lag_now_s"] < 2.0
    # The driver, which reads every record, counts the lost attempt once, not twice.
    assert result.report.window["lost_attempts"] == {"count": 1, "records": LOST_RECORDS, "bytes": 50_000}
