"""The exact translation rule against its definition, on modelled target partitions.

A model partition is what a flow leaves on the target: its records (with their source offsets),
commit markers after every transaction, other writers' records and aborted records, plus the
dense offset-syncs the copy engine writes for it. The probe reads the model the way the Kafka
prober reads a partition.
"""

from __future__ import annotations

import random
from bisect import bisect_left
from dataclasses import dataclass, field

import pytest

from mirrorflow.control.translation.rule import (
    FlowRecord,
    PartitionView,
    ScanIndex,
    Status,
    Translation,
    translate_back,
    translate_by_runs,
    translate_exact,
    translate_mm2_rule,
    translate_scanned,
)
from mirrorflow.control.translation.sync_index import SyncIndex
from mirrorflow.mm2.formats import OffsetSync
from mirrorflow.replicate.offset_syncs import DenseSyncEmitter

FLOW, FOREIGN, INVISIBLE = "flow", "foreign", "invisible"


@dataclass
class ModelPartition:
    """Target offsets in order: (kind, source offset or None)."""

    entries: list[tuple[str, int | None]] = field(default_factory=list)
    syncs: list[tuple[int, int]] = field(default_factory=list)
    runs: dict[tuple[int, int], int] = field(default_factory=dict)
    """What the copy stated with each sync: records of its run before it (offset_syncs.RUN_HEADER)."""
    progress: int | None = None
    start: int = 0
    probes: int = 0
    _memo: tuple[tuple[int, int], list[FlowRecord], list[int], list[int]] | None = None

    @property
    def end(self) -> int:
        return len(self.entries)

    def flow_index(self) -> tuple[list[FlowRecord], list[int], list[int]]:
        key = (self.start, len(self.entries))
        if self._memo is None or self._memo[0] != key:
            records = [
                FlowRecord(i, s)
                for i, (kind, s) in enumerate(self.entries)
                if kind == FLOW and i >= self.start
            ]
            self._memo = (key, records, [r.offset for r in records], [r.source_offset for r in records])
        return self._memo[1:]

    def records(self) -> list[FlowRecord]:
        return self.flow_index()[0]

    def probe(self, offset: int, limit: int) -> FlowRecord | None:
        self.probes += 1
        records, offsets, _ = self.flow_index()
        i = bisect_left(offsets, max(offset, self.start))
        return records[i] if i < len(records) and records[i].offset < limit else None

    def view(self, syncs: list[tuple[int, int]] | None = None, *, stated: bool = False) -> PartitionView:
        """The syncs as MM2's format holds them, or with the runs the copy `stated` too."""
        index = SyncIndex()
        for u, d in self.syncs if syncs is None else syncs:
            index.add(OffsetSync("t", 0, u, d), self.runs[(u, d)] if stated else None)
        return PartitionView(index.run("t", 0), self.progress, self.start, self.end)


def copy_model(
    source_offsets: list[int],
    *,
    chunk: int,
    foreign_every: int = 0,
    aborted_after: set[int] | None = None,
    processed_to: int | None = None,
) -> ModelPartition:
    """Copy `source_offsets` in transactions of `chunk` records, as copy.py does."""
    model = ModelPartition()
    emitter = DenseSyncEmitter()
    aborted_after = aborted_after or set()
    for n, source in enumerate(source_offsets):
        if foreign_every and n % foreign_every == foreign_every - 1:
            model.entries.append((FOREIGN, None))
        down = len(model.entries)
        model.entries.append((FLOW, source))
        emitter.record(source, down)
        last_of_chunk = n % chunk == chunk - 1 or n == len(source_offsets) - 1
        if last_of_chunk:
            emitter.boundary()
            model.entries.append((INVISIBLE, None))  # commit marker
        if n in aborted_after:
            model.entries.extend([(INVISIBLE, None)] * 3)  # another writer's aborted transaction
    points = emitter.drain()
    model.syncs = [(p.upstream, p.downstream) for p in points]
    model.runs = {(p.upstream, p.downstream): p.run for p in points}
    model.progress = (
        processed_to if processed_to is not None else (source_offsets[-1] if source_offsets else None)
    )
    return model


