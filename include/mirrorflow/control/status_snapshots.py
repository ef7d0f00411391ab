"""The replication status a long-running reader (the status app) keeps: the latest snapshot,
refreshed in the background, with the last known values of what cannot be read now.

A one-shot `mirrorflow status` reports an unreachable cluster as an error. A page and a scraper
that watch through an outage need more: the flow's last run, lag and last verification as they
were last read, how old they are, and since when the cluster has been unreachable. So a failed
read never replaces what an earlier one found; it marks it stale. And a request never waits on
Kafka: it gets the latest snapshot, which a daemon thread refreshes every `interval_s`.

Each snapshot that read a flow's lag adds a point to that flow's lag history and to its worst
topics' (LagHistory), for the page's sparklines: bounded in points per series and in topics per
flow, so a flow of 20,000 partitions costs the same as one of 50.
"""

from __future__ import annotations

import dataclasses
import heapq
import logging
import math
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from mirrorflow.control.mirror_status import (
    ClusterStatus,
    FlowStatus,
    MirrorStatus,
    error_text,
    heartbeat_age,
)

log = logging.getLogger("mirrorflow.status")

REFRESH_S = 15.0
HISTORY_POINTS = 60  # per series: 15 minutes at the default refresh
HISTORY_TOPICS = 50  # topics of a flow given a point at each refresh: its worst by lag now
HISTORY_TOPICS_KEPT = 200  # series kept per flow; those left out of the worst longest go first

Point = tuple[int, int]  # (snapshot time in ms, lag in offsets)


class LagHistory:
    """Lag now of every flow and of each flow's worst topics, at the last `points` snapshots that
    read it. A topic gets a point while it is among the `topics` worst of its flow; once tracked
    it keeps getting them (down to 0) until more than `kept` are tracked, when the ones longest
    out of the worst are dropped. Snapshots whose lag is the last known one (stale) add nothing."""

    def __init__(
        self, points: int = HISTORY_POINTS, topics: int = HISTORY_TOPICS, kept: int = HISTORY_TOPICS_KEPT
    ) -> None:
        self.points, self.topics, self.kept = points, topics, max(kept, topics)
        self._flows: dict[str, deque[Point]] = {}
        self._topics: dict[str, dict[str, deque[Point]]] = {}
        self._worst_at: dict[str, dict[str, int]] = {}  # flow -> topic -> last time among the worst
        self._lock = threading.Lock()

    def record(self, status: MirrorStatus) -> None:
        at = status.generated_ms
        with self._lock:
            names = {f.flow for f in status.flows}
            for gone in [name for name in self._flows if name not in names]:
                self._forget(gone)
            for flow in status.flows:
                if flow.lag is None or flow.stale or flow.error is not None:
                    continue
                self._series(self._flows, flow.flow).append((at, sum(flow.lag.values())))
                self._record_topics(flow.flow, flow.lag, at)

    def _series(self, table: dict[str, deque[Point]], key: str) -> deque[Point]:
        series = table.get(key)
        if series is None:
            series = table[key] = deque(maxlen=self.points)
        return series

    def _record_topics(self, flow: str, lag: dict[str, int], at: int) -> None:
        tracked = self._topics.setdefault(flow, {})
        worst_at = self._worst_at.setdefault(flow, {})
        for topic, _ in heapq.nlargest(self.topics, lag.items(), key=lambda item: (item[1], item[0])):
            worst_at[topic] = at
            tracked.setdefault(topic, deque(maxlen=self.points))
        for topic in [t for t in tracked if t not in lag]:  # deleted or filtered out
            del tracked[topic]
            worst_at.pop(topic, None)
        for topic, series in tracked.items():
            series.append((at, lag[topic]))
        if len(tracked) > self.kept:
            for topic in sorted(tracked, key=lambda t: worst_at.get(t, 0))[: len(tracked) - self.kept]:
                del tracked[topic]
                worst_at.pop(topic, None)

    def _forget(self, flow: str) -> None:
        self._flows.pop(flow, None)
        self._topics.pop(flow, None)
        self._worst_at.pop(flow, None)

    def flow(self, flow: str) -> list[Point]:
        with self._lock:
            return list(self._flows.get(flow, ()))

    def topic(self, flow: str, topic: str) -> list[Point]:
        with self._lock:
            return list(self._topics.get(flow, {}).get(topic, ()))

    def tracked_topics(self, flow: str) -> int:
        with self._lock:
            return len(self._topics.get(flow, {}))


def carry_forward(previous: MirrorStatus | None, fresh: MirrorStatus) -> MirrorStatus:
    """`fresh` with every cluster and flow it could not read filled in from `previous`, marked
    stale: `stale`, `unreachable_since_ms` (the first read that failed) and `as_of_ms` (the last
    one that did not). `fresh` is changed in place; `previous` (which requests may be reading) is
    not."""
    before_clusters = {c.alias: c for c in previous.clusters} if previous else {}
    for cluster in fresh.clusters:
        _carry_cluster(before_clusters.get(cluster.alias), cluster, fresh.generated_ms)
    before_flows = {f.flow: f for f in previous.flows} if previous else {}
    for flow in fresh.flows:
        _carry_flow(before_flows.get(flow.flow), flow, fresh.generated_ms)
    return fresh


def _failing_since(before: ClusterStatus | FlowStatus | None, now_ms: int) -> int:
    if before is not None and before.error is not None and before.unreachable_since_ms is not None:
        return before.unreachable_since_ms
    return now_ms


