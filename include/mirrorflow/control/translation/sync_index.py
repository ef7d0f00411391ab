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
from array import array
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


def _reads() -> array:
    return array("q")


@dataclass
class _Syncs:
    """One incarnation's syncs of a partition, ascending in both offsets; for syncs that name no
    incarnation also when each was read (`reads`: the index's count of syncs added before it),
    which tells those a copy of an incarnation continued from those it started over after."""

    first_read: int
    first: tuple[int, int]
    """(upstream, downstream) of the first sync read for the incarnation."""
    last_read: int = 0
    ups: list[int] = field(default_factory=list)
    downs: list[int] = field(default_factory=list)
    runs: list[int] = field(default_factory=list)
    reads: array = field(default_factory=_reads)
    recopied: int | None = None

    def append(self, up: int, down: int, run: int) -> None:
        self.ups.append(up)
        self.downs.append(down)
        self.runs.append(run)

    def clear(self) -> None:
        self.ups.clear()
        self.downs.clear()
        self.runs.clear()
        del self.reads[:]

    def add_in_order(self, up: int, down: int, run: int) -> None:
        """A sync of a known incarnation: later on the target, or a late arrival merged in order."""
        ups, downs = self.ups, self.downs
        if not downs or down > downs[-1]:
            if ups and up <= ups[-1]:
                self.recopied = down
                self._start_over_at(up, ups[-1])
            self.append(up, down, run)
            return
        at = bisect_left(downs, down)
        if downs[at] == down and ups[at] == up:
            return  # written twice
        if up < ups[at] and down < downs[at] and (at == 0 or (ups[at - 1] < up and downs[at - 1] < down)):
            ups.insert(at, up)
            downs.insert(at, down)
            self.runs.insert(at, run)
            return
        # Not in order with the syncs around it: the flow's records are out of source order from
        # the latest target offset of a pair the sync and its neighbours show inverted.
        after = bisect_right(ups, up)
        mark = downs[after - 1] if after > at else down
        self.recopied = mark if self.recopied is None else max(self.recopied, mark)

    def add_rewinding(self, up: int, down: int, run: int, read: int) -> None:
        """A sync of no known incarnation, kept as MM2's OffsetSyncStore keeps it."""
        if self.ups:
            last_up, last_down = self.ups[-1], self.downs[-1]
            if down < last_down:
                self.recopied = None
                self.clear()
            else:
                if up <= last_up and down > last_down:
                    self.recopied = down
                self._start_over_at(up, last_up)
        self.append(up, down, run)
        self.reads.append(read)

    def _start_over_at(self, up: int, last_up: int) -> None:
        """Upstream went back: the syncs before are of records copied earlier; a repeated
        upstream offset replaces the sync that named it."""
        if up < last_up:
            self.clear()
        elif up == last_up:
            self.ups.pop()
            self.downs.pop()
            self.runs.pop()
            if self.reads:
                self.reads.pop()

    def frozen(self, first: int = 0) -> SyncRun:
        """The syncs from the `first` on."""
        if first:
            return SyncRun(
                tuple(self.ups[first:]), tuple(self.downs[first:]), tuple(self.runs[first:]), self.recopied
            )
        return SyncRun(tuple(self.ups), tuple(self.downs), tuple(self.runs), self.recopied)


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
        up, down, read = sync.upstream_offset, sync.downstream_offset, self._read
        self._read += 1
        part = self._parts.get(key)
        if part is None:
            part = self._parts[key] = {}
        syncs = part.get(incarnation)
        if syncs is None:
            syncs = part[incarnation] = _Syncs(read, (up, down))
        syncs.last_read = read
        if self._frozen:
            self._frozen.pop((*key, incarnation), None)
        stated = -1 if run is None else run
        if incarnation == LEGACY:
            syncs.add_rewinding(up, down, stated, read)
        else:
            syncs.add_in_order(up, down, stated)

    def partitions(self) -> list[tuple[str, int]]:
        return sorted(self._parts)

    def incarnations(self, topic: str, partition: int) -> list[str]:
        """The incarnations a partition's syncs name, the one of its newest sync last; without
        the syncs that name none."""
        part = self._parts.get((topic, partition), {})
        return sorted((i for i in part if i != LEGACY), key=lambda i: part[i].last_read)

    def run(self, topic: str, partition: int, incarnation: str | None = None) -> SyncRun:
        """A partition's syncs of one incarnation (None: the one its newest sync names)."""
        part = self._parts.get((topic, partition), {})
        if incarnation is None:
            incarnation = max(part, key=lambda i: part[i].last_read, default=LEGACY)
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
        return legacy.frozen(before)


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
