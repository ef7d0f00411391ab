"""A window's figures: records and lag in seconds per task, merged per window.

Each task keeps its own (TaskFigures) and stores them every few seconds (a `window` record, see
channel.py); the driver, the status page and the metrics merge the newest record of each task
attempt (merge_status). A flow's lag at a moment is its most lagging partition's, wherever it is
copied, so merged figures are the worst any task reports (p50 the largest p50, and so on): what
is merged never looks better than the worst task, as adding the tasks' samples up would (an idle
task's zeros would halve a busy one's p50). The driver's log lines of those figures (lag_line) come
when something moved, and once a minute while nothing does (StatusLines).
"""

from __future__ import annotations

import heapq
import time
from collections import deque
from collections.abc import Iterable, Mapping
from typing import Any

from mirrorflow.replicate.copy import UnitResult
from mirrorflow.replicate.window.lag import LagHistogram, RecentLag

TOPIC_ROWS = 50
"""Topics a status record names, the most lagging first; the flow-wide figures cover them all."""


class _Topic:
    __slots__ = ("records", "bytes", "now_ms", "recent", "whole")

    def __init__(self) -> None:
        self.records = 0
        self.bytes = 0
        self.now_ms = 0
        self.recent = RecentLag()
        self.whole = LagHistogram()


RATE_SPAN_MS = 60_000
"""The rates a status record gives are over about the last minute (since the task started, before)."""


class _Rate:
    """Records and bytes per second over the last RATE_SPAN_MS, from the totals at each status."""

    def __init__(self, now_ms: int) -> None:
        self.marks: deque[tuple[int, int, int]] = deque([(now_ms, 0, 0)])

    def figures(self, now_ms: int, records: int, size: int) -> dict[str, float]:
        # Keep the newest mark at least RATE_SPAN_MS old (the span's start) and those after it.
        while len(self.marks) > 1 and self.marks[1][0] <= now_ms - RATE_SPAN_MS:
            self.marks.popleft()
        at, then_records, then_bytes = self.marks[0]
        self.marks.append((now_ms, records, size))
        span = max(now_ms - at, 1) / 1000
        return {
            "records_per_s": round((records - then_records) / span, 1),
            "bytes_per_s": round((size - then_bytes) / span, 1),
            "span_s": round(span, 1),
        }


class TaskFigures:
    def __init__(self) -> None:
        self.records = 0
        self.bytes = 0
        self.now_ms = 0
        self.recent = RecentLag()
        self.whole = LagHistogram()
        self.topics: dict[str, _Topic] = {}
        self.rate = _Rate(int(time.time() * 1000))
        self.earlier: dict[str, dict[str, Any]] = {}
        """What the task's earlier attempts (lost with their executors) had copied, by attempt id,
        from their newest status records: carried in this attempt's records, so that whoever reads
        only the newest records (the status page) still counts them."""

    def earlier_attempt(self, record: Mapping[str, Any], *, own: str) -> None:
        """An earlier attempt's status record, and the attempts it carried in turn: the newest
        counts of each but `own` (this attempt) are kept."""
        for attempt, counts in [
            (str(record.get("attempt", "")), copied(record)),
            *record.get("earlier", {}).items(),
        ]:
            if attempt == own:
                continue
            known = self.earlier.get(attempt)
            if known is None or counts["at_ms"] >= known["at_ms"]:
                self.earlier[attempt] = counts

    def batch(self, samples: Mapping[str, int], results: Iterable[UnitResult], now_ms: int) -> None:
        """One batch: what it copied, and one lag sample per topic (the worst of its partitions)."""
        for result in results:
            topic = self._topic(result.topic)
            topic.records += result.records
            topic.bytes += result.bytes
            self.records += result.records
            self.bytes += result.bytes
        if not samples:
            return
        worst = max(samples.values())
        self.now_ms = worst
        self.recent.add(worst, now_ms)
        self.whole.add(worst)
        for name, ms in samples.items():
            topic = self._topic(name)
            topic.now_ms = ms
            topic.recent.add(ms, now_ms)
            topic.whole.add(ms)

    def _topic(self, name: str) -> _Topic:
        found = self.topics.get(name)
        if found is None:
            found = self.topics[name] = _Topic()
        return found

    def status(
        self, *, index: int, tasks: int, attempt: str, batches: int, partitions: int
    ) -> dict[str, Any]:
        now_ms = int(time.time() * 1000)
        recent = {name: topic.recent.histogram(now_ms) for name, topic in self.topics.items()}
        shown = heapq.nsmallest(
            TOPIC_ROWS, self.topics, key=lambda name: (-(recent[name].quantile(0.99) or 0), name)
        )
        return {
            "task": index,
            "tasks": tasks,
            "attempt": attempt,
            "at_ms": now_ms,
            "batches": batches,
            "partitions": partitions,
            "records": self.records,
            "bytes": self.bytes,
            "rate": self.rate.figures(now_ms, self.records, self.bytes),
            "lag_now_ms": self.now_ms,
            "lag_recent": self.recent.histogram(now_ms).figures(),
            "lag_window": self.whole.figures(),
            "topics": {
                name: {
                    "records": self.topics[name].records,
                    "bytes": self.topics[name].bytes,
                    "lag_now_ms": self.topics[name].now_ms,
                    "recent": recent[name].figures(),
                    "window": self.topics[name].whole.figures(),
                }
                for name in shown
            },
            "topics_count": len(self.topics),
            **({"earlier": self.earlier} if self.earlier else {}),
        }


