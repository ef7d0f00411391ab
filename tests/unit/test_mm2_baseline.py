"""MM2's offset-sync emission, OffsetSyncStore translation and checkpoint rule, as in Kafka 3.7.1+/4.0.

Expected values marked "OffsetSyncStoreTest", "MirrorSourceTaskTest", "OffsetSyncWriterTest" or
"MirrorCheckpointTaskTest" are those of the Java unit tests of the same name in apache/kafka.
"""

from __future__ import annotations

import random
from collections.abc import Iterable

import pytest

from mirrorflow.mm2.baseline import (
    SYNCS_PER_PARTITION,
    Mm2OffsetSyncStore,
    Mm2OffsetSyncWriter,
    mm2_checkpoint_should_emit,
)
from mirrorflow.mm2.formats import Checkpoint, OffsetSync

TP = ("topic1", 2)


def started_store(*, initialization_must_read_to_end: bool = True) -> Mm2OffsetSyncStore:
    store = Mm2OffsetSyncStore(initialization_must_read_to_end=initialization_must_read_to_end)
    store.finish_initial_read()
    return store


def sync(store: Mm2OffsetSyncStore, upstream: int, downstream: int, tp: tuple[str, int] = TP) -> None:
    store.add(OffsetSync(tp[0], tp[1], upstream, downstream))


def translate(store: Mm2OffsetSyncStore, upstream: int) -> int | None:
    return store.translate(TP[0], TP[1], upstream)


def distinct(slots: Iterable[OffsetSync]) -> list[OffsetSync]:
    out: list[OffsetSync] = []
    for s in slots:
        if not out or s is not out[-1]:
            out.append(s)
    return out


def assert_sparse_sync_invariant(store: Mm2OffsetSyncStore) -> None:
    """OffsetSyncStoreTest.assertSparseSyncInvariant: invariants B and C for every pair of slots."""
    slots = store.syncs(*TP)
    for j in range(SYNCS_PER_PARTITION):
        for i in range(j):
            up_i, up_j = slots[i].upstream_offset, slots[j].upstream_offset
            if up_i == up_j:
                continue
            lower = up_j + (1 << max(i - 2, 0))
            if lower < 2**63:
                assert up_i >= lower, f"invariant C({i},{j}): {up_i} < {lower}"
            upper = up_j + (1 << j) - (1 << i)
            if upper < 2**63:
                assert up_i <= upper, f"invariant B({i},{j}): {up_i} > {upper}"


def assert_sparse_sync(store: Mm2OffsetSyncStore, sync_offset: int, previous_offset: int) -> None:
    """OffsetSyncStoreTest.assertSparseSync."""
    expected_before = -1 if previous_offset == -1 else previous_offset + 1
    assert translate(store, sync_offset - 1) == expected_before
    assert translate(store, sync_offset) == sync_offset
    assert translate(store, sync_offset + 1) == sync_offset + 1
    assert translate(store, sync_offset + 2) == sync_offset + 1


# ---------------------------------------------------------------- Mm2OffsetSyncWriter


def emitted(writer: Mm2OffsetSyncWriter, upstream: int, downstream: int) -> bool:
    sent = writer.commit_record(*TP, upstream, downstream)
    assert sent in ([], [OffsetSync(*TP, upstream, downstream)])
    return bool(sent)


def test_writer_emission_rule() -> None:
    """MirrorSourceTaskTest.testOffsetSync, with the writer resetting the state after each sync."""
    writer = Mm2OffsetSyncWriter(offset_lag_max=50)
    steps = [
        (0, 100, True),  # first record this task lifetime
        (2, 102, True),  # upstream offset skipped
        (3, 152, False),  # 152 - (102 + 1) = 49 < 50
        (4, 153, True),  # 153 - (102 + 1) = 50
        (5, 154, False),
        (6, 203, False),
        (7, 204, True),  # one past the lag
        (2, 206, True),  # upstream reset
        (3, 207, False),
        (4, 3, True),  # downstream truncated
        (5, 4, False),
        (7, 6, True),  # upstream gap
        (7, 6, True),  # upstream did not advance
        (8, 7, False),
        (10, 57, True),
        (11, 58, False),
    ]
    for upstream, downstream, expected in steps:
        assert emitted(writer, upstream, downstream) is expected, (upstream, downstream)


