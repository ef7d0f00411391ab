"""The progress reader a copy worker keeps for its whole share: each settle sees every
committed progress record written before it began, waits for transactions open at that moment,
and reads only what was added since the last settle, never the topic from its start again."""

from __future__ import annotations

import dataclasses
import logging
import threading
import time

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from mirrorflow.kafka import topic_ids
from mirrorflow.mm2.connect_offsets import SourceOffsetKey
from mirrorflow.replicate.progress import ProgressReader, progress_record

from .kafkatools import create_topics

PARTITIONS = 5


def writer(bootstrap: str, name: str) -> Producer:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": name})
    producer.init_transactions(30)
    return producer


def commit(producer: Producer, topic: str, where: tuple[str, int], offset: int) -> None:
    key, value, partition = progress_record("A", where[0], where[1], offset, PARTITIONS)
    producer.begin_transaction()
    producer.produce(topic, key=key, value=value, partition=partition)
    producer.commit_transaction(30)


def test_each_settle_reads_only_what_was_added_and_sees_all_of_it(shared_clusters, unique) -> None:
    b = shared_clusters[1]
    topic = unique("progress")
    create_topics(b.bootstrap, (topic, PARTITIONS, {"cleanup.policy": "compact"}))
    producer = writer(b.bootstrap, unique("w"))
    units = [(f"t{i}", i % 3) for i in range(40)]
    with ProgressReader({"bootstrap.servers": b.bootstrap}, topic, "A") as reader:
        for round_ in range(3):
            for n, unit in enumerate(units):
                commit(producer, topic, unit, round_ * 100 + n)
                reader.settle([unit])
                assert reader.get(*unit).offset == round_ * 100 + n, (round_, unit)
        # Every record was read once: 120 settles cost 120 records, not a re-read each time.
        assert reader.records_read == 3 * len(units)
        reader.settle()
        assert {where: s.offset for where, s in reader.entries().items()} == {
            unit: 200 + n for n, unit in enumerate(units)
        }


def test_a_settle_waits_for_a_transaction_open_when_it_began(shared_clusters, unique) -> None:
    b = shared_clusters[1]
    topic = unique("progress")
    create_topics(b.bootstrap, (topic, 1, {"cleanup.policy": "compact"}))
    slow = writer(b.bootstrap, unique("slow"))
    key, value, partition = progress_record("A", "t", 0, 41, 1)
    slow.begin_transaction()
    slow.produce(topic, key=key, value=value, partition=partition)
    assert slow.flush(30) == 0  # on the log, not committed

    def commit_later() -> None:
        time.sleep(1.0)
        slow.commit_transaction(30)

    later = threading.Thread(target=commit_later)
    with ProgressReader({"bootstrap.servers": b.bootstrap}, topic, "A") as reader:
        later.start()
        started = time.monotonic()
        reader.settle([("t", 0)])
        waited = time.monotonic() - started
        later.join()
    assert reader.get("t", 0).offset == 41
    assert waited >= 0.5, "the settle returned before the open transaction was decided"


def test_settles_from_many_threads_share_rounds_and_each_sees_what_came_before_it(
    shared_clusters, unique
) -> None:
    """A worker's copy threads settle side by side. Each settle must still see every record
    committed before it was called (its own included): a call never joins a round that began
    before it, and calls made while one round reads are served together by the next."""
    b = shared_clusters[1]
    topic = unique("progress")
    create_topics(b.bootstrap, (topic, PARTITIONS, {"cleanup.policy": "compact"}))
    threads, commits = 8, 15
    wrong: list[str] = []
    with ProgressReader({"bootstrap.servers": b.bootstrap}, topic, "A") as reader:

        def work(n: int) -> None:
            producer = writer(b.bootstrap, unique(f"w{n}"))
            unit = (f"t{n}", n)
            for i in range(commits):
                commit(producer, topic, unit, i)
                reader.settle([unit])
                found = reader.get(*unit)
                if found is None or found.offset != i:
                    wrong.append(f"{unit} after commit {i}: {found}")

        workers = [threading.Thread(target=work, args=(n,)) for n in range(threads)]
        for thread in workers:
            thread.start()
        for thread in workers:
            thread.join(120)
        assert wrong == []
        # Fewer rounds than settles: calls made during a round shared the next one.
        assert reader.rounds < threads * commits, reader.rounds
        assert reader.records_read == threads * commits


