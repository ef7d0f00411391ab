"""Who may write a slot's partitions (issue 21): a writer fenced once never takes its slot back,
one opened again after a failed transaction starts from progress settled anew, writers of older
kinds are fenced where they can still write, a worker keeps its writers from range to range, and
nothing after a commit fails the copy."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer

from mirrorflow.mm2.connect_offsets import SourceOffsetKey
from mirrorflow.replicate import copy
from mirrorflow.replicate.copy import (
    CopyWorker,
    copy_slice,
    copy_unit,
    partition_transactional_id,
    schedule,
    slot_transactional_id,
)
from mirrorflow.replicate.plan import COPY_SLOTS, PartitionSpan, writer_slot
from mirrorflow.replicate.progress import progress_record, read_progress_entries

from ..client_leaks import live_clients
from .kafkatools import create_topics, produce, read_all
from .test_copy import PROGRESS, SYNCS_ON_SOURCE, _same_slot_topics, make_job

TOTAL = 300


def fill(src, dst, topics: list[str], count: int = TOTAL) -> None:
    create_topics(src.bootstrap, *((t, 1) for t in topics))
    create_topics(dst.bootstrap, *((f"A.{t}", 1) for t in topics))
    for topic in topics:
        produce(
            src.bootstrap,
            topic,
            [{"key": b"k%d" % i, "value": b"%s-%d" % (topic.encode(), i)} for i in range(count)],
        )


def span(topic: str, start: int, end: int, *, slots: int = COPY_SLOTS) -> PartitionSpan:
    """A span as a plan makes it after progress start - 1 (written under `slots` slots)."""
    return PartitionSpan(
        topic, 0, f"A.{topic}", start, end, progress=start - 1, progress_slots=slots if start else 0
    )


def assert_exact(src, dst, topic: str) -> None:
    source = [(r.key, r.value) for r in read_all(src.bootstrap, topic)]
    assert [(r.key, r.value) for r in read_all(dst.bootstrap, f"A.{topic}")] == source, topic


def older_copy(dst, topic: str, start: int, end: int) -> Producer:
    """A writer of a mirrorflow without slots, its copy of [start, end) sent in an open transaction."""
    older = Producer(
        {
            "bootstrap.servers": dst.bootstrap,
            "transactional.id": partition_transactional_id("A", "B", topic, 0),
        }
    )
    older.init_transactions(30)
    older.begin_transaction()
    for i in range(start, end):
        older.produce(f"A.{topic}", b"%s-%d" % (topic.encode(), i), b"k%d" % i, 0)
    assert older.flush(30) == 0
    return older


def test_a_worker_keeps_its_writers_from_range_to_range(clusters) -> None:
    """The long-lived engine: a worker opens (fences, settles) each slot's writer once and copies
    range after range with it; a partition handed over later (a new topic) joins with its own."""
    src, dst = clusters
    topics = _same_slot_topics("ranges", 3)
    fill(src, dst, topics)
    job = make_job(src, dst, max_records=50)
    opened = copy.stats.writers_opened
    with CopyWorker(job) as worker:
        for start, end in ((0, 100), (100, 220), (220, TOTAL)):
            results = worker.copy([span(t, start, end) for t in topics[:2]])
            assert [(r.ok, r.records, r.resumed_from) for r in results] == [(True, end - start, start)] * 2
        assert copy.stats.writers_opened == opened + 1, "one writer for the slot, kept from range to range"
        late = worker.copy([span(topics[2], 0, TOTAL)])
        assert late[0].ok and late[0].records == TOTAL
        assert worker.committed() == {(t, 0): TOTAL - 1 for t in topics}
    assert copy.stats.writers_opened == opened + 1
    for topic in topics:
        assert_exact(src, dst, topic)


def test_a_writer_fenced_inside_a_shared_transaction_never_takes_its_slot_back(clusters) -> None:
    """Fenced while its partitions shared a transaction, a writer once copied them again one by
    one with a new producer, whose init_transactions fenced the newer writer back: the newer
    writer's commit then failed. Now every partition of the slot ends "fenced", untried."""
    src, dst = clusters
    topics = _same_slot_topics("fenced", 4)
    fill(src, dst, topics, 40)
    job = make_job(src, dst)
    clients = live_clients()
    with CopyWorker(job) as worker:
        assert all(r.ok for r in worker.copy([span(t, 0, 20) for t in topics]))
        newer = Producer(
            {
                "bootstrap.servers": dst.bootstrap,
                "transactional.id": slot_transactional_id("A", "B", writer_slot(topics[0], 0)),
            }
        )
        newer.init_transactions(30)
        newer.begin_transaction()

        results = worker.copy([span(t, 20, 40) for t in topics])

        assert all(r.error and r.error.startswith("fenced: another writer took over") for r in results), [
            r.error for r in results
        ]
        assert worker.fenced_slots == [writer_slot(topics[0], 0)]
    key, value, home = progress_record("A", topics[0], 0, 39, 25, "", COPY_SLOTS)
    newer.produce(PROGRESS, value, key, home)
    newer.commit_transaction(30)  # the slot stayed the newer writer's
    del newer, worker
    # The fenced flush raised through a SystemError that confluent-kafka never releases: while it
    # held the worker's frames, every client of the worker lived (and ran) until the process ended.
    assert live_clients() == clients, "the closed worker left clients running"
    for topic in topics:
        assert [r.value for r in read_all(dst.bootstrap, f"A.{topic}")] == [
            b"%s-%d" % (topic.encode(), i) for i in range(20)
        ]


