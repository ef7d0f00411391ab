"""Source-side offset-syncs go out only once read_committed readers see the records they point at
(issue 21). A target killed right after a copy's commit returned came back with the commit
markers skipped; the sweep then aborted the records and the copy wrote them again, but the syncs
sent after the commit pointed at the aborted records (seen in the micro-batch target-loss test,
2 of 48 syncs). The crash itself is not reproducible at will; what made it possible is: a sync
written while its records were not yet visible. Here a local application's transaction, open in
an identity-named remote partition before the copy's records, keeps them invisible on purpose."""

from __future__ import annotations

import time

from confluent_kafka import OFFSET_END, Producer

from mirrorflow.kafka import reader
from mirrorflow.kafka_offsets import consumer_offsets
from mirrorflow.mm2.formats import OffsetSync
from mirrorflow.replicate.copy import CopyWorker, UnitResult
from mirrorflow.replicate.copy.held_syncs import SYNC_WAIT_S, HeldSyncs
from mirrorflow.replicate.plan import COPY_SLOTS, PartitionSpan

from .kafkatools import create_topics, produce, read_all
from .test_copy import SYNCS_ON_SOURCE, make_job

TOTAL = 300


def syncs_of(src, topic: str) -> list[OffsetSync]:
    return [
        sync
        for sync in (OffsetSync.decode(r.key, r.value) for r in read_all(src.bootstrap, SYNCS_ON_SOURCE))
        if sync.topic == topic
    ]


def open_local_transaction(dst, topic: str) -> Producer:
    """A local application's transaction, one record written into `topic`-0 and left open."""
    local = Producer({"bootstrap.servers": dst.bootstrap, "transactional.id": f"local-app-{topic}"})
    local.init_transactions(30)
    local.begin_transaction()
    local.produce(topic, b"local", b"local", 0)
    assert local.flush(30) == 0
    return local


def span(topic: str, start: int, end: int) -> PartitionSpan:
    # Identity-named: the remote topic has the source's name, which local clients write too.
    return PartitionSpan(
        topic, 0, topic, start, end, progress=start - 1, progress_slots=COPY_SLOTS if start else 0
    )


def test_a_sync_is_written_only_once_the_records_it_points_at_are_visible(clusters) -> None:
    src, dst = clusters
    topic = "shared-orders"
    create_topics(src.bootstrap, (topic, 1))
    create_topics(dst.bootstrap, (topic, 1))
    produce(src.bootstrap, topic, [{"key": b"k%d" % i, "value": b"v%d" % i} for i in range(TOTAL)])
    job = make_job(src, dst, max_records=50)

    with CopyWorker(job) as worker:
        first = worker.copy([span(topic, 0, 100)])[0]
        assert first.ok and first.offset_syncs > 0 and first.offset_sync_errors == 0
        assert syncs_of(src, topic), "the first range's syncs, its records visible at once"

        # The copy's next records land behind the local transaction, invisible until it ends.
        local = open_local_transaction(dst, topic)
        started = time.monotonic()
        held = worker.copy([span(topic, 100, 200)])[0]
        waited = time.monotonic() - started
        assert held.ok and held.records == 100 and held.offset_sync_errors > 0, (
            "not sent, counted as not sent"
        )
        assert held.offset_syncs == 0, "syncs never sent were counted as written"
        assert waited >= SYNC_WAIT_S / 2, f"gave up after {waited:.1f}s without waiting for the records"
        assert max(s.upstream_offset for s in syncs_of(src, topic)) < 100, (
            "a sync was written while read_committed readers could not see its records"
        )

        local.abort_transaction(30)
        last = worker.copy([span(topic, 200, TOTAL)])[0]
        assert last.ok and last.offset_syncs > 0 and last.offset_sync_errors == 0

    target = {r.offset: r.value for r in read_all(dst.bootstrap, topic)}
    assert sorted(target.values()) == sorted(b"v%d" % i for i in range(TOTAL))
    syncs = syncs_of(src, topic)
    assert any(s.upstream_offset >= 200 for s in syncs)
    for sync in syncs:
        assert target[sync.downstream_offset] == b"v%d" % sync.upstream_offset, sync


def test_syncs_held_for_records_of_a_transaction_about_to_be_swept_are_never_written(clusters) -> None:
    """A writer that finds a transaction open where it writes sweeps it with an abort (recovery/hanging.py)
    and forgets, first, the syncs it holds for records in it: after the abort the last stable
    offset passes them, and they would look visible."""
    src, dst = clusters
    topic = "swept"
    create_topics(dst.bootstrap, (topic, 1))
    local = open_local_transaction(dst, topic)  # offset 0, open
    produce(dst.bootstrap, topic, [{"key": b"k", "value": b"after"}])  # offset 1
    ends = reader({"bootstrap.servers": dst.bootstrap})
    syncer = Producer({"bootstrap.servers": src.bootstrap, "enable.idempotence": True})
    try:
        held = HeldSyncs(SYNCS_ON_SOURCE, lambda: ends, lambda: syncer, 10.0)
        kept, swept = UnitResult(topic, 0, topic, 0, 1), UnitResult(topic, 0, topic, 0, 1)
        held.hold((topic, 0), [(OffsetSync(topic, 0, 7, 1), [])], swept)
        held.release(wait_s=0.5)
        assert len(held) == 1 and swept.offset_sync_errors == 0, "offset 1 is not visible yet"

        held.forget({(topic, 0): 0})
        assert len(held) == 0 and swept.offset_sync_errors == 1
        local.abort_transaction(30)
        deadline = time.monotonic() + 30  # the abort's marker is written after the call returns
        while consumer_offsets(ends, [(topic, 0)], OFFSET_END)[(topic, 0)] < 2:
            assert time.monotonic() < deadline, "the local transaction's abort marker never showed"
            time.sleep(0.05)
        held.release()
        assert len(held) == 0 and swept.offset_sync_errors == 1, "the forgotten sync stays forgotten"
        held.hold((topic, 0), [(OffsetSync(topic, 0, 8, 1), [])], kept)
        held.release(wait_s=5)
        assert syncer.flush(30) == 0
    finally:
        ends.close()
    assert len(held) == 0 and kept.offset_sync_errors == 0 and kept.offset_syncs == 1
    assert swept.offset_syncs == 0, "a forgotten sync was counted as written"
    assert [s.upstream_offset for s in syncs_of(src, topic)] == [8]
