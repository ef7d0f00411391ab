"""Lag in seconds of a micro-batch flow on the status page and in the metrics, rendered from the
status records its window's tasks really write (TaskFigures fed with batches and UnitResults,
stored as JSON, merged as the status reads them): per flow and per topic, now and p50 / p99 over
the last minutes, beside the lag in records; and the task log's line of figures."""

from __future__ import annotations

import json
import time
import xml.etree.ElementTree as ET

from mirrorflow import metrics
from mirrorflow.airflow.status_page import PageView, render_content
from mirrorflow.config import load_config
from mirrorflow.control.mirror_status import FlowStatus, MirrorStatus
from mirrorflow.control.window_status import window_overview
from mirrorflow.replicate.copy import UnitResult
from mirrorflow.replicate.window.figures import TaskFigures, lag_line, merge_status


def _stored(figures: TaskFigures, index: int, batches: int) -> dict:
    """A task's status record as the run-records topic holds it."""
    body = figures.status(index=index, tasks=2, attempt=f"attempt-{index}", batches=batches, partitions=2)
    return json.loads(json.dumps(body, separators=(",", ":")))


def _window() -> dict:
    """Two tasks of one window: the first copies `orders`, whose records mostly wait 200 ms and
    twice 1.5 s; the second copies `payments`, 50 ms each batch."""
    now_ms = int(time.time() * 1000)
    orders, payments = TaskFigures(), TaskFigures()
    for batch in range(100):
        waited = 1_500 if batch in (40, 80) else 200
        result = UnitResult("orders", 0, "A.orders", 0, 10, records=10, bytes=10_240, waited_ms=waited)
        orders.batch({"orders": waited}, [result], now_ms)
        paid = UnitResult("payments", 1, "A.payments", 0, 3, records=3, bytes=3_072, waited_ms=50)
        payments.batch({"payments": 50}, [paid], now_ms)
    return window_overview(
        "scheduled__w1", merge_status([_stored(orders, 0, 100), _stored(payments, 1, 100)])
    )


def _status(window: dict) -> MirrorStatus:
    flow = FlowStatus(
        "A->B", "A", "B", lag={"orders": 120, "payments": 0}, window=window, as_of_ms=window["at_ms"]
    )
    return MirrorStatus(window["at_ms"], [], [flow])


def test_a_windows_records_give_the_flows_and_each_topics_lag_in_seconds() -> None:
    window = _window()

    assert window["records"] == 100 * 10 + 100 * 3
    assert window["tasks"] == 2
    # The flow lags as its worst topic: p50 is orders' 200 ms (buckets are 10 % wide), p99 and
    # max its two 1.5 s batches, not an average with the other task's 50 ms.
    assert 0.2 <= window["lag_recent_s"]["p50"] <= 0.22
    assert window["lag_recent_s"]["p99"] == window["lag_recent_s"]["max"] == 1.5
    assert 0.05 <= window["topics"]["payments"]["p99"] <= 0.055
    assert window["topics"]["orders"]["max"] == 1.5
    assert list(window["topics"]) == ["orders", "payments"], "the most lagging topic first"


def test_the_metrics_show_lag_in_seconds_per_flow_and_topic_beside_records() -> None:
    window = _window()
    text = metrics.render(_status(window), now_ms=window["at_ms"] + 1_000).decode()
    lines = set(text.splitlines())

    assert 'mirrorflow_flow_lag_seconds{flow="A->B",stat="p99"} 1.5' in lines
    assert 'mirrorflow_flow_lag_seconds{flow="A->B",stat="max"} 1.5' in lines
    assert any(line.startswith('mirrorflow_flow_lag_seconds{flow="A->B",stat="p50"} 0.2') for line in lines)
    assert 'mirrorflow_topic_lag_seconds{flow="A->B",stat="max",topic="orders"} 1.5' in lines
    assert any(
        line.startswith('mirrorflow_topic_lag_seconds{flow="A->B",stat="p99",topic="payments"} 0.05')
        for line in lines
    )
    assert 'mirrorflow_flow_window_records{flow="A->B"} 1300.0' in lines
    assert 'mirrorflow_flow_progress_lag_records{flow="A->B",topic="orders"} 120.0' in lines
    batch_flow = FlowStatus("B->A", "B", "A", lag={"orders": 4})
    assert (
        "B->A"
        not in metrics.render(MirrorStatus(window["at_ms"], [], [batch_flow]))
        .decode()
        .split("mirrorflow_flow_lag_seconds", 1)[-1]
    ), "a batch flow has no lag in seconds"


