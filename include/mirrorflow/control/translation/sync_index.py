"""Every offset-sync of a flow, per source partition and topic incarnation, read once per pass.

The topic (`flow.offset_syncs_topic` on `flow.offset_syncs_cluster`, partition 0 only, as MM2
writes it) is compacted by key = upstream topic + partition, so old syncs may be gone (only the
newest of a partition survives); the translation falls back to provenance headers where they
are. Records that do not decode as OffsetSync are skipped, as MM2's OffsetSyncStore skips them.
A sync's run and incarnation headers (written by mirrorflow's copy, see
replicate/offset_syncs.py) are kept with it.

A partition's syncs are kept apart per incarnation, the source and remote topic IDs the sync's
records were copied between. Within one incarnation the offsets on both sides only grow, so a
sync below the last one on both sides is a late arrival, never a rewind: a zombie writer's
source-side syncs (written after its commit, by a non-transactional producer) landing after
those of the writer that fenced it. It is merged in order. A sync whose upstream offset goes
back (or repeats) while the downstream one goes on means the records from there were written to
the target a second time (an at-least-once re-copy): the syncs start over there and `recopied`
keeps where.

Syncs without an incarnation (MirrorMaker 2's, an older mirrorflow's) cannot be told apart that
way. They are kept as MM2's OffsetSyncStore keeps them: an upstream or downstream offset that
goes backwards starts the partition over (the source or remote topic was recreated), and a
downstream rewind forgets a re-copy, since the records before it are gone with the old topic.
"""

from __future__ import annotations

import logging
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from mirrorflow.clients import FlowClients
from mirrorflow.config import FlowConfig
from mirrorflow.control.reading import read_from_start
from mirrorflow.control.translation.rule import SyncRun
from mirrorflow.mm2.formats import Mm2FormatError, OffsetSync
from mirrorflow.replicate.offset_syncs import incarnation_of, run_of

log = logging.getLogger(__name__)

LEGACY = ""
"""The incarnation of syncs that name none (MM2's, an older mirrorflow's)."""

NO_SYNCS = SyncRun((), ())


@dataclass
class _Syncs:
    """One incarnation's syncs of a partition, ascending in both offsets, and when each was read
    (`reads`: the index's count of syncs added before it)."""

    first_read: int
    first: tuple[int, int]
    """(upstream, downstream) of the first sync read for the incarnation."""
    ups: list[int] = field(default_factory=list)
    downs: list[int] = field(default_factory=list)
    runs: list[int] = field(default_factory=list)
    reads: list[int] = field(default_factory=list)
    recopied: int | None = None

    def insert(self, at: int, up: int, down: int, run: int, read: int) -> None:
        self.ups.insert(at, up)
        self.downs.insert(at, down)
        self.runs.insert(at, run)
        self.reads.insert(at, read)

    def clear(self) -> None:
        for column in (self.ups, self.downs, self.runs, self.reads):
            column.clear()

    def add_in_order(self, up: int, down: int, run: int, read: int) -> None:
        """A sync of a known incarnation: later on the target, or a late arrival merged in order."""
        ups, downs = self.ups, self.downs
        if not downs or down > downs[-1]:
            if ups and up <= ups[-1]:
                self.recopied = down
                self._start_over_at(up)
            self.insert(len(ups), up, down, run, read)
            return
        at = bisect_left(downs, down)
        if downs[at] == down and ups[at] == up:
            return  # written twice
        if up < ups[at] and down < downs[at] and (at == 0 or (ups[at - 1] < up and downs[at - 1] < down)):
            self.insert(at, up, down, run, read)
            return
        # Not in order with the syncs around it: the flow's records are out of source order from
        # the latest target offset of a pair the sync and its neighbours show inverted.
        after = bisect_right(ups, up)
        mark = downs[after - 1] if after > at else down
        self.recopied = mark if self.recopied is None else max(self.recopied, mark)

    def add_rewinding(self, up: int, down: int, run: int, read: int) -> None:
        """A sync of no known incarnation, kept as MM2's OffsetSyncStore keeps it."""
        ups, downs = self.ups, self.downs
        if ups and down < downs[-1]:
            self.recopied = None
        elif ups and up <= ups[-1] and down > downs[-1]:
            self.recopied = down
        if ups and down < downs[-1]:
            self.clear()
        else:
            self._start_over_at(up)
        self.insert(len(self.ups), up, down, run, read)

    def _start_over_at(self, up: int) -> None:
        """Upstream went back: the syncs before are of records copied earlier; a repeated
        upstream offset replaces the sync that named it."""
        if self.ups and up < self.ups[-1]:
            self.clear()
        elif self.ups and up == self.ups[-1]:
            for column in (self.ups, self.downs, self.runs, self.reads):
                column.pop()

    def frozen(self, keep: slice = slice(None)) -> SyncRun:
        return SyncRun(tuple(self.ups[keep]), tuple(self.downs[keep]), tuple(self.runs[keep]), self.recopied)


