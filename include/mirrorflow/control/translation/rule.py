"""The translation rule: given what a pass knows of a partition, where a group resumes on the target.

A group that committed upstream offset `u` has consumed every source record below `u` and none
at or above it. On the target, the offset to commit is therefore the target offset of the first
replicated record whose source offset is >= u: a consumer that starts there re-reads nothing it
consumed and skips nothing it had not. Everything here is pure (no Kafka): the syncs, bounds and
probes come in through PartitionView and a Probe.

A sync mirrorflow wrote states how many records of its run came before it (a header MM2
ignores), so an offset inside a stated run translates by arithmetic, with no probe
(translate_by_runs). MM2's syncs, and two consecutive syncs without it, cannot say whether they
are the two ends of one run or the end and start of two runs (or whether syncs between them
were compacted away), so the answer is confirmed by probes: first at the offset the run rule
predicts (one probe when it holds), then by binary search between the bracketing syncs'
downstream offsets (translate_exact). The search keeps two facts true: every flow record below
`low` has source offset < u, and `found` is the first flow record at or after `high` (None:
there is none before the end). Records of other writers in the same target partition
(aggregation, identity active/active) are not flow records; the probe skips them.

The search is right only while the flow's records rise in source offset; where they do not,
translate_scanned answers from one sequential read of the partition. Without provenance on the
target, MM2's rule applies (translate_mm2_rule, translate_mm2_copy); failback goes the other way
(translate_back).
"""

from __future__ import annotations

from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import StrEnum


class Status(StrEnum):
    EXACT = "exact"
    """The first replicated record at or after the group's position (or the end, if it has read all)."""
    AHEAD = "ahead"
    """The group consumed past what has been replicated; it gets the end of what was replicated."""
    MM2_PRECISE = "mm2-precise"
    """Provenance headers are off for the flow: MM2's +1 rule on the dense syncs (may re-deliver)."""
    MM2 = "mm2"
    """MirrorMaker 2 copied these records (no provenance headers): MM2's own rule on MM2's
    offset-syncs, what MM2's checkpoints would say or better; re-delivers the records between
    MM2's nearest sync and the group's offset (about offset.lag.max at most), never skips."""
    SCANNED = "scanned"
    """The flow's records in this partition are not in source-offset order (an at-least-once
    re-copy wrote some twice, or two incarnations mixed): the first of them, in target order,
    at or after the group's position, found by reading the partition once. Nothing is skipped;
    records the target holds twice may be read twice, as any consumer of the target reads them."""


@dataclass(frozen=True, slots=True)
class FlowRecord:
    """A record this flow copied: where it is on the target and where it came from."""

    offset: int
    source_offset: int


@dataclass(frozen=True, slots=True)
class Translation:
    upstream_offset: int
    downstream_offset: int
    status: Status
    unreplicated: int = 0
    """For AHEAD: source offsets the group consumed that the flow has not processed yet."""


@dataclass(frozen=True)
class SyncRun:
    """A partition's usable syncs, ascending in both offsets (see sync_index.py).

    `runs[i]`, where given, is how many records of the run that ends at sync i came before it,
    as the copy that wrote the sync stated (replicate/offset_syncs.RUN_HEADER); -1 where the sync
    does not say (MirrorMaker 2 wrote it, or an older mirrorflow). `recopied`: the downstream
    offset from which the syncs show the flow's records out of source order (an at-least-once
    re-copy wrote some twice), None when they show no such thing."""

    ups: tuple[int, ...]
    downs: tuple[int, ...]
    runs: tuple[int, ...] = ()
    recopied: int | None = None

    def __len__(self) -> int:
        return len(self.ups)

    def __getitem__(self, keep: slice) -> SyncRun:
        return SyncRun(self.ups[keep], self.downs[keep], self.runs[keep], self.recopied)


@dataclass(frozen=True)
class PartitionView:
    """What one pass knows about a replicated partition before it probes the target.

    `progress`: last upstream offset the flow processed (MM2's source offset), None if unknown.
    `start`/`end`: the remote partition's log start and last stable offset when the pass began.
    """

    syncs: SyncRun
    progress: int | None
    start: int
    end: int


# probe(offset, limit): the first flow record at target offset >= offset and < limit, or None.
Probe = Callable[[int, int], FlowRecord | None]


def translate_by_runs(u: int, view: PartitionView) -> Translation | None:
    """The exact answer where a sync's stated run proves it, with no probe; None elsewhere.

    A sync that states its run (n records before it, consecutive on both clusters, all copied by
    this flow) places every upstream offset of the run by arithmetic: the first sync at or above
    `u` either belongs to the run holding `u`, or no run with a stated length holds it. A group
    at one past the last sync, which its writer says is a copied record, has read everything
    the syncs name: whatever the flow copied after it (source offsets above) comes later on the
    target. Callers use this only where the flow's records are known to be in source order.
    """
    ups, downs, runs = view.syncs.ups, view.syncs.downs, view.syncs.runs
    if not runs:
        return None
    at = bisect_left(ups, u)
    if at < len(ups):
        if runs[at] < 0 or ups[at] - runs[at] > u:
            return None
        down = downs[at] - (ups[at] - u)
        return Translation(u, down, Status.EXACT) if view.start <= down < view.end else None
    last = len(ups) - 1
    if u == ups[last] + 1 and runs[last] >= 0 and view.start <= downs[last] < view.end:
        return Translation(u, downs[last] + 1, Status.EXACT)
    return None