def test_the_status_page_shows_lag_in_seconds_under_the_records_of_the_flow_and_its_topics() -> None:
    window = _window()
    config = load_config(
        "clusters = A, B\nA.bootstrap.servers = a:9092\nB.bootstrap.servers = b:9092\nA->B.enabled = true\n"
        "A->B.mirrorflow.replicate.mode = micro-batch\n"
    )
    view = PageView(
        status=_status(window),
        snapshot={"refresh_interval_s": 15.0, "refresh_error": None},
        banners=[],
        now_ms=window["at_ms"],
        config=config,
    )
    page = render_content(view)
    ET.fromstring(f"<div>{page.replace('&nbsp;', ' ')}</div>")  # well-formed

    p99 = f"p99 {1.5:.2f} s (last 5 min)"
    flows = page.split("<h2", 2)[1]
    assert "120" in flows and p99 in flows
    topics = page[page.index("Topics, the worst first") :]
    orders = topics[topics.index(">orders<") :].split("</tr>", 1)[0]
    assert p99 in orders
    payments = topics[topics.index(">payments<") :].split("</tr>", 1)[0]
    assert "p99 0.05 s" in payments


def test_the_task_log_line_says_records_rate_and_lag() -> None:
    window = _window()
    merged = {
        "records": window["records"],
        "lag_now_s": window["lag_now_s"],
        "lag_recent_s": window["lag_recent_s"],
        "partitions": 4,
        "tasks": 2,
        "batches": 200,
    }
    line = lag_line("A->B", merged, previous_records=300, seconds=5.0)
    # Lag now is the last batch's (orders' 200 ms); p50 its bucket's bound.
    assert line.startswith("window A->B: 1,300 records (200/s), lag now 0.20s, p50 0.21s")
    assert "p99 1.50s (last minutes); 4 partitions, 2 task(s), 200 batches" in line


def test_a_windows_rate_is_over_the_last_minute_and_its_tasks_rates_add_up() -> None:
    """The running window's row showed records and lag but no rate (issue 36): each task's status
    record gives records and bytes per second over about the last minute, and the window's rate is
    the sum of its tasks' (they copy disjoint partitions)."""
    from mirrorflow.replicate.window.figures import _Rate

    rate = _Rate(0)
    assert rate.figures(30_000, 3_000, 3_000_000) == {
        "records_per_s": 100.0,
        "bytes_per_s": 100_000.0,
        "span_s": 30.0,
    }
    # A minute with nothing copied reads 0, not the window's average so far.
    assert rate.figures(90_000, 3_000, 3_000_000)["records_per_s"] == 0.0
    # The span starts at the newest mark at least a minute old (30 s): 500 records in 70 s.
    assert rate.figures(100_000, 3_500, 3_500_000) == {
        "records_per_s": 7.1,
        "bytes_per_s": 7142.9,
        "span_s": 70.0,
    }

    window = _window()
    tasks = [window["records_per_s"], window["bytes_per_s"]]
    assert tasks[0] > 0 and tasks[1] > tasks[0]  # both tasks' records, 1 KiB each
    view = PageView(
        status=_status(window),
        snapshot={"refresh_interval_s": 15.0, "refresh_error": None},
        banners=[],
        now_ms=window["at_ms"] + 1_000,
        config=load_config(
            "clusters = A, B\nA.bootstrap.servers = a:9092\nB.bootstrap.servers = b:9092\n"
            "A->B.enabled = true\nA->B.mirrorflow.replicate.mode = micro-batch\n"
        ),
    )
    row = render_content(view).split("A-&gt;B", 1)[1].split("</tr>", 1)[0]
    assert f"{window['records_per_s']:,.0f} records/s" in row, row