def definition(u: int, model: ModelPartition) -> Translation | None:
    records, _, source_offsets = model.flow_index()
    i = bisect_left(source_offsets, u)
    if i < len(records):
        return Translation(u, records[i].offset, Status.EXACT)
    if not records:
        return None
    last = records[-1]
    end = max(last.source_offset + 1, model.progress + 1 if model.progress is not None else 0)
    if u > end:
        return Translation(u, last.offset + 1, Status.AHEAD, unreplicated=u - end)
    return Translation(u, last.offset + 1, Status.EXACT)


def gappy_source(rng: random.Random, count: int) -> list[int]:
    """Source offsets with gaps of every size: compaction, markers, aborted transactions."""
    offsets, at = [], rng.randrange(0, 5)
    while len(offsets) < count:
        offsets.append(at)
        at += 1 if rng.random() < 0.8 else rng.randrange(2, 40)
    return offsets


def random_copy(rng: random.Random) -> tuple[list[int], ModelPartition]:
    """A gappy source copied in random chunks among other writers' and aborted records."""
    source = gappy_source(rng, rng.randrange(1, 400))
    model = copy_model(
        source,
        chunk=rng.randrange(1, 60),
        foreign_every=rng.choice([0, 0, 2, 5]),
        aborted_after={rng.randrange(len(source)) for _ in range(3)},
        processed_to=source[-1] + rng.randrange(0, 4),
    )
    return source, model


def test_a_sync_that_names_the_offset_needs_no_probe() -> None:
    model = copy_model(list(range(100)), chunk=30)
    assert (30, 31) in model.syncs
    assert translate_exact(30, model.view(), model.probe) == Translation(30, 31, Status.EXACT)
    assert model.probes == 0


def test_inside_a_run_one_probe_confirms_the_run_rule() -> None:
    model = copy_model(list(range(100)), chunk=50)
    assert translate_exact(17, model.view(), model.probe) == Translation(17, 17, Status.EXACT)
    assert translate_exact(70, model.view(), model.probe) == Translation(70, 71, Status.EXACT)
    assert model.probes == 2


def test_a_source_gap_translates_to_the_first_record_after_it() -> None:
    source = [*range(0, 10), *range(25, 40)]  # 10..24 compacted away or aborted on the source
    model = copy_model(source, chunk=100)
    for u in range(10, 26):
        assert translate_exact(u, model.view(), model.probe) == Translation(u, 10, Status.EXACT)


def test_a_group_that_read_everything_gets_the_end_of_what_was_copied() -> None:
    # The source's last transaction marker at 100 was processed but not copied.
    model = copy_model(list(range(100)), chunk=40, processed_to=100)
    end_of_copy = model.records()[-1].offset + 1
    assert translate_exact(101, model.view(), model.probe) == Translation(101, end_of_copy, Status.EXACT)
    assert translate_exact(100, model.view(), model.probe) == Translation(100, end_of_copy, Status.EXACT)


def test_a_group_ahead_of_replication_gets_the_end_and_is_flagged() -> None:
    model = copy_model(list(range(60)), chunk=25)
    result = translate_exact(500, model.view(), model.probe)
    assert result == Translation(500, model.records()[-1].offset + 1, Status.AHEAD, unreplicated=440)


def test_nothing_replicated_means_no_translation() -> None:
    model = ModelPartition(entries=[(FOREIGN, None)] * 5, progress=None)
    assert translate_exact(3, model.view(), model.probe) is None


def test_records_of_other_writers_never_count() -> None:
    model = copy_model(list(range(200)), chunk=37, foreign_every=3)
    for u in range(0, 205):
        assert translate_exact(u, model.view(), model.probe) == definition(u, model), u


