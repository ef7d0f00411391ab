"""Small, shared Kafka helpers on confluent-kafka: bounded partition reads and offset lookups.

Every mirrorflow component talks to Kafka through confluent-kafka directly; this module only
holds the few patterns several of them need, so each is written (and tested) once.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from confluent_kafka import (
    Consumer,
    IsolationLevel,
    KafkaError,
    KafkaException,
    Message,
    TopicCollection,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, OffsetSpec

TIMEOUT_S = 60.0
POLL_S = 0.05
ATTEMPT_S = 5.0
# librdkafka's own codes for "the broker asked is gone": worth asking again, after a metadata refresh.
LEADER_GONE = (
    KafkaError._TIMED_OUT,
    KafkaError._TRANSPORT,
    KafkaError._DESTROY_BROKER,
    KafkaError._NODE_UPDATE,
)


class KafkaCallError(RuntimeError):
    """A Kafka call failed; the message names the cluster object and the broker's error."""


def admin_client(config: Mapping[str, Any]) -> AdminClient:
    return AdminClient(dict(config))


def await_topics(admin: AdminClient, partitions: Mapping[str, int], *, timeout_s: float = TIMEOUT_S) -> None:
    """Return once every topic is known with at least its partition count, each with a leader.

    Kafka acknowledges CreateTopics and CreatePartitions when its controller has committed
    them; brokers learn of them a moment later, and until then a producer or a metadata request
    gets UNKNOWN_TOPIC_OR_PARTITION. Whoever creates topics for others to use waits here, with
    one DescribeTopics request per attempt for all of them."""
    waiting = dict(partitions)
    deadline = time.monotonic() + timeout_s
    while waiting:
        futures = admin.describe_topics(TopicCollection(sorted(waiting)), request_timeout=timeout_s)
        for name, future in futures.items():
            try:
                description = future.result(timeout_s)
            except KafkaException as exc:
                if exc.args[0].code() != KafkaError.UNKNOWN_TOPIC_OR_PART:
                    raise KafkaCallError(f"describing topic {name} failed: {exc}") from exc
                continue
            known = description.partitions
            if len(known) >= waiting[name] and all(p.leader is not None and p.leader.id >= 0 for p in known):
                del waiting[name]
        if not waiting:
            return
        if time.monotonic() > deadline:
            raise KafkaCallError(
                f"topics created {timeout_s:.0f}s ago are still not served by the brokers: {', '.join(sorted(waiting))}"
            )
        time.sleep(POLL_S)


def watermarks(
    consumer: Consumer, topic: str, partition: int, *, timeout_s: float = TIMEOUT_S
) -> tuple[int, int]:
    """(low, high) watermarks asked of the partition's leader, retrying what Kafka means as "ask
    again": NOT_LEADER_OR_FOLLOWER or LEADER_NOT_AVAILABLE right after a topic is created or
    while leadership moves, and a leader that stopped answering (asked again in short attempts,
    so the client looks up the new leader in between)."""
    deadline = time.monotonic() + timeout_s
    while True:
        attempt = max(0.5, min(ATTEMPT_S, deadline - time.monotonic()))
        try:
            return consumer.get_watermark_offsets(
                TopicPartition(topic, partition), timeout=attempt, cached=False
            )
        except KafkaException as exc:
            error = exc.args[0] if exc.args else None
            again = isinstance(error, KafkaError) and (error.retriable() or error.code() in LEADER_GONE)
            if not again or time.monotonic() > deadline:
                raise
            # librdkafka keeps asking the leader it knows; a metadata request shows it the new one.
            with contextlib.suppress(KafkaException):
                consumer.list_topics(topic, timeout=attempt)
            time.sleep(POLL_S)


def reader(config: Mapping[str, Any], *, isolation: str = "read_committed") -> Consumer:
    """A consumer for assigned reads: no group membership, no commits."""
    return Consumer(
        {
            **config,
            "group.id": config.get("group.id", "mirrorflow-reader"),
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "enable.partition.eof": True,
            "isolation.level": isolation,
            "auto.offset.reset": "earliest",
        }
    )


def list_offsets(
    admin: AdminClient,
    partitions: Iterable[tuple[str, int]],
    spec: OffsetSpec,
    *,
    read_committed: bool = True,
) -> dict[tuple[str, int], int]:
    """One ListOffsets call for many partitions (earliest, latest = LSO when read_committed, or a timestamp)."""
    request = {TopicPartition(t, p): spec for t, p in partitions}
    if not request:
        return {}
    isolation = IsolationLevel.READ_COMMITTED if read_committed else IsolationLevel.READ_UNCOMMITTED
    futures = admin.list_offsets(request, isolation_level=isolation, request_timeout=TIMEOUT_S)
    out: dict[tuple[str, int], int] = {}
    for tp, future in futures.items():
        try:
            out[(tp.topic, tp.partition)] = future.result().offset
        except KafkaException as exc:
            raise KafkaCallError(f"ListOffsets for {tp.topic}-{tp.partition} failed: {exc}") from exc
    return out


def read_partition(
    config: Mapping[str, Any],
    topic: str,
    partition: int,
    *,
    start: int = 0,
    end: int | None = None,
    isolation: str = "read_committed",
    idle_timeout_s: float = 30.0,
) -> Iterator[Message]:
    """Records of one partition from `start` up to `end` (exclusive), or to the end as of now:
    the first end-of-partition event, which a read_committed reader sees at the last stable offset."""
    consumer = reader(config, isolation=isolation)
    try:
        consumer.assign([TopicPartition(topic, partition, start)])
        last_seen = time.monotonic()
        while True:
            # librdkafka's consume() waits its whole timeout unless the batch fills up, so a
            # short timeout in a loop ends a small read quickly.
            batch = consumer.consume(1000, timeout=POLL_S)
            if not batch:
                if time.monotonic() - last_seen > idle_timeout_s:
                    raise KafkaCallError(f"{topic}-{partition} stopped before offset {end}")
                continue
            last_seen = time.monotonic()
            for message in batch:
                error = message.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        if end is None or message.offset() >= end:
                            return
                        continue
                    raise KafkaException(error)
                if end is not None and message.offset() >= end:
                    return
                yield message
                if end is not None and message.offset() + 1 >= end:
                    return
    finally:
        consumer.close()