def translate_exact(u: int, view: PartitionView, probe: Probe) -> Translation | None:
    """The exact downstream offset for upstream offset `u`, or None if nothing was replicated.

    Probes the target only where the syncs leave a doubt; `probe` is called O(log n) times at
    most, once when the run rule holds, never when a sync names `u` itself.
    """
    ups, downs = view.syncs.ups, view.syncs.downs
    first_at = bisect_left(ups, u)
    after = bisect_right(ups, u)
    if first_at < after and downs[first_at] >= view.start:
        return Translation(u, downs[first_at], Status.EXACT)

    low, high = view.start, view.end
    below: FlowRecord | None = None  # the last flow record known to lie before `low`
    guess: int | None = None
    if first_at > 0:
        lo = FlowRecord(downs[first_at - 1], ups[first_at - 1])
        below = lo
        low = max(low, lo.offset + 1)
        guess = lo.offset + (u - lo.source_offset)
    found: FlowRecord | None = None  # the first flow record at or after `high`
    if after < len(ups) and low <= downs[after] < high:
        found = FlowRecord(downs[after], ups[after])
        high = found.offset
    if guess is not None and not low <= guess < high:
        guess = None

    while low < high:
        mid = guess if guess is not None else (low + high) // 2
        guess = None
        record = probe(mid, high)
        if record is None:
            high = mid
        elif record.source_offset >= u:
            if record.source_offset == u:
                return Translation(u, record.offset, Status.EXACT)
            high, found = mid, record
        else:
            low, below = record.offset + 1, record

    if found is not None:
        return Translation(u, found.offset, Status.EXACT)
    if below is None:
        return None
    replicated_end = below.source_offset + 1
    if view.progress is not None:
        replicated_end = max(replicated_end, view.progress + 1)
    if u > replicated_end:
        return Translation(u, low, Status.AHEAD, unreplicated=u - replicated_end)
    return Translation(u, low, Status.EXACT)


@dataclass(frozen=True)
class ScanIndex:
    """One sequential read of a partition's flow records, kept as the running maximum of their
    source offsets in target order: only where it rises (array pairs, 16 bytes each), which is
    all that "first record at or after u" needs. Built by `of`; `last` is the last flow record."""

    at: array
    peak: array
    last: FlowRecord | None

    @classmethod
    def of(cls, records: Iterable[FlowRecord]) -> ScanIndex:
        at, peak = array("q"), array("q")
        last = None
        for record in records:
            if not peak or record.source_offset > peak[-1]:
                at.append(record.offset)
                peak.append(record.source_offset)
            last = record
        return cls(at, peak, last)


def translate_scanned(u: int, index: ScanIndex, progress: int | None) -> Translation | None:
    """The first flow record, in target order, whose source offset is >= `u`.

    Right whatever the order: every flow record before it has a source offset below `u`, so a
    consumer that starts there skips nothing the group had not consumed.
    """
    i = bisect_left(index.peak, u)
    if i < len(index.peak):
        return Translation(u, index.at[i], Status.SCANNED)
    if index.last is None:
        return None
    replicated_end = index.peak[-1] + 1
    if progress is not None:
        replicated_end = max(replicated_end, progress + 1)
    if u > replicated_end:
        return Translation(u, index.last.offset + 1, Status.AHEAD, unreplicated=u - replicated_end)
    return Translation(u, index.last.offset + 1, Status.SCANNED)


def translate_mm2_rule(u: int, view: PartitionView) -> Translation | None:
    """MM2's rule on every sync: the latest sync at or below `u`, plus one unless it names `u`.

    Used when the flow writes no provenance headers, so nothing on the target can confirm a
    position between syncs. With dense syncs this is exact at every run boundary and re-delivers
    at most the records between the run's start and `u` elsewhere.
    """
    ups, downs = view.syncs.ups, view.syncs.downs
    at = bisect_right(ups, u) - 1
    if at < 0:
        return None
    if ups[at] == u:
        return Translation(u, downs[at], Status.EXACT)
    downstream = downs[at] + 1
    if view.progress is not None and u > view.progress + 1:
        return Translation(u, downstream, Status.AHEAD, unreplicated=u - view.progress - 1)
    return Translation(u, downstream, Status.MM2_PRECISE)


def translate_mm2_copy(u: int, view: PartitionView) -> Translation | None:
    """A partition (or the stretch of it around `u`) that MirrorMaker 2 copied: MM2's rule on
    every sync, said to be MM2's.

    MM2's records carry no provenance, so nothing on the target can confirm a position between
    its sparse syncs. MM2's own rule is safe there; it uses every sync in the topic, where MM2's
    checkpoint task keeps 64 per partition, so it never re-delivers more than MM2 would.
    """
    result = translate_mm2_rule(u, view)
    if result is None:
        return None
    return Translation(u, result.downstream_offset, Status.MM2)


def translate_back(
    d: int, records_from: Callable[[int], FlowRecord | None], progress: int | None
) -> int | None:
    """Failback: a group at offset `d` of a remote topic goes back to the topic it was copied from.

    The first flow record at or after `d` is the first one the group has not consumed, and its
    provenance names its offset upstream; a group that consumed everything copied resumes right
    after what the flow processed. None when neither is known.
    """
    record = records_from(d)
    if record is not None:
        return record.source_offset
    return None if progress is None else progress + 1
