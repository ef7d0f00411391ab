"""Whether a hanging progress transaction's records had landed, committed, on the target.

A broker that restarts can drop a transaction's markers in some of its partitions and keep them
in others ("Couldn't find leader endpoint ... likely deleted already and hence can be skipped"):
the transaction's records were committed in the remote partition while its progress record
stays open. Ending that open progress by an abort then loses progress that is true, and the next
run copies the same records again. Before a hanging progress record is aborted, its remote
partition is read: when it ends, committed, with the very record of the source offset the
progress names, the copy had committed and the progress is written again after the abort.
"""

from __future__ import annotations

import contextlib
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

from confluent_kafka import KafkaException, Message, TopicPartition

from mirrorflow.kafka import UNKNOWN, KafkaCallError, read_partition, reader
from mirrorflow.policy.provenance import HEADER_PREFIX

# How far back from the last stable offset the last committed record is looked for (aborted
# records and markers lie between), and how long a read may take.
LOOK_BACK = 200
READ_TIMEOUT_S = 15.0

# (source topic, partition, source offset) -> True: the remote partition ends with that record,
# committed; False: it does not; None: it cannot be told (the source record or the remote one
# could not be read).
Landed = Callable[[str, int, int], "bool | None"]


def landed_check(
    source_consumer: Mapping[str, Any],
    target_consumer: Mapping[str, Any],
    remote_topic: Callable[[str], str | None],
) -> Landed:
    """`remote_topic` names a source topic's remote topic; None where the caller does not know
    it (a slot writer knows its plan's topics), which answers "cannot be told". A source partition
    that no longer exists answers False: its progress copies nothing more, so ending it loses
    nothing."""

    def landed(topic: str, partition: int, offset: int) -> bool | None:
        exists = _source_has(source_consumer, topic, partition)
        if not exists:
            return exists  # None: the source did not answer; False: gone
        remote = remote_topic(topic)
        if remote is None:
            return None
        source = _record_at(source_consumer, topic, partition, offset)
        if source is None:
            return None
        last = _last_committed(target_consumer, remote, partition)
        if last is None or last is False:
            return last  # not read in time, or nothing committed there
        return _same(source, last)

    return landed


def _source_has(config: Mapping[str, Any], topic: str, partition: int) -> bool | None:
    """Whether the source has the partition; None when its metadata cannot be read in time."""
    consumer = reader(config)
    try:
        found = consumer.list_topics(topic, timeout=READ_TIMEOUT_S).topics.get(topic)
    except KafkaException:
        return None
    finally:
        consumer.close()
    if found is None or (found.error is not None and found.error.code() in UNKNOWN):
        return False
    if found.error is not None:
        return None
    return partition in found.partitions


def _record_at(config: Mapping[str, Any], topic: str, partition: int, offset: int) -> Message | None:
    """The source record at `offset`; None when it is gone or cannot be read in time."""
    read = read_partition(
        config, topic, partition, start=offset, end=offset + 1, idle_timeout_s=READ_TIMEOUT_S
    )
    try:
        with contextlib.closing(read):
            return next(read, None)
    except (KafkaException, KafkaCallError):
        return None


def _last_committed(config: Mapping[str, Any], topic: str, partition: int) -> Message | bool | None:
    """The last record a read_committed reader of the partition sees; False when it has none
    (nothing committed: no copy landed there); None when it cannot be read in time. Aborted
    records and markers may lie after it (a later chunk of a dead copy, aborted), so it is looked
    for in windows before the last stable offset, each ten times the last."""
    consumer = reader(config)
    try:
        low, stable = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=READ_TIMEOUT_S)
    finally:
        consumer.close()
    end, window = stable, LOOK_BACK
    try:
        while end > low:
            start = max(low, end - window)
            tail = deque(
                read_partition(config, topic, partition, start=start, idle_timeout_s=READ_TIMEOUT_S), 1
            )
            if tail:
                return tail[0]
            end, window = start, window * 10
    except (KafkaException, KafkaCallError):
        return None
    return False


def _same(source: Message, remote: Message) -> bool:
    def headers(message: Message) -> list[tuple[str, bytes | None]]:
        return [(k, v) for k, v in message.headers() or [] if not k.startswith(HEADER_PREFIX)]

    return (
        source.key() == remote.key()
        and source.value() == remote.value()
        and source.timestamp()[1] == remote.timestamp()[1]
        and headers(source) == headers(remote)
    )