def test_writer_with_zero_lag_syncs_every_record() -> None:
    """MirrorSourceTaskTest.testZeroOffsetSync."""
    writer = Mm2OffsetSyncWriter(offset_lag_max=0)
    pairs = [(0, 100), (2, 102), (3, 153), (4, 154), (5, 155), (6, 207), (2, 208), (3, 209), (4, 3), (5, 4)]
    pairs += [(7, 6), (7, 6), (8, 7), (10, 57), (11, 58)]
    assert all(emitted(writer, u, d) for u, d in pairs)


def test_writer_queues_pending_and_delayed() -> None:
    """OffsetSyncWriterTest.testMaybeQueueOffsetSyncs."""
    writer = Mm2OffsetSyncWriter(offset_lag_max=2, deliver_immediately=False, max_outstanding=1)
    assert writer.commit_record(*TP, 0, 1) == [OffsetSync(*TP, 0, 1)]
    assert writer.commit_record(*TP, 1, 2) == []
    assert writer.delayed == {TP: OffsetSync(*TP, 1, 2)}
    assert writer.pending == {}


def test_writer_waits_for_in_flight_syncs() -> None:
    """OffsetSyncWriterTest.testFirePendingOffsetSyncs, then what happens once the ack arrives."""
    writer = Mm2OffsetSyncWriter(offset_lag_max=1, deliver_immediately=False, max_outstanding=1)
    assert writer.commit_record(*TP, 0, 100) == [OffsetSync(*TP, 0, 100)]
    assert writer.outstanding == 1
    assert writer.commit_record(*TP, 2, 102) == []
    assert writer.pending == {TP: OffsetSync(*TP, 2, 102)}
    writer.delivered()
    assert writer.outstanding == 0
    assert writer.pending == {TP: OffsetSync(*TP, 2, 102)}, "acks alone send nothing, as in MM2"
    assert writer.commit() == [OffsetSync(*TP, 2, 102)]


def test_only_the_latest_pending_sync_of_a_partition_is_sent() -> None:
    writer = Mm2OffsetSyncWriter(offset_lag_max=0, deliver_immediately=False, max_outstanding=1)
    writer.commit_record(*TP, 0, 0)
    assert writer.commit_record(*TP, 1, 1) == []
    assert writer.commit_record(*TP, 2, 2) == []
    writer.delivered()
    assert writer.commit() == [OffsetSync(*TP, 2, 2)]


def test_commit_promotes_delayed_syncs() -> None:
    """OffsetSyncWriterTest.testPromoteDelayedOffsetSyncs (KAFKA-15906)."""
    writer = Mm2OffsetSyncWriter(offset_lag_max=50)
    writer.commit_record(*TP, 0, 100)
    writer.commit_record(*TP, 1, 101)
    assert writer.commit() == [OffsetSync(*TP, 1, 101)]
    assert writer.delayed == {}
    assert writer.pending == {}
    assert writer.commit() == []


def test_at_most_ten_syncs_in_flight_per_call() -> None:
    writer = Mm2OffsetSyncWriter(offset_lag_max=100)
    for p in range(15):
        writer.commit_record("t", p, 0, 0)
        writer.commit_record("t", p, 1, 1)
    first = writer.commit()
    assert [s.partition for s in first] == list(range(10))
    assert [s.partition for s in writer.commit()] == list(range(10, 15))
    assert writer.outstanding == 0


def test_partitions_are_independent() -> None:
    writer = Mm2OffsetSyncWriter(offset_lag_max=10)
    assert writer.commit_record("a", 0, 0, 0) == [OffsetSync("a", 0, 0, 0)]
    assert writer.commit_record("a", 1, 5, 0) == [OffsetSync("a", 1, 5, 0)]
    assert writer.commit_record("a", 0, 1, 1) == []
    assert writer.commit_record("b", 0, 1, 1) == [OffsetSync("b", 0, 1, 1)]


def test_writer_rejects_bad_settings_and_acks() -> None:
    with pytest.raises(TypeError, match="offset.lag.max"):
        Mm2OffsetSyncWriter(offset_lag_max="100")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_outstanding"):
        Mm2OffsetSyncWriter(max_outstanding=0)
    writer = Mm2OffsetSyncWriter(deliver_immediately=False)
    with pytest.raises(ValueError, match="1 acks reported but only 0 syncs are in flight"):
        writer.delivered()


