"""The suite's own cluster hygiene: a worker cluster emptied between tests (kafka_clusters) keeps no
transaction open. One a killed run left open was ended by its coordinator into the next test's
topic of the same name: an abort marker at its start shifted every offset by one, and a failover
test expecting equal offsets on both sides failed."""

from __future__ import annotations

import threading
import time

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from ..conftest import OPEN_STATES, empty_cluster
from .kafkatools import create_topics, read_all, read_topic
from .wire import list_transactions


def _create(admin: AdminClient, topic: str) -> None:
    deadline = time.monotonic() + 30
    while True:
        try:
            admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
            return
        except Exception:  # noqa: BLE001 - still being deleted
            assert time.monotonic() < deadline, f"{topic} could not be created again"
            time.sleep(0.2)


def test_an_emptied_cluster_keeps_no_transaction_to_end_into_a_later_topic(local_kafka) -> None:
    kafka = local_kafka()
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
    _create(admin, "T")
    left = Producer({"bootstrap.servers": kafka.bootstrap, "transactional.id": "left-open"})
    left.init_transactions(30)
    left.begin_transaction()
    left.produce("T", b"never committed", partition=0)
    left.flush(10)
    assert list_transactions(kafka.bootstrap, OPEN_STATES) == {"left-open": "Ongoing"}

    empty_cluster(kafka.bootstrap)
    _create(admin, "T")
    # The same transactional id again, as the next test's copy of the same flow would use it.
    again = Producer({"bootstrap.servers": kafka.bootstrap, "transactional.id": "left-open"})
    again.init_transactions(30)

    reader = Consumer({"bootstrap.servers": kafka.bootstrap, "group.id": "check"})
    try:
        assert reader.get_watermark_offsets(TopicPartition("T", 0), timeout=10) == (0, 0)
    finally:
        reader.close()
        left.purge()
        again.flush(0)
        del left, again


def test_a_read_right_after_a_commit_sees_the_records_whose_markers_are_still_on_their_way(clusters) -> None:
    """A commit returns once the coordinator logged it; the markers follow. CI once compared a
    copy's target, read at once, with its source and found the last transaction missing: the
    reader met the end of the partition at the last stable offset. The suite's readers wait for the
    markers (kafkatools.await_markers). Forged here with a transaction committed by another
    thread while the read is already waiting."""
    src, _ = clusters
    create_topics(src.bootstrap, ("T", 1))
    writer = Producer({"bootstrap.servers": src.bootstrap, "transactional.id": "slow-markers"})
    writer.init_transactions(30)
    writer.begin_transaction()
    writer.produce("T", b"committed while the reader waits", partition=0)
    assert writer.flush(10) == 0
    committer = threading.Timer(1.0, writer.commit_transaction, args=(30,))
    committer.start()
    try:
        assert [r.value for r in read_all(src.bootstrap, "T")] == [b"committed while the reader waits"]
        assert [r.value for r in read_topic(src.bootstrap, "T", 1)[0]] == [
            b"committed while the reader waits"
        ]
    finally:
        committer.join()