def test_without_syncs_the_headers_alone_give_the_exact_answer_in_log_probes() -> None:
    model = copy_model(gappy_source(random.Random(7), 2000), chunk=150)
    for u in (0, 1, 500, 1234, 3000, model.records()[-1].source_offset, 10**9):
        model.probes = 0
        assert translate_exact(u, model.view(syncs=[]), model.probe) == definition(u, model), u
        assert model.probes <= model.end.bit_length() + 1


def test_compacted_syncs_leave_only_the_last_one_and_translation_stays_exact() -> None:
    model = copy_model(gappy_source(random.Random(3), 800), chunk=90, aborted_after={100, 400})
    last_only = model.syncs[-1:]
    for u in range(0, model.records()[-1].source_offset + 5):
        assert translate_exact(u, model.view(syncs=last_only), model.probe) == definition(u, model), u


def test_records_removed_by_target_retention_are_not_translated_to() -> None:
    model = copy_model(list(range(100)), chunk=30)
    model.start = 40
    first_kept = next(r for r in model.records())
    assert translate_exact(5, model.view(), model.probe) == Translation(5, first_kept.offset, Status.EXACT)
    assert translate_exact(20, model.view(), model.probe) == Translation(20, first_kept.offset, Status.EXACT)


@pytest.mark.parametrize("seed", range(25))
def test_random_partitions_with_random_syncs_lost_match_the_definition(seed: int) -> None:
    rng = random.Random(seed)
    source, model = random_copy(rng)
    kept = [s for s in model.syncs if rng.random() < rng.choice([0.0, 0.3, 1.0])]
    probe_budget = 2 * model.end.bit_length() + 2
    for u in range(0, source[-1] + 8):
        model.probes = 0
        assert translate_exact(u, model.view(syncs=kept), model.probe) == definition(u, model), (seed, u)
        assert model.probes <= probe_budget


def test_stated_runs_translate_a_plain_copy_with_no_probe() -> None:
    # The scale benchmark's partitions: 10 records copied, then 100 more in a second transaction.
    model = copy_model(list(range(10)), chunk=10)
    later = copy_model(list(range(10, 110)), chunk=100)
    model.entries += later.entries
    model.syncs += [(u, d + 11) for u, d in later.syncs]
    model.runs |= {(u, d + 11): run for (u, d), run in later.runs.items()}
    model.progress = 109
    for u in range(0, 111):
        assert translate_by_runs(u, model.view(stated=True)) == definition(u, model), u
    assert translate_by_runs(111, model.view(stated=True)) is None
    assert translate_by_runs(5, model.view()) is None, "MM2's format alone proves no run"


def test_a_stated_run_outlives_compaction_of_the_syncs_before_it() -> None:
    model = copy_model(list(range(300)), chunk=300)
    last_only = model.syncs[-1:]
    for u in range(0, 301):
        assert translate_by_runs(u, model.view(last_only, stated=True)) == definition(u, model), u


def test_a_stated_run_does_not_answer_into_deleted_records() -> None:
    model = copy_model(list(range(100)), chunk=100)
    model.start = 40
    assert translate_by_runs(39, model.view(stated=True)) is None
    assert translate_by_runs(40, model.view(stated=True)) == Translation(40, 40, Status.EXACT)


@pytest.mark.parametrize("seed", range(40))
def test_stated_runs_answer_as_the_definition_or_not_at_all(seed: int) -> None:
    rng = random.Random(seed)
    source, model = random_copy(rng)
    everything = rng.random() < 0.3
    kept = [
        s for i, s in enumerate(model.syncs) if everything or i == len(model.syncs) - 1 or rng.random() < 0.5
    ]
    answered = set()
    for u in range(0, source[-1] + 8):
        result = translate_by_runs(u, model.view(kept, stated=True))
        if result is not None:
            answered.add(u)
            assert result == definition(u, model), (seed, u)
    if everything:  # every copied offset lies in a stated run, and so does one past the last
        assert {*source, source[-1] + 1} <= answered, seed