@dataclass
class SyncIndex:
    """Every offset-sync of a flow, per source partition and incarnation (see the module)."""

    _parts: dict[tuple[str, int], dict[str, _Syncs]] = field(default_factory=dict)
    _frozen: dict[tuple[str, int, str], SyncRun] = field(default_factory=dict)
    _read: int = 0

    @classmethod
    def of(cls, syncs: Iterable[OffsetSync]) -> SyncIndex:
        index = cls()
        for sync in syncs:
            index.add(sync)
        return index

    def add(self, sync: OffsetSync, run: int | None = None, incarnation: str = LEGACY) -> None:
        """`run`: the records of its run before it, as the sync's writer stated (None: not said);
        `incarnation`: "<source id>,<remote id>" the writer named ("": none)."""
        key = (sync.topic, sync.partition)
        up, down = sync.upstream_offset, sync.downstream_offset
        part = self._parts.setdefault(key, {})
        # Most recently written incarnation last, so `latest` is the newest sync's.
        syncs = part.pop(incarnation, None) or _Syncs(self._read, (up, down))
        part[incarnation] = syncs
        self._frozen.pop((*key, incarnation), None)
        stated = -1 if run is None else run
        if incarnation == LEGACY:
            syncs.add_rewinding(up, down, stated, self._read)
        else:
            syncs.add_in_order(up, down, stated, self._read)
        self._read += 1

    def partitions(self) -> list[tuple[str, int]]:
        return sorted(self._parts)

    def incarnations(self, topic: str, partition: int) -> list[str]:
        """The incarnations a partition's syncs name, the one of its newest sync last; without
        the syncs that name none."""
        return [i for i in self._parts.get((topic, partition), {}) if i != LEGACY]

    def run(self, topic: str, partition: int, incarnation: str | None = None) -> SyncRun:
        """A partition's syncs of one incarnation (None: the one its newest sync names)."""
        part = self._parts.get((topic, partition), {})
        if incarnation is None:
            incarnation = next(reversed(part), LEGACY)
        frozen = self._frozen.get((topic, partition, incarnation))
        if frozen is None:
            syncs = part.get(incarnation)
            frozen = NO_SYNCS if syncs is None else syncs.frozen()
            self._frozen[(topic, partition, incarnation)] = frozen
        return frozen

    def legacy(self, topic: str, partition: int, continued_by: str = "") -> SyncRun:
        """The syncs that name no incarnation, as far as they can belong with `continued_by`.

        Those read before the first sync of `continued_by` are kept only where that sync lies
        above all of them on both sides: a copy that continued where MM2 or an older mirrorflow
        stopped. A first sync at or below them starts a topic over (a remote topic rebuilt from
        the source's start), so they describe an earlier incarnation. Those read after it (MM2
        took the flow back) are what the remote topic holds now."""
        legacy = self._parts.get((topic, partition), {}).get(LEGACY)
        if legacy is None:
            return NO_SYNCS
        ours = self._parts[(topic, partition)].get(continued_by) if continued_by else None
        if ours is None:
            return self.run(topic, partition, LEGACY)
        before = bisect_left(legacy.reads, ours.first_read)
        up, down = ours.first
        if before == 0 or (up > legacy.ups[before - 1] and down > legacy.downs[before - 1]):
            return self.run(topic, partition, LEGACY)
        return legacy.frozen(slice(before, None))


def read_sync_index(consumer_config: Mapping[str, Any], topic: str) -> SyncIndex:
    """Every decodable sync in `topic` partition 0, up to its last stable offset now."""
    index = SyncIndex()
    skipped = 0
    for message in read_from_start(consumer_config, topic):
        try:
            sync = OffsetSync.decode(message.key(), message.value())
        except Mm2FormatError:
            skipped += 1
            continue
        headers = message.headers()
        index.add(sync, run_of(headers), incarnation_of(headers))
    if skipped:
        log.warning("skipped %d records of %s that are not offset-syncs", skipped, topic)
    return index


def flow_sync_index(flow: FlowConfig, clients: FlowClients) -> SyncIndex:
    """The flow's syncs, read where `offset-syncs.topic.location` puts them."""
    side = "source" if flow.offset_syncs_cluster == flow.source else "target"
    return read_sync_index(clients.consumer(side), flow.offset_syncs_topic)