def test_a_writer_reopened_after_a_failed_transaction_starts_each_partition_from_settled_progress(
    clusters, monkeypatch
) -> None:
    """A transaction that fails for a passing reason (a commit timing out on a loaded machine) drops
    the slot's producer, and the writer opens a new one, which fences and settles again. A
    concurrent run may have taken the slot in between and copied the slot's other partitions; they
    once went on from where this writer had placed them before the failure, and a partition the
    other run had copied whole was copied a second time, with both runs reporting success."""
    src, dst = clusters
    first, second = _same_slot_topics("reopened", 2)
    fill(src, dst, [first, second])
    job = make_job(src, dst, max_records=100)  # neither is small: each takes transactions of its own
    real_transact = schedule.transact
    failed: list[list[str]] = []

    def concurrent_run_then_timeout(job_, copies, *rest):
        if failed:
            return real_transact(job_, copies, *rest)
        failed.append([c.span.topic for c in copies])
        newer = copy_slice(job, [span(first, 0, TOTAL), span(second, 0, TOTAL)])
        assert [(r.ok, r.records) for r in newer] == [(True, TOTAL)] * 2
        # The one thing made up: librdkafka's answer to a transactional call that timed out.
        raise KafkaException(KafkaError(KafkaError._TIMED_OUT, "commit_transaction timed out"))

    monkeypatch.setattr(schedule, "transact", concurrent_run_then_timeout)
    clients = live_clients()
    results = copy_slice(job, [span(first, 0, TOTAL), span(second, 0, TOTAL)])

    assert failed == [[first]]
    assert [(r.ok, r.records, r.progress) for r in results] == [(True, 0, TOTAL - 1)] * 2
    # The failed producer's abort raised while the timeout was being handled: confluent-kafka then
    # keeps the timeout (and once, with it, the frames holding every client of the copy) for good.
    assert live_clients() == clients, "the copy left clients running"
    for topic in (first, second):
        assert_exact(src, dst, topic)


def test_an_older_writer_with_a_transaction_open_in_a_remote_partition_is_fenced_before_it_commits(
    clusters,
) -> None:
    """A writer of a mirrorflow without slots (a transactional.id per partition) started after the
    new engine opened its slot, so the slot's one fence of older ids came before it: its
    transaction is open in the remote partition when the next range starts. Its records show there
    (an open transaction where the writer checks, or records where its own should land), and
    fencing its id aborts it: its commit fails, and the target holds every record once."""
    src, dst = clusters
    (topic,) = _same_slot_topics("olderopen", 1)
    fill(src, dst, [topic])
    job = make_job(src, dst, max_records=50)
    with CopyWorker(job) as worker:
        assert worker.copy([span(topic, 0, 100)])[0].ok
        older = older_copy(dst, topic, 100, 150)

        result = worker.copy([span(topic, 100, TOTAL)])[0]

    assert result.ok and result.records == TOTAL - 100, result.error
    with pytest.raises(KafkaException):
        older.commit_transaction(30)
    assert_exact(src, dst, topic)