def test_mm2_rule_is_exact_at_syncs_and_one_past_elsewhere() -> None:
    model = copy_model(list(range(100)), chunk=50)  # syncs (0,0) (49,49) (50,51) (99,100)
    view = model.view()
    assert translate_mm2_rule(49, view) == Translation(49, 49, Status.EXACT)
    assert translate_mm2_rule(20, view) == Translation(20, 1, Status.MM2_PRECISE)
    assert translate_mm2_rule(75, view) == Translation(75, 52, Status.MM2_PRECISE)
    assert translate_mm2_rule(100, view) == Translation(100, 101, Status.MM2_PRECISE)
    assert translate_mm2_rule(150, view) == Translation(150, 101, Status.AHEAD, unreplicated=50)
    below = copy_model(list(range(10, 20)), chunk=5)
    assert translate_mm2_rule(3, below.view()) is None


def test_mm2_rule_never_skips_a_record() -> None:
    model = copy_model(gappy_source(random.Random(11), 300), chunk=40)
    view = model.view()
    for u in range(model.records()[0].source_offset, model.records()[-1].source_offset + 1):
        exact = definition(u, model)
        rough = translate_mm2_rule(u, view)
        assert rough is not None and exact is not None
        assert rough.downstream_offset <= exact.downstream_offset


def recopied(rng: random.Random, count: int) -> list[int]:
    """Source offsets in target order after at-least-once re-copies: runs that die after writing
    some records go back to the last recorded progress and copy again from there."""
    order, progress, at = [], -1, 0
    while at < count:
        chunk = rng.randrange(1, 30)
        written = list(range(at, min(count, at + chunk)))
        order.extend(written)
        if rng.random() < 0.3 and written:
            at = progress + 1  # died before recording progress: copied again
        else:
            at += len(written)
            progress = at - 1
    return order


@pytest.mark.parametrize("seed", range(20))
def test_scanned_translation_never_skips_whatever_the_order(seed: int) -> None:
    rng = random.Random(seed)
    sources = recopied(rng, 300) if seed % 2 else rng.sample(range(300), 300)
    model = ModelPartition(entries=[(FLOW, s) for s in sources], progress=299)
    index = ScanIndex.of(model.records())
    for u in range(0, 305):
        got = translate_scanned(u, index, model.progress)
        assert got is not None
        unread = [i for i, s in enumerate(sources) if s >= u]
        # Every record the group had not consumed is at or after the answer...
        assert all(i >= got.downstream_offset for i in unread), (seed, u)
        # ...and the answer is the first such record (or the end when there is none).
        assert got.downstream_offset == (unread[0] if unread else len(sources)), (seed, u)
        assert got.status == (Status.AHEAD if u > 300 else Status.SCANNED)


def test_the_binary_search_can_skip_records_when_the_order_breaks() -> None:
    """Why the order is checked: swapped runs (50..99 before 0..49) make the exact search land on
    30 in the second run and skip 50..99, which the group has not read; the scan does not."""
    model = ModelPartition(entries=[(FLOW, s) for s in [*range(50, 100), *range(50)]], progress=99)
    searched = translate_exact(30, model.view(syncs=[]), model.probe)
    assert searched is not None and searched.downstream_offset == 80
    assert translate_scanned(30, ScanIndex.of(model.records()), 99) == Translation(30, 0, Status.SCANNED)


def test_translate_back_names_the_upstream_offset_of_the_first_unread_record() -> None:
    records = {5: FlowRecord(5, 105), 6: FlowRecord(6, 107)}

    def first_from(at: int) -> FlowRecord | None:
        return next((records[o] for o in sorted(records) if o >= at), None)

    assert translate_back(0, first_from, progress=107) == 105
    assert translate_back(6, first_from, progress=107) == 107
    assert translate_back(7, first_from, progress=110) == 111
    assert translate_back(7, first_from, progress=None) is None
