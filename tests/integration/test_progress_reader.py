"""The progress reader a copy worker keeps for its whole share: each settle sees every
committed progress record written before it began, waits for transactions open at that moment,
and reads only what was added since the last settle, never the topic from its start again."""

from __future__ import annotations

import threading
import time

from confluent_kafka import Producer

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