def test_a_task_attempt_lost_with_its_executor_still_counts_for_what_it_copied() -> None:
    """The window's log line went from 10,599 records to 8,114 when an executor was killed: the
    figures kept the newest record of each task, and the task's new attempt starts counting from
    zero. What the lost attempt copied is committed, so records, bytes and batches add up over a
    task's attempts; its lag is the newest attempt's."""
    now_ms = int(time.time() * 1000)
    lost, following, other = TaskFigures(), TaskFigures(), TaskFigures()
    for _ in range(40):
        lost.batch(
            {"orders": 3_000}, [UnitResult("orders", 0, "A.orders", 0, 5, records=5, bytes=500)], now_ms
        )
        other.batch(
            {"payments": 50}, [UnitResult("payments", 1, "A.payments", 0, 2, records=2, bytes=200)], now_ms
        )
    for _ in range(10):
        following.batch(
            {"orders": 100}, [UnitResult("orders", 0, "A.orders", 0, 1, records=1, bytes=100)], now_ms
        )

    def stored(figures: TaskFigures, index: int, attempt: str, batches: int, at_ms: int) -> dict:
        body = figures.status(index=index, tasks=2, attempt=attempt, batches=batches, partitions=2)
        return {**json.loads(json.dumps(body)), "at_ms": at_ms}

    before = merge_status([stored(lost, 0, "first", 40, now_ms), stored(other, 1, "b", 40, now_ms)])
    after = merge_status(
        [
            stored(lost, 0, "first", 40, now_ms),
            stored(other, 1, "b", 40, now_ms + 1),
            stored(following, 0, "second", 10, now_ms + 2),
        ]
    )

    assert before["records"] == 40 * 5 + 40 * 2
    assert after["records"] == before["records"] + 10 and after["bytes"] == before["bytes"] + 1_000
    assert after["batches"] == 90 and after["tasks"] == 2 and after["partitions"] == 4
    assert after["topics"]["orders"]["records"] == 210
    # The lost attempt's 3 s lag is history: the task's lag is its new attempt's 100 ms.
    assert before["lag_now_s"] == 3.0 and after["lag_now_s"] == 0.1
    assert after["topics"]["orders"]["lag_now_ms"] == 100
    assert (after["lag_window_s"]["max"] or 0) < 1.0


def lost_attempt_status(at_ms: int) -> dict:
    """The last status record of an attempt that had copied 500 records of orders."""
    figures = TaskFigures()
    for _ in range(100):
        figures.batch(
            {"orders": 2_000}, [UnitResult("orders", 0, "A.orders", 0, 5, records=5, bytes=500)], at_ms
        )
    body = figures.status(index=0, tasks=1, attempt="lost-attempt", batches=100, partitions=2)
    return {**json.loads(json.dumps(body)), "at_ms": at_ms}


def test_an_attempt_counts_each_earlier_attempt_once_however_often_it_is_carried() -> None:
    """Records of the lost attempt itself and the counts later attempts carry of it are one
    attempt's: merged once, at its newest."""
    now_ms = int(time.time() * 1000)
    lost = lost_attempt_status(now_ms - 10_000)
    second, third = TaskFigures(), TaskFigures()
    second.earlier_attempt(lost, own="second")
    second.batch({"orders": 100}, [UnitResult("orders", 0, "A.orders", 0, 3, records=3, bytes=300)], now_ms)
    second_body = {
        **second.status(index=0, tasks=1, attempt="second", batches=1, partitions=2),
        "at_ms": now_ms - 5_000,
    }
    third.earlier_attempt(json.loads(json.dumps(second_body)), own="third")
    third.batch({"orders": 50}, [UnitResult("orders", 0, "A.orders", 0, 2, records=2, bytes=200)], now_ms)
    third_body = {**third.status(index=0, tasks=1, attempt="third", batches=1, partitions=2), "at_ms": now_ms}

    assert set(third_body["earlier"]) == {"lost-attempt", "second"}
    for seen in (
        [third_body],
        [lost, third_body],
        [lost, second_body, third_body],
        [second_body, third_body],
    ):
        merged = merge_status(seen)
        assert merged["records"] == 500 + 3 + 2, [r["attempt"] for r in seen]
        assert merged["topics"]["orders"]["records"] == 500 + 5
        assert merged["tasks"] == 1 and merged["lag_now_s"] == 0.05
