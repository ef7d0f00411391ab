"""Consumer groups through the Admin API: list, read committed offsets, describe, commit.

librdkafka's ListConsumerGroupOffsets and AlterConsumerGroupOffsets take one group per call,
so calls are issued in windows of concurrent requests instead of one after another: a pass
over 1,000 groups costs a few round trips of waiting, not 1,000.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, TypeVar

from confluent_kafka import (
    ConsumerGroupState,
    ConsumerGroupTopicPartitions,
    KafkaError,
    KafkaException,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient

from mirrorflow.kafka import TIMEOUT_S, KafkaCallError

WINDOW = 500

T = TypeVar("T")
R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class Committed:
    offset: int
    metadata: str


GroupOffsets = dict[tuple[str, int], Committed]

# Kafka refuses to change the offsets of a group with members. Only these states have none:
# every other one, including states this client does not know (the KIP-848 consumer protocol's
# ASSIGNING and RECONCILING read as UNKNOWN), counts as a group in use.
IDLE_STATES = {ConsumerGroupState.EMPTY.name, ConsumerGroupState.DEAD.name}


@dataclass(frozen=True, slots=True)
class GroupState:
    group: str
    state: str
    members: int

    @property
    def active(self) -> bool:
        return self.members > 0 or self.state not in IDLE_STATES


def _windowed(
    items: Iterable[T], submit: Callable[[T], Future], collect: Callable[[T, Future], R]
) -> dict[T, R]:
    out: dict[T, R] = {}
    batch: list[tuple[T, Future]] = []
    for item in items:
        batch.append((item, submit(item)))
        if len(batch) >= WINDOW:
            out.update((i, collect(i, f)) for i, f in batch)
            batch = []
    out.update((i, collect(i, f)) for i, f in batch)
    return out


def list_groups(admin: AdminClient) -> list[str]:
    """Every group the cluster knows (one ListConsumerGroups call)."""
    try:
        result = admin.list_consumer_groups(request_timeout=TIMEOUT_S).result(TIMEOUT_S)
    except KafkaException as exc:
        raise KafkaCallError(f"ListConsumerGroups failed: {exc}") from exc
    if result.errors:
        raise KafkaCallError(f"ListConsumerGroups failed on some brokers: {result.errors[0]}")
    return sorted(listing.group_id for listing in result.valid)


def committed_offsets(admin: AdminClient, groups: Iterable[str]) -> dict[str, GroupOffsets]:
    """Committed offsets (and their metadata) of each group; partitions without one are left out."""

    def submit(group: str) -> Future:
        request = [ConsumerGroupTopicPartitions(group)]
        return admin.list_consumer_group_offsets(request, request_timeout=TIMEOUT_S)[group]

    def collect(group: str, future: Future) -> GroupOffsets:
        try:
            result = future.result(TIMEOUT_S)
        except KafkaException as exc:
            raise KafkaCallError(f"ListConsumerGroupOffsets for group {group!r} failed: {exc}") from exc
        return {
            (tp.topic, tp.partition): Committed(tp.offset, tp.metadata or "")
            for tp in result.topic_partitions
            if tp.error is None and tp.offset >= 0
        }

    return _windowed(groups, submit, collect)


def describe_groups(admin: AdminClient, groups: Iterable[str]) -> dict[str, GroupState]:
    """State and member count per group; a group the cluster does not know is DEAD with 0 members."""
    wanted = list(dict.fromkeys(groups))
    out: dict[str, GroupState] = {}
    for i in range(0, len(wanted), WINDOW):
        chunk = wanted[i : i + WINDOW]
        for group, future in admin.describe_consumer_groups(chunk, request_timeout=TIMEOUT_S).items():
            try:
                description = future.result(TIMEOUT_S)
            except KafkaException as exc:
                error = exc.args[0] if exc.args else None
                if isinstance(error, KafkaError) and error.code() == KafkaError.GROUP_ID_NOT_FOUND:
                    out[group] = GroupState(group, ConsumerGroupState.DEAD.name, 0)
                    continue
                raise KafkaCallError(f"DescribeConsumerGroups for group {group!r} failed: {exc}") from exc
            out[group] = GroupState(group, description.state.name, len(description.members))
    return out


@dataclass(frozen=True, slots=True)
class CommitOutcome:
    group: str
    committed: int
    error: str | None = None
    active: bool = False


def commit_offsets(
    admin: AdminClient, offsets: Mapping[str, Mapping[tuple[str, int], Committed]]
) -> dict[str, CommitOutcome]:
    """AlterConsumerGroupOffsets per group; a group that turned active meanwhile is reported, not raised."""

    def submit(group: str) -> Future:
        partitions = [
            _commit_partition(topic, partition, c) for (topic, partition), c in sorted(offsets[group].items())
        ]
        request = [ConsumerGroupTopicPartitions(group, partitions)]
        return admin.alter_consumer_group_offsets(request, request_timeout=TIMEOUT_S)[group]

    def collect(group: str, future: Future) -> CommitOutcome:
        try:
            result = future.result(TIMEOUT_S)
        except KafkaException as exc:
            return _failed(group, exc.args[0] if exc.args else exc)
        errors = [tp.error for tp in result.topic_partitions if tp.error is not None]
        if errors:
            return _failed(group, errors[0])
        return CommitOutcome(group, len(result.topic_partitions))

    return _windowed((g for g in offsets if offsets[g]), submit, collect)


def _commit_partition(topic: str, partition: int, committed: Committed) -> TopicPartition:
    """The partition to commit, with its metadata as Kafka must receive it.

    confluent-kafka (2.x) sends a metadata string with its C terminator, so "" reaches Kafka as
    one NUL byte, which Java clients and MirrorMaker 2 (copying it into its checkpoints) then
    see. A partition given no metadata at all is committed with Kafka's empty string.
    """
    if not committed.metadata:
        return TopicPartition(topic, partition, committed.offset)
    return TopicPartition(topic, partition, committed.offset, metadata=committed.metadata)


def _failed(group: str, error: Any) -> CommitOutcome:
    active = isinstance(error, KafkaError) and error.code() in (
        KafkaError.UNKNOWN_MEMBER_ID,
        KafkaError.REBALANCE_IN_PROGRESS,
        KafkaError.ILLEGAL_GENERATION,
    )
    text = f"{error.name()}: {error.str()}" if isinstance(error, KafkaError) else str(error)
    if active:
        text = f"the group has active members on the target ({text}); stop them first"
    return CommitOutcome(group, 0, text, active)
