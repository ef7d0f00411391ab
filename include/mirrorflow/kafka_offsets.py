"""Offset lookups that survive moving leaders: watermarks of one partition, and the earliest,
latest or last stable offsets of many in one batched call, through a consumer or the Admin API.

Each asks again, in short attempts until its timeout, what Kafka means as "ask again" (leadership
moving, a new leader still catching up its high watermark, a leader that stopped answering), and
names the partitions that never answered. Split from kafka.py, which keeps the clients, the
cluster watch and bounded reads.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterable

from confluent_kafka import (
    OFFSET_INVALID,
    Consumer,
    IsolationLevel,
    KafkaError,
    KafkaException,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, OffsetSpec

from mirrorflow import awake
from mirrorflow.kafka import ASK_AGAIN, ATTEMPT_S, LEADER_GONE, POLL_S, TIMEOUT_S, UNKNOWN, KafkaCallError


def watermarks(
    consumer: Consumer, topic: str, partition: int, *, timeout_s: float = TIMEOUT_S
) -> tuple[int, int]:
    """(low, high) watermarks asked of the partition's leader, retrying what Kafka means as "ask
    again": NOT_LEADER_OR_FOLLOWER or LEADER_NOT_AVAILABLE right after a topic is created or
    while leadership moves, OFFSET_NOT_AVAILABLE from a new leader still catching up its high
    watermark, and a leader that stopped answering (asked again in short attempts, so the client
    looks up the new leader in between)."""
    deadline = awake.monotonic() + timeout_s
    while True:
        attempt = max(0.5, min(ATTEMPT_S, deadline - awake.monotonic()))
        try:
            return consumer.get_watermark_offsets(
                TopicPartition(topic, partition), timeout=attempt, cached=False
            )
        except KafkaException as exc:
            error = exc.args[0] if exc.args else None
            again = isinstance(error, KafkaError) and (
                error.retriable() or error.code() in LEADER_GONE or error.code() in ASK_AGAIN
            )
            if not again or awake.monotonic() > deadline:
                raise
            # librdkafka keeps asking the leader it knows; a metadata request shows it the new one.
            with contextlib.suppress(KafkaException):
                consumer.list_topics(topic, timeout=attempt)
            time.sleep(POLL_S)


def consumer_offsets(
    consumer: Consumer, partitions: Iterable[tuple[str, int]], which: int, *, timeout_s: float = 30.0
) -> dict[tuple[str, int], int]:
    """Latest (OFFSET_END) or earliest (OFFSET_BEGINNING) offsets of many partitions in one
    batched ListOffsets call (a request per leader), through a consumer: its isolation level
    decides what "latest" is (read_committed: the last stable offset; read_uncommitted: the high
    watermark). Partitions whose leader answers "ask again" or not at all are asked again,
    together, until `timeout_s`; then KafkaCallError names them."""
    deadline = awake.monotonic() + timeout_s
    out: dict[tuple[str, int], int] = {}
    asking = sorted(set(partitions))
    while asking:
        attempt = max(0.5, min(ATTEMPT_S, deadline - awake.monotonic()))
        again: list[tuple[str, int]] = []
        try:
            answers = consumer.offsets_for_times(
                [TopicPartition(t, p, which) for t, p in asking], timeout=attempt
            )
        except KafkaException as exc:
            error = exc.args[0] if exc.args else None
            if not (isinstance(error, KafkaError) and _ask_again(error)):
                raise
            again = asking
        else:
            for answer in answers:
                error = answer.error
                if error is not None and not _ask_again(error):
                    raise KafkaException(error)
                if error is not None or answer.offset < 0:
                    again.append((answer.topic, answer.partition))
                else:
                    out[(answer.topic, answer.partition)] = answer.offset
        if again and awake.monotonic() > deadline:
            names = ", ".join(f"{t}-{p}" for t, p in again[:10])
            raise KafkaCallError(f"the leaders of {names} gave no offsets for {timeout_s:.0f}s")
        if again:
            # librdkafka asks the leader it knows; a metadata request shows it a new one.
            for topic in sorted({t for t, _ in again}):
                with contextlib.suppress(KafkaException):
                    consumer.list_topics(topic, timeout=attempt)
            time.sleep(POLL_S)
        asking = again
    return out


def _ask_again(error: KafkaError) -> bool:
    return error.retriable() or error.code() in LEADER_GONE or error.code() in ASK_AGAIN


def list_offsets(
    admin: AdminClient,
    partitions: Iterable[tuple[str, int]],
    spec: OffsetSpec,
    *,
    read_committed: bool = True,
    timeout_s: float = TIMEOUT_S,
    missing: set[tuple[str, int]] | None = None,
) -> dict[tuple[str, int], int]:
    """One ListOffsets call for many partitions (earliest, latest = LSO when read_committed, or a
    timestamp). Partitions whose leader answers "ask again" (moving leadership, a new leader's high
    watermark still catching up) are asked again, together, until `timeout_s` has passed. With
    `missing`, partitions the cluster does not have (a topic deleted meanwhile) are added to it
    and left out of the answer instead of failing the call."""
    request = {TopicPartition(t, p): spec for t, p in partitions}
    if not request:
        return {}
    isolation = IsolationLevel.READ_COMMITTED if read_committed else IsolationLevel.READ_UNCOMMITTED
    deadline = awake.monotonic() + timeout_s
    out: dict[tuple[str, int], int] = {}
    while True:
        attempt = max(0.5, min(ATTEMPT_S, deadline - awake.monotonic()))
        futures = admin.list_offsets(request, isolation_level=isolation, request_timeout=attempt)
        again: dict[TopicPartition, OffsetSpec] = {}
        for tp, future in futures.items():
            try:
                offset = future.result().offset
            except KafkaException as exc:
                error = exc.args[0] if exc.args else None
                retry = isinstance(error, KafkaError) and error.code() in ASK_AGAIN + LEADER_GONE
                if missing is not None and isinstance(error, KafkaError) and error.code() in UNKNOWN:
                    missing.add((tp.topic, tp.partition))
                    continue
                if not retry or awake.monotonic() > deadline:
                    raise KafkaCallError(f"ListOffsets for {tp.topic}-{tp.partition} failed: {exc}") from exc
                again[tp] = request[tp]
                continue
            # librdkafka answers a request its leader never answered (timed out, leader gone) with
            # offset -1001 and no error. Taken as an offset it would read as an empty partition, or
            # as progress past the end; it is asked again. (Kafka's own "no such offset", for a
            # timestamp past the last record, is -1.)
            if offset == OFFSET_INVALID:
                again[tp] = request[tp]
            else:
                out[(tp.topic, tp.partition)] = offset
        if not again:
            return out
        if awake.monotonic() > deadline:
            names = ", ".join(sorted(f"{tp.topic}-{tp.partition}" for tp in again)[:10])
            more = f" and {len(again) - 10} more" if len(again) > 10 else ""
            raise KafkaCallError(
                f"ListOffsets got no answer within {timeout_s:.0f}s for {names}{more}: their leaders "
                "are down or unreachable; check the brokers hosting them, then run again"
            )
        request = again
        time.sleep(POLL_S)