def test_an_older_writer_that_committed_between_two_ranges_is_followed_not_copied_again(clusters) -> None:
    """Its records and progress landed after this writer's last commit: the next chunk lands
    behind them, not where this writer's own last records end, so the chunk is aborted, the older
    id fenced and the copy goes on from progress read again, after the older writer's records."""
    src, dst = clusters
    (topic,) = _same_slot_topics("oldercommitted", 1)
    fill(src, dst, [topic])
    job = make_job(src, dst, max_records=50)
    with CopyWorker(job) as worker:
        assert worker.copy([span(topic, 0, 100)])[0].ok
        older = older_copy(dst, topic, 100, 150)
        key, value, home = progress_record("A", topic, 0, 149, 25)
        older.produce(PROGRESS, value, key, home)
        older.commit_transaction(30)

        result = worker.copy([span(topic, 100, TOTAL)])[0]

    assert result.ok and result.records == TOTAL - 150 and result.attempts == 2, (
        result.error,
        result.records,
    )
    assert_exact(src, dst, topic)
    assert (
        read_progress_entries({"bootstrap.servers": dst.bootstrap}, PROGRESS, "A")[(topic, 0)].slots
        == COPY_SLOTS
    )


def test_an_older_zombie_holding_a_progress_partition_is_fenced_before_the_settle_waits(clusters) -> None:
    """Its transaction is open in the progress partition of the copy's key, with a timeout far
    beyond the settle's: a settle before fencing would wait its whole limit (then sweep). Fenced
    first, it never holds the settle."""
    src, dst = clusters
    (topic,) = _same_slot_topics("olderzombie", 1)
    fill(src, dst, [topic], 100)
    zombie = Producer(
        {
            "bootstrap.servers": dst.bootstrap,
            "transactional.id": partition_transactional_id("A", "B", topic, 0),
            "transaction.timeout.ms": 900_000,
        }
    )
    zombie.init_transactions(30)
    zombie.begin_transaction()
    home = SourceOffsetKey("A", topic, 0).offsets_partition(25)
    key, value, _ = progress_record("A", topic, 0, 99, 25)
    zombie.produce(PROGRESS, value, key, home)
    assert zombie.flush(30) == 0
    swept = copy.stats.transactions_swept

    result = copy_unit(make_job(src, dst), span(topic, 0, 100, slots=0))

    assert result.ok and result.records == 100, result.error
    assert copy.stats.transactions_swept == swept, "a settle waited out its limit"
    assert_exact(src, dst, topic)


def test_source_side_offset_syncs_the_source_refuses_are_counted_and_the_copy_stands(kafka_clusters) -> None:
    """What follows a commit never fails the copy: the data and progress are on the target. An
    offset-sync the source refuses (here: too large for the syncs topic) is counted as an error,
    not lost in silence, and never as written (it was, until the source's answer decided it)."""
    src, dst = kafka_clusters(2)
    create_topics(
        src.bootstrap, (SYNCS_ON_SOURCE, 1, {"cleanup.policy": "compact", "max.message.bytes": "64"})
    )
    create_topics(dst.bootstrap, (PROGRESS, 25, {"cleanup.policy": "compact"}))
    (topic,) = _same_slot_topics("refusedsyncs", 1)
    fill(src, dst, [topic], 100)

    result = copy_unit(make_job(src, dst), span(topic, 0, 100))

    assert result.ok and result.records == 100, result.error
    assert result.offset_sync_errors > 0, "the refused syncs were not counted"
    assert result.offset_syncs == 0, "syncs the source refused were counted as written"
    assert_exact(src, dst, topic)
