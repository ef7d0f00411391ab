"""A micro-batch flow's lag in seconds for the status page and the metrics, from the status
records of its newest window.

Every task of a window stores its figures every few seconds (replicate/window/channel.py, `window`
records): records copied, lag now, and p50 / p99 over the last minutes, already summed up in the
task. So the newest record of each task of the newest window is all the status needs: it reads
the run-records topic backwards from its end in widening spans, as for the run summaries, until
it has one record of each of that window's tasks, or MAX_SCAN records (a window's tasks store
theirs every few seconds each, so they are near the end).
"""

from __future__ import annotations

import heapq
import json
from collections.abc import Mapping
from typing import Any

from mirrorflow.replicate.run_history import read_ranges, runs_bounds
from mirrorflow.replicate.run_reading import parse_key
from mirrorflow.replicate.runs import RUNS_TOPIC
from mirrorflow.replicate.window.channel import STATUS
from mirrorflow.replicate.window.figures import TOPIC_ROWS, attempt_key, merge_status

FIRST_SCAN = 256
MAX_SCAN = 16_384


def window_lag(consumer_config: dict[str, Any], flow: str, *, timeout_s: float) -> dict[str, Any] | None:
    """The lag of `flow`'s newest window (window_overview), None when it never ran one."""
    bounds = runs_bounds(consumer_config, timeout_s)
    if bounds is None:
        return None
    low, high = bounds
    run_id: str | None = None
    tasks = 0
    # The newest record of each task attempt. An attempt lost with its executor still counts for
    # the records it copied: its task's next attempt carries them in its own records (merge_status).
    newest: dict[tuple[int, str], dict[str, Any]] = {}
    end, span = high, FIRST_SCAN
    while end > max(low, high - MAX_SCAN) and (run_id is None or len({t for t, _ in newest}) < tasks):
        start = max(low, high - MAX_SCAN, end - span)
        found = []
        for message in read_ranges(consumer_config, {(RUNS_TOPIC, 0): (start, end)}, timeout_s):
            name, run, kind, chunked = parse_key(message)
            if name == flow and kind == STATUS and not chunked:
                found.append((run, message.value()))
        for run, value in reversed(found):
            body = json.loads(value)
            if run_id is None:
                run_id, tasks = run, int(body.get("tasks", 1))
            if run == run_id:
                newest.setdefault(attempt_key(body), body)
        end, span = start, span * 4
    if run_id is None:
        return None
    return window_overview(run_id, merge_status(newest.values()))


def window_overview(run_id: str, merged: Mapping[str, Any]) -> dict[str, Any]:
    """What the status keeps of a window's merged figures: the flow's lag in seconds now and over
    the last minutes, and the TOPIC_ROWS most lagging topics' (p99 first)."""
    topics = merged["topics"]
    worst = heapq.nsmallest(
        TOPIC_ROWS, topics, key=lambda name: (-(topics[name]["recent"].get("p99") or 0), name)
    )
    return {
        "run_id": run_id,
        "at_ms": merged["at_ms"],
        "tasks": merged["tasks"],
        "partitions": merged["partitions"],
        "records": merged["records"],
        "records_per_s": merged["records_per_s"],
        "bytes_per_s": merged["bytes_per_s"],
        "lag_now_s": merged["lag_now_s"],
        "lag_recent_s": dict(merged["lag_recent_s"]),
        "topics": {
            name: {
                "records": topics[name]["records"],
                "lag_now_s": round(topics[name]["lag_now_ms"] / 1000, 3),
                **topics[name]["recent"],
            }
            for name in worst
        },
    }