# ---------------------------------------------------------------- Mm2OffsetSyncStore


def test_offset_translation() -> None:
    """OffsetSyncStoreTest.testOffsetTranslation."""
    store = started_store()
    sync(store, 100, 200)
    assert translate(store, 150) == 201  # one past the sync, never dead-reckoned
    sync(store, 150, 251)
    assert translate(store, 150) == 251
    assert translate(store, 5) == -1  # before any sync
    sync(store, 200, 10)  # downstream reset
    assert translate(store, 200) == 10
    sync(store, 20, 20)  # upstream reset
    assert translate(store, 20) == 20


def test_plus_one_rule_example() -> None:
    store = started_store()
    sync(store, 100, 42)
    assert translate(store, 100) == 42
    assert translate(store, 150) == 43


def test_no_translation_before_the_initial_read_ends() -> None:
    """OffsetSyncStoreTest.testNoTranslationIfStoreNotStarted."""
    store = Mm2OffsetSyncStore()
    assert translate(store, 0) is None
    sync(store, 100, 200)
    assert not store.read_to_end
    assert [translate(store, u) for u in (0, 100, 200)] == [None, None, None]
    store.finish_initial_read()
    assert [translate(store, u) for u in (0, 100, 200)] == [-1, 200, 201]


def test_no_translation_without_syncs() -> None:
    """OffsetSyncStoreTest.testNoTranslationIfNoOffsetSync."""
    store = started_store()
    assert translate(store, 0) is None
    sync(store, 5, 5, tp=("other", 0))
    assert translate(store, 0) is None


def test_past_offset_translation() -> None:
    """OffsetSyncStoreTest.testPastOffsetTranslation: precision halves as syncs age."""
    store = Mm2OffsetSyncStore(initialization_must_read_to_end=True)
    for offset in range(0, 1001, 10):
        sync(store, offset, offset)
        assert_sparse_sync_invariant(store)
    store.finish_initial_read()
    # Only the last sync of the initial read survives it.
    assert_sparse_sync(store, 1000, -1)
    for offset in range(1010, 10001, 10):
        sync(store, offset, offset)
        assert_sparse_sync_invariant(store)
    assert_sparse_sync(store, 1000, -1)
    expected = [
        (4840, 1000),
        (6760, 4840),
        (8680, 6760),
        (9160, 8680),
        (9640, 9160),
        (9880, 9640),
        (9940, 9880),
        (9970, 9940),
        (9990, 9970),
        (10000, 9990),
    ]
    for sync_offset, previous in expected:
        assert_sparse_sync(store, sync_offset, previous)
    # An upstream rewind clears all history.
    sync(store, 1500, 11000)
    assert_sparse_sync_invariant(store)
    assert [translate(store, u) for u in (1499, 1500, 2000)] == [-1, 11000, 11001]


def test_past_offset_translation_when_checkpoints_were_read() -> None:
    """OffsetSyncStoreTest.testPastOffsetTranslationWithoutInitializationReadToEnd."""
    store = Mm2OffsetSyncStore(initialization_must_read_to_end=False)
    for offset in range(0, 1001, 10):
        sync(store, offset, offset)
        assert_sparse_sync_invariant(store)
    store.finish_initial_read()
    for sync_offset, previous in [(480, 0), (720, 480), (1000, 990)]:
        assert_sparse_sync(store, sync_offset, previous)
    for offset in range(1000, 10001, 10):
        sync(store, offset, offset)
        assert_sparse_sync_invariant(store)
    expected = [
        (3840, 0),
        (7680, 3840),
        (8640, 7680),
        (9120, 8640),
        (9600, 9120),
        (9840, 9600),
        (9900, 9840),
        (9960, 9900),
        (9990, 9960),
        (10000, 9990),
    ]
    for sync_offset, previous in expected:
        assert_sparse_sync(store, sync_offset, previous)
    sync(store, 1500, 11000)
    assert_sparse_sync_invariant(store)
    assert [translate(store, u) for u in (1499, 1500, 2000)] == [-1, 11000, 11001]