def worst(rows: Iterable[Mapping[str, float | None]]) -> dict[str, float | None]:
    """The largest of each figure (p50, p99, max) over `rows`; None where no row has one."""
    out: dict[str, float | None] = {"p50": None, "p99": None, "max": None}
    for row in rows:
        for name, value in row.items():
            if value is not None:
                out[name] = max(out.get(name) or 0.0, value)
    return out


def attempt_key(record: Mapping[str, Any]) -> tuple[int, str]:
    """Which task attempt a status record is of: (task index, attempt id; "" in older records)."""
    return int(record["task"]), str(record.get("attempt", ""))


def copied(record: Mapping[str, Any]) -> dict[str, Any]:
    """What a status record says its attempt copied: what still counts once the attempt is gone."""
    return {
        "at_ms": record["at_ms"],
        "batches": record["batches"],
        "records": record["records"],
        "bytes": record["bytes"],
        "topics": {
            name: {"records": row["records"], "bytes": row["bytes"]}
            for name, row in record.get("topics", {}).items()
        },
    }


def merge_status(records: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """One window's figures from its tasks' status records (any number of each, in any order).

    The newest record of each task attempt counts. A task's newest attempt gives its partitions,
    rates and lag; records, bytes and batches add up over all its attempts, since what an attempt
    Spark lost with its executor had copied is committed and the attempt that follows it copies
    on from there (so the figures never go down when an executor is lost). A later attempt carries
    its earlier attempts' counts in its records (TaskFigures.earlier): they count even when none
    of the earlier attempts' own records is among `records`."""
    of_attempt: dict[tuple[int, str], Mapping[str, Any]] = {}
    for record in records:
        key = attempt_key(record)
        if key not in of_attempt or record["at_ms"] >= of_attempt[key]["at_ms"]:
            of_attempt[key] = record
    current: dict[int, tuple[int, str]] = {}  # each task's newest attempt
    for key, record in of_attempt.items():
        task = key[0]
        if task not in current or record["at_ms"] >= of_attempt[current[task]]["at_ms"]:
            current[task] = key
    live = set(current.values())
    tasks = [of_attempt[key] for key in live]
    counts = {key: copied(record) for key, record in of_attempt.items()}
    for (task, _), record in of_attempt.items():
        for attempt, carried in record.get("earlier", {}).items():
            key = (task, attempt)
            if key not in counts or carried["at_ms"] > counts[key]["at_ms"]:
                counts[key] = carried
    attempts = list(counts.values())
    topics: dict[str, dict[str, Any]] = {}

    def topic(name: str) -> dict[str, Any]:
        return topics.setdefault(
            name, {"records": 0, "bytes": 0, "lag_now_ms": 0, "recent": {}, "window": {}}
        )

    for counted in attempts:
        for name, row in counted["topics"].items():
            topic(name)["records"] += row["records"]
            topic(name)["bytes"] += row["bytes"]
    for record in tasks:
        for name, row in record.get("topics", {}).items():
            merged = topic(name)
            merged["lag_now_ms"] = max(merged["lag_now_ms"], row["lag_now_ms"])
            for span in ("recent", "window"):
                merged[span] = worst([merged[span], row[span]])
    return {
        "tasks": len(tasks),
        "at_ms": max((r["at_ms"] for r in tasks), default=0),
        "batches": sum(r["batches"] for r in attempts),
        "partitions": sum(r["partitions"] for r in tasks),
        "records": sum(r["records"] for r in attempts),
        "bytes": sum(r["bytes"] for r in attempts),
        # Tasks copy disjoint partitions: their rates add up. A record of an older version has none.
        "records_per_s": round(sum(r.get("rate", {}).get("records_per_s", 0.0) for r in tasks), 1),
        "bytes_per_s": round(sum(r.get("rate", {}).get("bytes_per_s", 0.0) for r in tasks), 1),
        "lag_now_s": round(max((r["lag_now_ms"] for r in tasks), default=0) / 1000, 3),
        "lag_recent_s": worst(r["lag_recent"] for r in tasks),
        "lag_window_s": worst(r["lag_window"] for r in tasks),
        "topics": topics,
    }


def lag_line(flow: str, merged: Mapping[str, Any], *, previous_records: int = 0, seconds: float = 0.0) -> str:
    """A log line of a window's figures: records (and their rate), lag now and over the last minutes."""
    recent = merged["lag_recent_s"]
    rate = (merged["records"] - previous_records) / seconds if seconds > 0 else None
    rate_text = f" ({rate:,.0f}/s)" if rate is not None else ""

    def secs(value: float | None) -> str:
        return "-" if value is None else f"{value:.2f}s"

    return (
        f"window {flow}: {merged['records']:,} records{rate_text}, lag now {secs(merged['lag_now_s'])}, "
        f"p50 {secs(recent['p50'])}, p99 {secs(recent['p99'])} (last minutes); "
        f"{merged['partitions']:,} partitions, {merged['tasks']} task(s), {merged['batches']:,} batches"
    )


IDLE_LINE_S = 60.0
"""While nothing moves, the longest between two status lines: one a minute says the window is alive."""


class StatusLines:
    """Which of a window's merged figures (merge_status) become a log line: one whenever something
    moved since the last line (records copied, records waiting to be copied: lag now above zero,
    partitions or tasks come or gone), at most one per `every_s`; while nothing moves, one per
    `idle_s`, which says so. An idle hour is 60 lines, not one per status round (720)."""

    def __init__(self, flow: str, *, now: float, every_s: float, idle_s: float = IDLE_LINE_S) -> None:
        self.flow, self.every_s, self.idle_s = flow, every_s, idle_s
        self.said_at = now
        self.said = (0, 0, 0)
        """Records, partitions and tasks as the last line said them."""

    def line(self, merged: Mapping[str, Any], now: float) -> str | None:
        """The line to log for `merged` at `now` (monotonic seconds), or None."""
        state = (merged["records"], merged["partitions"], merged["tasks"])
        moved = state != self.said or merged["lag_now_s"] > 0
        quiet = now - self.said_at
        if quiet < (self.every_s if moved else self.idle_s):
            return None
        text = lag_line(self.flow, merged, previous_records=self.said[0], seconds=quiet)
        if not moved:
            text += f"; nothing to copy in the last {quiet:.0f}s"
        self.said_at, self.said = now, state
        return text
