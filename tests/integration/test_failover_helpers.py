"""Helpers of the checkpoint and failover tests: real consumer groups on real Kafka clusters.

A group consumes with a subscribing consumer (group membership, synchronous commits of what it
has read), so the offsets these tests translate are the ones real applications commit.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from mirrorflow.policy.provenance import read_provenance

from .kafkatools import produce


@dataclass(frozen=True)
class Got:
    topic: str
    partition: int
    offset: int
    value: bytes | None
    source_offset: int | None  # provenance: offset on the cluster the record was copied from

    @property
    def payload(self) -> str:
        return (self.value or b"").decode()


def _got(message) -> Got:
    provenance = read_provenance(message.headers())
    return Got(
        message.topic(),
        message.partition(),
        message.offset(),
        message.value(),
        provenance.source_offset if provenance else None,
    )


def group_consumer(bootstrap: str, group: str, **extra: object) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
            "session.timeout.ms": 6000,
            **extra,
        }
    )


def consume(
    bootstrap: str, group: str, topics: Sequence[str], count: int, timeout_s: float = 30.0
) -> list[Got]:
    """Read `count` records as member of `group`, commit exactly what was read, leave the group."""
    consumer = group_consumer(bootstrap, group)
    consumer.subscribe(list(topics))
    got: list[Got] = []
    deadline = time.monotonic() + timeout_s
    try:
        while len(got) < count:
            if time.monotonic() > deadline:
                raise AssertionError(f"{group} read only {len(got)} of {count} records from {topics}")
            message = consumer.poll(0.2)
            if message is None:
                continue
            if message.error():
                if message.error().code() == KafkaError._PARTITION_EOF:
                    continue
                raise KafkaException(message.error())
            got.append(_got(message))
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    return got


def consume_rest(bootstrap: str, group: str, topics: Sequence[str], timeout_s: float = 30.0) -> list[Got]:
    """Read as member of `group` until every partition of `topics` is at its end, then commit."""
    consumer = group_consumer(bootstrap, group)
    consumer.subscribe(list(topics))
    partitions = _partition_count(consumer, topics)
    got: list[Got] = []
    at_end: set[tuple[str, int]] = set()
    deadline = time.monotonic() + timeout_s
    try:
        while len(at_end) < partitions:
            if time.monotonic() > deadline:
                raise AssertionError(f"{group} did not reach the end of {topics} (at end: {sorted(at_end)})")
            message = consumer.poll(0.2)
            if message is None:
                continue
            if message.error():
                if message.error().code() == KafkaError._PARTITION_EOF:
                    at_end.add((message.topic(), message.partition()))
                    continue
                raise KafkaException(message.error())
            at_end.discard((message.topic(), message.partition()))
            got.append(_got(message))
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    return got


def _partition_count(consumer: Consumer, topics: Iterable[str]) -> int:
    metadata = consumer.list_topics(timeout=10).topics
    return sum(len(metadata[t].partitions) for t in topics)


COORDINATOR_MOVING = (
    KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
    KafkaError.COORDINATOR_NOT_AVAILABLE,
    KafkaError.NOT_COORDINATOR,
)


def commit_at(bootstrap: str, group: str, offsets: dict[tuple[str, int], int], metadata: str = "") -> None:
    """Commit chosen offsets for `group`, as an application does after seeking; a coordinator
    still loading its partition of __consumer_offsets (a cluster just started or emptied, on a
    loaded machine) is asked again, as Kafka's clients do."""
    consumer = group_consumer(bootstrap, group)
    deadline = time.monotonic() + 60
    try:
        while True:
            try:
                consumer.commit(
                    offsets=[TopicPartition(t, p, o, metadata=metadata) for (t, p), o in offsets.items()],
                    asynchronous=False,
                )
                return
            except KafkaException as exc:
                error = exc.args[0] if exc.args else None
                again = isinstance(error, KafkaError) and (
                    error.retriable() or error.code() in COORDINATOR_MOVING
                )
                if not again or time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
    finally:
        consumer.close()


def committed(
    bootstrap: str, group: str, partitions: Iterable[tuple[str, int]]
) -> dict[tuple[str, int], int]:
    consumer = group_consumer(bootstrap, group)
    try:
        found = consumer.committed([TopicPartition(t, p) for t, p in partitions], timeout=10)
    finally:
        consumer.close()
    return {(tp.topic, tp.partition): tp.offset for tp in found if tp.offset >= 0}


def produce_numbered(bootstrap: str, topic: str, partitions: int, count: int, start: int = 0) -> list[str]:
    """`count` records with unique payloads `topic:i`, spread round-robin over the partitions."""
    payloads = [f"{topic}:{i}" for i in range(start, start + count)]
    produce(
        bootstrap, topic, [{"value": v.encode(), "partition": i % partitions} for i, v in enumerate(payloads)]
    )
    return payloads


def target_offset_of(bootstrap: str, topic: str, partition: int, payload: str) -> int:
    """Where the copy of the record with `payload` is on the target. Not its source offset: a
    remote topic can start with other offsets, such as the abort marker Kafka writes into a topic
    created again under the name of one an open transaction had written (its coordinator ends
    that transaction into whatever partition has the name now)."""
    consumer = group_consumer(bootstrap, f"locate-{topic}-{partition}")
    consumer.assign([TopicPartition(topic, partition, 0)])
    try:
        while True:
            message = consumer.poll(10)
            assert message is not None, f"no copy of {payload!r} in {topic}-{partition}"
            if message.error():
                assert message.error().code() != KafkaError._PARTITION_EOF, f"no copy of {payload!r}"
                raise KafkaException(message.error())
            if (message.value() or b"").decode() == payload:
                return message.offset()
    finally:
        consumer.close()