def assert_bounded_expirations(first_offset: int, steps: Iterable[int], maximum_expirations: int) -> None:
    """OffsetSyncStoreTest.assertSyncSpacingHasBoundedExpirations."""
    store = started_store()
    sync(store, first_offset, first_offset)
    offset = first_offset
    last_count = 1
    for step in steps:
        offset += step
        assert offset < 2**63, "test is invalid, offset overflowed"
        sync(store, offset, offset)
        slots = store.syncs(*TP)
        assert slots[0].upstream_offset == offset  # invariant A
        assert slots[63].upstream_offset == first_offset  # invariant D
        count = len(distinct(slots))
        expired = last_count - count + 1
        assert expired <= maximum_expirations, f"expired {expired} syncs after offset {offset}"
        last_count = count


def test_consistently_spaced_syncs_expire_at_most_one() -> None:
    """OffsetSyncStoreTest.testConsistentlySpacedSyncs, over every step size up to Long.MAX_VALUE / 100."""
    step = 1
    while step < (2**63 - 1) // 100:
        for first_offset in (0, 1, 29):
            assert_bounded_expirations(first_offset, [step] * 100, 1)
        step = step * 2 + 1


def test_randomly_spaced_syncs_expire_boundedly() -> None:
    """OffsetSyncStoreTest.testRandomlySpacedSyncs: n bits of spread expire at most n + 2 syncs."""
    rnd = random.Random(0)
    lag = 1 << 16
    for n in (1, 2, 3, 5, 8, 13, 21, 34, 53):
        spread = 1 << n
        assert_bounded_expirations(0, [rnd.randrange(0, spread) for _ in range(256)], n + 2)
        assert_bounded_expirations(0, [rnd.randrange(lag, lag + spread) for _ in range(256)], n + 2)


def test_dropped_syncs_expire_at_most_two() -> None:
    """OffsetSyncStoreTest.testDroppedSyncsSpacing."""
    rnd = random.Random(0)
    assert_bounded_expirations(0, [rnd.choice((100, 200)) for _ in range(3000)], 2)


def test_resent_equal_syncs_are_distinct_entries() -> None:
    """Slots are compared by identity, like Java's `==`: a re-sent sync with the same offsets
    is another entry. Here that keeps sync 12; comparing by value would drop it (tracing
    OffsetSyncStore.updateSyncArray by hand gives the same slots)."""
    store = started_store()
    received = [OffsetSync(*TP, u, u) for u in (2, 8, 12, 16, 17, 17, 17, 20, 20, 25)]
    for s in received:
        store.add(s)
    slots = store.syncs(*TP)
    assert distinct(slots) == [received[9], received[8], received[2], received[0]]
    assert [slots[i] is received[8] for i in (3, 4)] == [False, True]
    assert translate(store, 19) == 13


def test_translation_is_monotonic_for_a_fixed_store() -> None:
    rnd = random.Random(3)
    store = started_store()
    offset = 0
    for _ in range(500):
        offset += rnd.randrange(1, 40)
        sync(store, offset, offset * 2)
    translations = [translate(store, u) for u in range(offset + 5)]
    assert translations == sorted(translations)


def test_precision_degrades_at_most_linearly_with_distance() -> None:
    """A group i slots back is less than 2^(i-1) past the sync it is translated from (invariant
    B), so the records it re-reads grow at most linearly with its distance from the newest sync."""
    for seed in range(12):
        rnd = random.Random(seed)
        max_gap = rnd.choice((1, 3, 10, 100))
        store = started_store()
        offset = 0
        sync(store, 0, 0)
        for _ in range(rnd.choice((50, 400, 1500))):
            offset += rnd.randrange(1, max_gap + 1)
            sync(store, offset, offset)
        slots = store.syncs(*TP)
        for group in rnd.sample(range(offset + 1), min(offset + 1, 2000)):
            i = next(i for i, s in enumerate(slots) if s.upstream_offset <= group)
            error = group - slots[i].upstream_offset
            assert i == 0 or error < 1 << (i - 1)
            assert error <= 4 * (offset - group + max_gap)


def replicate(
    rnd: random.Random, records: int, offset_lag_max: int, commit_every: int
) -> tuple[list[tuple[int, int]], list[OffsetSync], Mm2OffsetSyncWriter]:
    """Copy a source partition with gaps (compaction, transaction markers) through MM2's writer."""
    writer = Mm2OffsetSyncWriter(offset_lag_max)
    pairs: list[tuple[int, int]] = []
    syncs: list[OffsetSync] = []
    upstream = rnd.randrange(0, 50)
    for downstream in range(records):
        pairs.append((upstream, downstream))
        syncs += writer.commit_record(*TP, upstream, downstream)
        if downstream % commit_every == commit_every - 1:
            syncs += writer.commit()
        upstream += 1 if rnd.random() < 0.9 else rnd.randrange(2, 6)
    return pairs, syncs, writer


