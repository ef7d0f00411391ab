"""Committed offsets and group metadata across a broker restart with a data dir."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import (
    Consumer,
    ConsumerGroupState,
    ConsumerGroupTopicPartitions,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic

pytestmark = pytest.mark.devbroker_only

GROUP_CONFIG = {"heartbeat.interval.ms": 100, "enable.auto.commit": False, "auto.offset.reset": "earliest"}


def produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for value in values:
        producer.produce(topic, value=value, partition=0)
    assert producer.flush(15) == 0


def consume(consumer: Consumer, count: int, timeout: float = 30.0) -> list[int]:
    offsets: list[int] = []
    deadline = time.monotonic() + timeout
    while len(offsets) < count and time.monotonic() < deadline:
        message = consumer.poll(0.1)
        if message is not None and message.error() is None:
            offsets.append(message.offset())
    assert len(offsets) == count, f"consumed {offsets} of {count}"
    return offsets


def committed(admin: AdminClient, group: str, topic: str) -> tuple[int, str | None]:
    request = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, 0)])
    (tp,) = admin.list_consumer_group_offsets([request])[group].result(15).topic_partitions
    return tp.offset, tp.metadata


def test_offsets_and_groups_survive_a_restart_and_live_members_rejoin(devbroker_factory, unique) -> None:
    broker = devbroker_factory(data_dir=True)
    bootstrap = broker.bootstrap
    topic, finished, live, simple = unique("restart"), unique("finished"), unique("live"), unique("simple")
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(15)
    produce(bootstrap, topic, [f"m{i}".encode() for i in range(10)])

    first = Consumer({"bootstrap.servers": bootstrap, "group.id": finished, **GROUP_CONFIG})
    first.subscribe([topic])
    assert consume(first, 4) == [0, 1, 2, 3]
    first.commit(offsets=[TopicPartition(topic, 0, 4, metadata="before-restart")], asynchronous=False)
    first.close()
    admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(simple, [TopicPartition(topic, 0, 2)])])[
        simple
    ].result(15)
    member = Consumer({"bootstrap.servers": bootstrap, "group.id": live, **GROUP_CONFIG})
    try:
        member.subscribe([topic])
        assert consume(member, 10) == list(range(10))
        member.commit(asynchronous=False)

        broker.kill()  # a crash: only what was journaled before each answer survives
        broker.start()

        admin = AdminClient({"bootstrap.servers": bootstrap})
        assert committed(admin, finished, topic) == (4, "before-restart")
        assert committed(admin, simple, topic)[0] == 2
        assert committed(admin, live, topic)[0] == 10
        empty = {
            g.group_id for g in admin.list_consumer_groups(states={ConsumerGroupState.EMPTY}).result(15).valid
        }
        assert {finished, simple} <= empty
        # The live member is not remembered: it rejoins and carries on from its commit.
        produce(bootstrap, topic, [b"after-1", b"after-2"])
        assert consume(member, 2) == [10, 11]
        described = admin.describe_consumer_groups([live])[live].result(15)
        assert described.state == ConsumerGroupState.STABLE and len(described.members) == 1
    finally:
        member.close()
    resumed = Consumer({"bootstrap.servers": bootstrap, "group.id": finished, **GROUP_CONFIG})
    try:
        resumed.subscribe([topic])
        assert consume(resumed, 8)[0] == 4
    finally:
        resumed.close()