def test_reading_ahead_reads_what_is_committed_without_waiting_and_the_settle_after_reads_only_the_rest(
    shared_clusters, unique
) -> None:
    """A writer about to fence an older one reads progress ahead (CopyWorker.copy): everything
    committed so far, at once, even with the older writer's transaction open; the settle after
    the fencing then reads only what came after, not the partitions' history again."""
    b = shared_clusters[1]
    topic = unique("progress")
    create_topics(b.bootstrap, (topic, PARTITIONS, {"cleanup.policy": "compact"}))
    history = writer(b.bootstrap, unique("history"))
    for offset in range(50):
        commit(history, topic, ("t", 0), offset)
    older = writer(b.bootstrap, unique("older"))
    key, value, partition = progress_record("A", "t", 0, 99, PARTITIONS)
    older.begin_transaction()
    older.produce(topic, key=key, value=value, partition=partition)
    assert older.flush(30) == 0  # open: its records are on the log, not decided

    with ProgressReader({"bootstrap.servers": b.bootstrap}, topic, "A", timeout_s=20) as reader:
        started = time.monotonic()
        reader.read_ahead([("t", 0)])
        assert time.monotonic() - started < 10, "reading ahead waited for the open transaction"
        assert reader.records_read == 50 and reader.get("t", 0).offset == 49
        older.commit_transaction(30)
        reader.settle([("t", 0)])
        assert reader.get("t", 0).offset == 99
        assert reader.records_read == 51, "the settle read the history again"


def topic_id(bootstrap: str, topic: str) -> str:
    return topic_ids(AdminClient({"bootstrap.servers": bootstrap}), [topic], answered=True)[topic]


def test_a_reader_started_from_a_plans_read_reads_only_what_came_after_and_finds_what_a_full_read_finds(
    shared_clusters, unique
) -> None:
    """A plan hands its settled read of progress to the copy tasks (Plan.progress_read): a
    window's task then reads the records written since the plan, not the topic's history, and
    knows every partition's progress as a read from the start would, a tombstone included."""
    b = shared_clusters[1]
    topic = unique("progress")
    create_topics(b.bootstrap, (topic, PARTITIONS, {"cleanup.policy": "compact"}))
    producer = writer(b.bootstrap, unique("w"))
    units = [(f"t{i}", i % 3) for i in range(40)]
    for round_ in range(2):
        for n, unit in enumerate(units):
            commit(producer, topic, unit, round_ * 100 + n)
    config = {"bootstrap.servers": b.bootstrap}
    with ProgressReader(config, topic, "A") as plans:
        plans.settle()
        snapshot = plans.snapshot(topic_id(b.bootstrap, topic))
    assert snapshot is not None and len(snapshot.entries) == len(units)

    # After the plan: five partitions move on, one gets a tombstone (its progress removed).
    for n, unit in enumerate(units[:5]):
        commit(producer, topic, unit, 500 + n)
    gone = SourceOffsetKey(cluster="A", topic=units[7][0], partition=units[7][1])
    producer.begin_transaction()
    producer.produce(topic, key=gone.key_bytes(), value=None, partition=gone.offsets_partition(PARTITIONS))
    producer.commit_transaction(30)

    with (
        ProgressReader(
            config, topic, "A", start=snapshot, start_id=lambda: topic_id(b.bootstrap, topic)
        ) as task,
        ProgressReader(config, topic, "A") as full,
    ):
        task.settle()
        full.settle()
        assert task.records_read == 6, "the task read the history the plan had read"
        assert full.records_read == 2 * len(units) + 6
        assert task.entries() == full.entries()
        assert task.get(*units[0]).offset == 500 and task.get(*units[7]) is None


