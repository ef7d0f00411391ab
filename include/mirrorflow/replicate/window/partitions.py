"""One partition as a window's task sees it from batch to batch: where its next range starts,
what the window copied of it so far, since when records have been waiting, and its failures.

The first range of a partition is its plan's span (or a refreshed plan's, for a partition that
joined or a topic created again): it carries the plan's view of progress and incarnation, and
the writer resumes after whatever was committed since (resume.py). Every later range starts right
after the progress the window itself committed, for the same incarnation, as the engine expects.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterable

from mirrorflow.replicate.copy import UnitResult, merge_ranges
from mirrorflow.replicate.plan import COPY_SLOTS, PartitionSpan
from mirrorflow.replicate.window.settings import QUIET_AFTER_S, WindowSettings

SUMMED = (
    "records",
    "bytes",
    "skipped_loops",
    "retimed",
    "transactions",
    "offset_syncs",
    "offset_sync_errors",
    "attempts",
    "interleaved_chunks",
)
BACKOFF_MAX_S = 60.0


class PartitionState:
    __slots__ = (
        "base",
        "committed",
        "total",
        "pending_since_ms",
        "failures",
        "retry_at",
        "stale",
        "slots",
        "turn",
        "end",
        "moved_at",
        "_lost_counted",
    )

    def __init__(self, base: PartitionSpan, slots: int = COPY_SLOTS, turn: int = 0) -> None:
        self.base = base
        self.slots = slots
        """The flow's writer slots: what the window's commits wrote its progress under."""
        self.turn = turn
        """Which batch of a round asks its end offset while it is quiet (see due)."""
        self.end = -1
        """Its last stable offset as last listed (-1: not listed yet)."""
        self.moved_at = time.monotonic()
        """When its listed end last moved (or the task began to copy it)."""
        self.committed: int | None = None
        """Progress committed for base.incarnation since the window started (None: the plan's)."""
        self.total: UnitResult | None = None
        self.pending_since_ms: int | None = None
        self.failures = 0
        self.retry_at = 0.0
        self.stale = False
        """Its last range was not copied because its plan no longer holds (see refreshed)."""
        self._lost_counted = False

    @property
    def key(self) -> tuple[str, int]:
        return self.base.topic, self.base.partition

    @property
    def progress(self) -> int:
        return self.base.progress if self.committed is None else self.committed

    def refreshed(self, span: PartitionSpan) -> bool:
        """Whether a refreshed plan's `span` restarts the partition: it copies between other
        topic incarnations (a topic deleted and created again), or the partition's plan went
        stale (its progress moved after the plan that restarted it read it, as when the refresh
        raced a commit of the old incarnation) and the refreshed plan sees it otherwise. Without
        the second, every retry of a stale partition failed the same way until the window ended."""
        if span.incarnation != self.base.incarnation and span.incarnation.split(",")[0]:
            return True
        return self.stale and span != self.base

    def restart(self, base: PartitionSpan) -> None:
        """Its next range is the refreshed plan's, and its failures are forgotten."""
        self.base = base
        self.committed = None
        self.failures = 0
        self.retry_at = 0.0
        self.stale = False
        self._lost_counted = False

    def ready(self, now: float) -> bool:
        return now >= self.retry_at

    def absent(self, interval_s: float) -> None:
        """The source does not have the partition now (its topic deleted): asked again later, less
        and less often, until a refreshed plan says what became of it."""
        self.failures += 1
        self.retry_at = time.monotonic() + min(BACKOFF_MAX_S, interval_s * 2**self.failures)

    def next_span(self, end: int, max_records: int, *, always: bool) -> PartitionSpan | None:
        """The next range, up to `end` (the last stable offset now) and at most `max_records`
        long; None when there is nothing to do (unless `always`: a takeover opens every slot)."""
        base = self.base
        if self.committed is None:
            start = base.start
            span = dataclasses.replace(
                base,
                end=max(start, min(end, start + max_records)),
                lost=0 if self._lost_counted else base.lost,
            )
            moves = base.progress < start - 1 or bool(base.restarted)
            return span if always or span.pending or moves else None
        start = self.committed + 1
        span = PartitionSpan(
            base.topic,
            base.partition,
            base.remote_topic,
            start,
            max(start, min(end, start + max_records)),
            progress=self.committed,
            incarnation=base.incarnation,
            progress_incarnation=base.incarnation,
            progress_slots=self.slots,
        )
        return span if always or span.pending else None

    def quiet(self, now: float) -> bool:
        """Whether nothing has reached it for QUIET_AFTER_S and nothing of it waits."""
        return now - self.moved_at >= QUIET_AFTER_S and self.progress + 1 >= self.end

    def due(self, now: float, batch: int, turns: int, *, first: bool = False) -> bool:
        """Whether batch number `batch` asks its end offset: every batch while it has records (or
        had lately), one batch in `turns` while it is quiet, none while it waits to be retried."""
        if not self.ready(now):
            return False
        return first or self.turn % turns == batch % turns or not self.quiet(now)

    def listed(self, end: int, listed_ms: int) -> None:
        """The source's last stable offset as listed at `listed_ms`: records beyond progress have
        been waiting since then at least."""
        if end != self.end:
            self.end, self.moved_at = end, time.monotonic()
        if end > self.progress + 1 and self.pending_since_ms is None:
            self.pending_since_ms = listed_ms

    def fold(self, span: PartitionSpan, result: UnitResult, *, fenced: bool, interval_s: float) -> int:
        """Take one batch's result; returns the partition's lag sample (ms) for the batch: how
        long its oldest copied record waited, or how long uncopied records have been waiting."""
        self._lost_counted = True
        self.total = _added(self.total, result)
        if result.transactions > 0 or (result.ok and result.progress >= 0):
            self.committed = result.progress
        self.stale = result.stale
        if fenced:
            self.total.error = None
        elif result.ok:
            self.failures = 0
        else:
            self.failures += 1
            self.retry_at = time.monotonic() + min(BACKOFF_MAX_S, interval_s * 2**self.failures)
        now_ms = int(time.time() * 1000)
        if result.ok and self.progress >= span.end - 1:
            self.pending_since_ms = None
        sample = max(0, result.waited_ms)
        if self.pending_since_ms is not None:
            sample = max(sample, now_ms - self.pending_since_ms)
        return sample

    def lag_ms(self, now_ms: int) -> int:
        return 0 if self.pending_since_ms is None else max(0, now_ms - self.pending_since_ms)

    def final(self) -> UnitResult | None:
        """What the window did to the partition, as a batch run's result says it: the window's
        planned end is where it stopped (what comes after is the next window's)."""
        total = self.total
        if total is None:
            return None
        final = dataclasses.replace(total, lost=list(total.lost), progress=self.progress)
        if final.ok:
            final.planned_end = self.progress + 1
        return final


def next_spans(
    active: list[PartitionState],
    ends: dict[tuple[str, int], int],
    listed_ms: int,
    settings: WindowSettings,
    spans: list[PartitionSpan],
    states: list[PartitionState],
    *,
    first: bool,
) -> None:
    """The next span of each of the `active` partitions with records to copy, up to its end in
    `ends` (listed at `listed_ms`), added to `spans` with its state to `states`; a partition the
    source no longer lists waits an interval."""
    for st in active:
        end = ends.get(st.key)
        if end is None:
            st.absent(settings.interval_s)
            continue
        st.listed(end, listed_ms)
        span = st.next_span(end, settings.max_records, always=first)
        if span is not None:
            spans.append(span)
            states.append(st)


def refreshed(
    parts: dict[tuple[str, int], PartitionState], spans: Iterable[PartitionSpan], slots: int
) -> tuple[int, bool]:
    """Take a refreshed plan's `spans` (of the slots a task holds) into its `parts`: a partition
    new to the task joins, one the refresh restarts (PartitionState.refreshed) starts again from
    it. Returns (partitions joined, whether the task's clients must be made again: a partition
    added to a topic they copy already is unknown to them for minutes, until they read the
    topic's metadata again)."""
    known = {topic for topic, _ in parts}
    joined, renew = 0, False
    for span in spans:
        st = parts.get((span.topic, span.partition))
        if st is None:
            parts[(span.topic, span.partition)] = PartitionState(span, slots, len(parts))
            joined += 1
            renew |= span.topic in known
        elif st.refreshed(span):
            st.restart(span)
    return joined, renew


def _added(total: UnitResult | None, result: UnitResult) -> UnitResult:
    if total is None:
        return dataclasses.replace(result, lost=list(result.lost))
    for name in SUMMED:
        setattr(total, name, getattr(total, name) + getattr(result, name))
    total.seconds = round(total.seconds + result.seconds, 3)
    total.copy_seconds = round(total.copy_seconds + result.copy_seconds, 3)
    total.lost = merge_ranges([*total.lost, *result.lost])
    total.remote_topic = result.remote_topic
    total.planned_end = result.planned_end
    total.waited_ms = max(total.waited_ms, result.waited_ms)
    total.last_target_offset = max(total.last_target_offset, result.last_target_offset)
    total.error, total.stale = result.error, result.stale
    total.unreachable = result.unreachable
    return total