def _carry_cluster(before: ClusterStatus | None, cluster: ClusterStatus, now_ms: int) -> None:
    if cluster.error is None:
        return
    cluster.stale = True
    cluster.unreachable_since_ms = _failing_since(before, now_ms)
    if before is None or before.as_of_ms is None:
        return
    cluster.as_of_ms = before.as_of_ms
    cluster.heartbeat_topics = before.heartbeat_topics
    cluster.checkpoint_topics = before.checkpoint_topics
    cluster.remote_topics = before.remote_topics
    cluster.heartbeat_jobs = before.heartbeat_jobs
    # The newest heartbeat known gets older while nothing newer can be read: its age keeps
    # growing, so an alert on heartbeat age fires instead of freezing at the last value.
    cluster.upstreams = [
        dataclasses.replace(u, age_s=heartbeat_age(now_ms, u.last_heartbeat_ms)) for u in before.upstreams
    ]


def _carry_flow(before: FlowStatus | None, flow: FlowStatus, now_ms: int) -> None:
    if flow.error is None:
        return
    flow.stale = True
    flow.unreachable_since_ms = _failing_since(before, now_ms)
    if before is None:
        return
    flow.as_of_ms = before.as_of_ms
    # A source that is down still lets the target's run records be read: keep what was read now.
    if flow.last_run is None:
        flow.last_run, flow.last_run_ms = before.last_run, before.last_run_ms
    if flow.last_verification is None:
        flow.last_verification = before.last_verification
        flow.last_verification_ms = before.last_verification_ms
    if not flow.history:
        flow.history = before.history
    if flow.lag is None:
        flow.lag = before.lag
    if flow.window is None:
        flow.window = before.window


class StatusSnapshots:
    """The latest status snapshot, refreshed every `interval_s` by a daemon thread started on
    first use (`current`) and ended by `stop` (the app's shutdown); `refresh` reads one now.

    `read` must bound its own waits (mirror_status's per-call timeout), so one dead cluster holds
    a refresh for one timeout, never the requests, which answer from the snapshot at once."""

    def __init__(self, read: Callable[[], MirrorStatus], interval_s: float = REFRESH_S) -> None:
        if not (interval_s > 0 and math.isfinite(interval_s)):
            raise ValueError(f"the status refresh interval must be more than 0 s, not {interval_s}")
        self.read = read
        self.interval_s = interval_s
        self.started_ms: int | None = None  # when the thread was first started
        self._status: MirrorStatus | None = None
        self._lock = threading.Lock()  # guards the fields below and the thread
        self._reading = threading.Lock()  # one refresh at a time
        self._attempted = threading.Event()  # a first refresh ended, well or not
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._refreshed_at: float | None = None  # monotonic start of the last refresh
        self.last_duration_s: float | None = None
        self.last_error: str | None = None
        self.history = LagHistory()

    def refresh(self) -> MirrorStatus | None:
        """Read the status now and make it the latest snapshot, last known values carried over.
        A read that fails as a whole (the config cannot be loaded) keeps the snapshot there was
        and is reported in `last_error`."""
        with self._reading:
            started = time.monotonic()
            self._refreshed_at = started
            try:
                fresh = self.read()
            except Exception as exc:  # the thread must outlive a bad config edit
                log.warning("status refresh failed: %s", exc, exc_info=True)
                with self._lock:
                    self.last_error = error_text(exc)
                    self.last_duration_s = time.monotonic() - started
                self._attempted.set()
                return self._status
            status = carry_forward(self._status, fresh)
            self.history.record(status)
            with self._lock:
                self._status = status
                self.last_error = None
                self.last_duration_s = time.monotonic() - started
            self._attempted.set()
            return status

    def current(self, wait_s: float) -> MirrorStatus | None:
        """The latest snapshot; before the first exists, wait up to `wait_s` for it, then None."""
        self.start()
        if self._status is None:
            self._attempted.wait(wait_s)
        return self._status

    def start(self) -> None:
        with self._lock:
            if self._thread is not None and self._thread.is_alive() and not self._stop.is_set():
                return
            if self.started_ms is None:
                self.started_ms = int(time.time() * 1000)
            self._stop = threading.Event()
            self._thread = threading.Thread(
                target=self._run, args=(self._stop,), name="mirrorflow-status-refresh", daemon=True
            )
            self._thread.start()

    def stop(self, timeout_s: float = 5.0) -> None:
        """End the refresh thread; one in the middle of a read ends when the read does (it is a
        daemon, so it never holds the process)."""
        with self._lock:
            thread = self._thread
            self._stop.set()
        if thread is not None:
            thread.join(timeout_s)

    @property
    def running(self) -> bool:
        """Whether the refresh thread is alive (it may be ending its last read after `stop`)."""
        thread = self._thread
        return thread is not None and thread.is_alive()

    def _run(self, stop: threading.Event) -> None:
        while not stop.is_set():
            due = 0.0 if self._refreshed_at is None else self._refreshed_at + self.interval_s
            if stop.wait(max(0.0, due - time.monotonic())):
                return
            self.refresh()

    def describe(self, now_ms: int) -> dict[str, Any]:
        """What the JSON says about the snapshot itself."""
        status = self._status
        return {
            "state": "collecting" if status is None else "ready",
            "refresh_interval_s": self.interval_s,
            "generated_ms": None if status is None else status.generated_ms,
            "age_s": None if status is None else round(max(0, now_ms - status.generated_ms) / 1000, 3),
            "collecting_since_ms": self.started_ms if status is None else None,
            "last_refresh_s": None if self.last_duration_s is None else round(self.last_duration_s, 3),
            "refresh_error": self.last_error,
        }