def true_position(pairs: list[tuple[int, int]], group: int) -> int:
    """Where a group at upstream offset `group` must resume downstream to miss nothing."""
    return next((d for u, d in pairs if u >= group), pairs[-1][1] + 1)


@pytest.mark.parametrize("seed", range(8))
def test_translation_never_skips_records(seed: int) -> None:
    rnd = random.Random(seed)
    lag = rnd.choice((1, 10, 100))
    pairs, syncs, _ = replicate(rnd, rnd.choice((300, 2000)), lag, rnd.choice((50, 500)))
    store = started_store()
    for s in syncs:
        store.add(s)
        assert_sparse_sync_invariant(store)
    for group in range(pairs[-1][0] + 2):
        translated = translate(store, group)
        assert translated is not None
        if translated >= 0:
            assert translated <= true_position(pairs, group), group


def test_caught_up_groups_lose_at_most_offset_lag_max_and_nothing_after_commit() -> None:
    """§6b: before the task commit, groups past the newest sync re-read up to offset.lag.max
    records; commit() syncs the last mirrored record, so the end translates exactly (KAFKA-15906)."""
    lag = 100
    rnd = random.Random(5)
    pairs, syncs, writer = replicate(rnd, 1234, lag, commit_every=10**9)
    store = started_store()
    for s in syncs:
        store.add(s)
    newest = store.syncs(*TP)[0]
    end_upstream = pairs[-1][0] + 1
    for group in range(newest.upstream_offset, end_upstream + 1):
        lost = true_position(pairs, group) - translate(store, group)
        assert 0 <= lost <= lag
    assert translate(store, end_upstream) < len(pairs)
    for s in writer.commit():
        store.add(s)
    assert translate(store, end_upstream) == len(pairs)


# ---------------------------------------------------------------- checkpoints


def checkpoint(upstream: int, downstream: int, group: str = "g1") -> Checkpoint:
    return Checkpoint(group, "source1.topic1", 0, upstream, downstream)


@pytest.mark.parametrize(
    ("previous", "new", "expected"),
    [
        (None, checkpoint(10, 5), True),  # first for this group and partition
        (checkpoint(10, 5), checkpoint(9, 3), True),  # upstream rewind: emitted although downstream rewinds
        (checkpoint(10, 5), checkpoint(12, 6), True),  # downstream advanced
        (checkpoint(10, 5), checkpoint(12, 5), False),  # repeat of the downstream offset
        (checkpoint(10, 5), checkpoint(10, 5), False),  # exact repeat
        (checkpoint(10, 5), checkpoint(12, 4), False),  # downstream would rewind
    ],
)
def test_checkpoint_emission_rule(previous: Checkpoint | None, new: Checkpoint, expected: bool) -> None:
    assert mm2_checkpoint_should_emit(previous, new) is expected


def test_checkpoint_rule_needs_the_same_group_and_partition() -> None:
    with pytest.raises(ValueError, match="same group and partition"):
        mm2_checkpoint_should_emit(checkpoint(1, 1, group="a"), checkpoint(2, 2, group="b"))


def test_checkpoints_stay_monotonic_when_the_store_drops_syncs() -> None:
    """MirrorCheckpointTaskTest.testCheckpointRecordsMonotonicIfStoreRewinds."""
    store = started_store()
    sync(store, 11, 4)
    sync(store, 12, 5)
    group = 13
    assert translate(store, group) == 6
    emitted_checkpoint = checkpoint(group, 6)
    assert mm2_checkpoint_should_emit(None, emitted_checkpoint)
    for upstream, downstream in [(13, 6), (14, 7), (15, 8), (16, 9), (17, 10)]:
        sync(store, upstream, downstream)
    moved = translate(store, group)
    assert moved != 6
    assert not mm2_checkpoint_should_emit(emitted_checkpoint, checkpoint(group, moved))
    rewound = translate(store, group - 1)
    assert mm2_checkpoint_should_emit(emitted_checkpoint, checkpoint(group - 1, rewound))
