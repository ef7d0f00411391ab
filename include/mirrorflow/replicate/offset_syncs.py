"""Dense offset-syncs: enough (upstream, downstream) pairs to translate any replicated offset.

MM2 writes a sync only every `offset.lag.max` records or at an upstream gap, so between syncs
it can only guess (its "+1" rule). mirrorflow writes a sync at both ends of every run of records
that is contiguous on both clusters: a run ends wherever the source skips offsets (compaction,
transaction markers, aborted records, loop-filtered records) or the target does (our own commit
markers, records of other writers), and at every transaction boundary. Inside a run the mapping
is exactly `down = run.down + (up - run.up)`, so a reader that sees these syncs (MM2's store
included) loses nothing at run boundaries.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class SyncPoint:
    upstream: int
    downstream: int


@dataclass(slots=True)
class DenseSyncEmitter:
    """Feed (upstream, downstream) pairs of one partition in order; collect the syncs to write."""

    _prev: SyncPoint | None = None
    _last_emitted: SyncPoint | None = None
    pending: list[SyncPoint] = field(default_factory=list)

    def record(self, upstream: int, downstream: int) -> None:
        point = SyncPoint(upstream, downstream)
        prev = self._prev
        if prev is None:
            self._emit(point)
        elif upstream - prev.upstream != 1 or downstream - prev.downstream != 1:
            self._emit(prev)
            self._emit(point)
        self._prev = point

    def boundary(self) -> None:
        """A transaction (or range) ends: the last copied record always gets a sync."""
        if self._prev is not None:
            self._emit(self._prev)

    def drain(self) -> list[SyncPoint]:
        out, self.pending = self.pending, []
        return out

    def _emit(self, point: SyncPoint) -> None:
        if point != self._last_emitted:
            self.pending.append(point)
            self._last_emitted = point
