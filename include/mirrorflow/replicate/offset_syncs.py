"""Dense offset-syncs: enough (upstream, downstream) pairs to translate any replicated offset.

MM2 writes a sync only every `offset.lag.max` records or at an upstream gap, so between syncs
it can only guess (its "+1" rule). mirrorflow writes a sync at both ends of every run of records
that is contiguous on both clusters: a run ends wherever the source skips offsets (compaction,
transaction markers, aborted records, loop-filtered records) or the target does (our own commit
markers, records of other writers), and at every transaction boundary. Inside a run the mapping
is exactly `down = run.down + (up - run.up)`, so a reader that sees these syncs (MM2's store
included) loses nothing at run boundaries.

Two syncs read back cannot say on their own whether they are the two ends of one run (or whether
syncs between them were compacted away), so each sync also carries, in a record header MM2
ignores, how many records of its run came before it (RUN_HEADER). One sync is then proof of its
whole run, even after compaction has kept only the newest sync of a partition, and translation
answers inside the run by arithmetic instead of reading the target.

A sync also names the topic incarnations it was copied between (INCARNATION_HEADER): the source
and remote topic IDs, as progress does. A remote topic deleted and created again keeps its name
and starts its offsets over, so the old topic's syncs would otherwise read as if they described
the new one; and several writers of one partition (a zombie's syncs land after the writer that
fenced it) can only be told apart from a recreated topic by the IDs.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass, field

RUN_HEADER = "mirrorflow.run"
"""Header of an offset-sync written by mirrorflow: a big-endian int64 `n`, saying that upstream
offsets up-n .. up-1 were copied by the same flow to downstream offsets down-n .. down-1."""

_RUN = struct.Struct(">q")

INCARNATION_HEADER = "mirrorflow.incarnation"
"""Header of an offset-sync written by mirrorflow: UTF-8 "<source topic id>,<remote topic id>",
the incarnations of the two topics the sync's records were copied between (see
replicate/progress.incarnation, without its floor)."""


@dataclass(frozen=True, slots=True)
class SyncPoint:
    upstream: int
    downstream: int
    run: int = 0
    """Records of the same run before this one (see RUN_HEADER)."""

    def headers(self, incarnation: str = "") -> list[tuple[str, bytes]]:
        """The sync's record headers; `incarnation` ("<source id>,<remote id>") when known."""
        headers = [(RUN_HEADER, _RUN.pack(self.run))]
        if incarnation:
            headers.append((INCARNATION_HEADER, incarnation.encode()))
        return headers


def run_of(headers: Iterable[tuple[str, bytes | None]] | None) -> int | None:
    """The run length a sync record's headers state, or None (MM2's syncs, or not readable)."""
    for name, value in headers or ():
        if name == RUN_HEADER:
            if value is None or len(value) != _RUN.size:
                return None
            run = _RUN.unpack(value)[0]
            return run if run >= 0 else None
    return None


def incarnation_of(headers: Iterable[tuple[str, bytes | None]] | None) -> str:
    """The "<source id>,<remote id>" a sync record's headers name, or "" (MM2's syncs, an older
    mirrorflow's, or not readable)."""
    for name, value in headers or ():
        if name == INCARNATION_HEADER:
            try:
                text = (value or b"").decode()
            except UnicodeDecodeError:
                return ""
            fields = text.split(",")
            if len(fields) < 2 or not (fields[0] or fields[1]):
                return ""
            return f"{fields[0]},{fields[1]}"  # a floor, if one came along, is progress's alone
    return ""


@dataclass(slots=True)
class DenseSyncEmitter:
    """Feed the runs of one partition in order; collect the syncs to write."""

    _prev: SyncPoint | None = None
    _last_emitted: SyncPoint | None = None
    pending: list[SyncPoint] = field(default_factory=list)

    def record(self, upstream: int, downstream: int) -> None:
        self.run(upstream, downstream, 1)

    def run(self, upstream: int, downstream: int, count: int) -> None:
        """`count` records copied from upstream.. to downstream.., consecutive on both clusters."""
        prev = self._prev
        if prev is not None and upstream == prev.upstream + 1 and downstream == prev.downstream + 1:
            before = prev.run + 1
        else:
            if prev is not None:
                self._emit(prev)
            self._emit(SyncPoint(upstream, downstream, 0))
            before = 0
        self._prev = SyncPoint(upstream + count - 1, downstream + count - 1, before + count - 1)

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