def test_a_plans_read_of_a_progress_topic_deleted_and_made_again_is_not_taken(
    shared_clusters, unique
) -> None:
    """The same offsets of a progress topic made again hold other records: a task reads it from
    its start, and nothing the plan found in the old topic survives."""
    b = shared_clusters[1]
    topic = unique("progress")
    create_topics(b.bootstrap, (topic, PARTITIONS, {"cleanup.policy": "compact"}))
    old = writer(b.bootstrap, unique("old"))
    for n in range(20):
        commit(old, topic, ("t", n), n)
    config = {"bootstrap.servers": b.bootstrap}
    with ProgressReader(config, topic, "A") as plans:
        plans.settle()
        snapshot = plans.snapshot(topic_id(b.bootstrap, topic))
    assert snapshot is not None
    admin = AdminClient(config)
    admin.delete_topics([topic])[topic].result(30)
    deadline = time.monotonic() + 60
    while True:  # the controller takes a moment to forget the old topic
        try:
            create_topics(b.bootstrap, (topic, PARTITIONS, {"cleanup.policy": "compact"}))
            break
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)
    new = writer(b.bootstrap, unique("new"))
    commit(new, topic, ("u", 0), 7)

    with ProgressReader(
        config, topic, "A", start=snapshot, start_id=lambda: topic_id(b.bootstrap, topic)
    ) as task:
        task.settle()
        assert task.entries() == {("u", 0): task.get("u", 0)} and task.get("u", 0).offset == 7
        assert task.records_read == 1


def test_a_read_that_ended_beyond_a_progress_partitions_end_now_is_read_again_from_its_start(
    shared_clusters, unique, caplog
) -> None:
    """A seed whose positions lie past where the same topic (same id) now ends: records it read
    were lost (a target that lost acknowledged writes, a log truncated by an unclean election).
    Reading on from there would skip everything written at those offsets since; the partitions
    behind are forgotten and read again, and what the seed claimed of them is gone."""
    b = shared_clusters[1]
    topic = unique("progress")
    create_topics(b.bootstrap, (topic, PARTITIONS, {"cleanup.policy": "compact"}))
    producer = writer(b.bootstrap, unique("w"))
    units = [(f"t{i}", i % 3) for i in range(12)]
    for n, unit in enumerate(units):
        commit(producer, topic, unit, n)
    config = {"bootstrap.servers": b.bootstrap}
    with ProgressReader(config, topic, "A") as full:
        full.settle()
        snapshot = full.snapshot(topic_id(b.bootstrap, topic))
        truth = full.entries()
    assert snapshot is not None
    # Forged: the seed read two partitions further than they now go, and found a unit there.
    ghost = SourceOffsetKey(cluster="A", topic="ghost", partition=0)
    behind = ghost.offsets_partition(PARTITIONS)
    other = (behind + 1) % PARTITIONS
    positions = list(snapshot.positions)
    positions[behind] += 5
    positions[other] += 3
    forged = dataclasses.replace(
        snapshot,
        positions=tuple(positions),
        entries=(*snapshot.entries, ("ghost", 0, 999, "", 0, "")),
    )
    with (
        caplog.at_level(logging.WARNING, logger="mirrorflow.replicate.progress"),
        ProgressReader(
            config, topic, "A", start=forged, start_id=lambda: topic_id(b.bootstrap, topic)
        ) as task,
    ):
        task.settle()
        assert task.get("ghost", 0) is None
        assert task.entries() == truth
        read_again = sum(
            1
            for unit in units
            if SourceOffsetKey(cluster="A", topic=unit[0], partition=unit[1]).offsets_partition(PARTITIONS)
            in (behind, other)
        )
        assert task.records_read == read_again
    (said,) = [r.getMessage() for r in caplog.records if "end below where they were read" in r.getMessage()]
    assert f"partition(s) {min(behind, other)}, {max(behind, other)} end below" in said
