"""Whether a hanging progress transaction's records had landed, committed, on the target.

A broker that restarts can drop a transaction's markers in some of its partitions and keep them
in others ("Couldn't find leader endpoint ... likely deleted already and hence can be skipped"):
the transaction's records were committed in the remote partition while its progress record
stays open. Ending that open progress by an abort then loses progress that is true, and the next
run copies the same records again. Before a hanging progress record is aborted, its remote
partition is read, and the copy had committed when it ends, committed, with the copy of the
source offset the progress names, or with the copy of an earlier one and nothing after it on the
source that the copy would have written (commit markers of a transactional source, records
compacted away or skipped as loops). The last committed record's provenance says which source
offset it copies; without provenance it is compared with the source record at exactly that
offset (key, value, timestamp, headers), which cannot tell anything when that offset is a
commit marker or the remote topic stamps its own timestamps.
"""

from __future__ import annotations

import contextlib
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

from confluent_kafka import KafkaException, Message, TopicPartition

from mirrorflow.kafka import UNKNOWN, KafkaCallError, read_partition, reader
from mirrorflow.policy.provenance import ProvenanceError, is_loop, read_provenance
from mirrorflow.replicate.copy.recovery.decision import same_record

# How far back from the last stable offset the last committed record is looked for (aborted
# records and markers lie between), and how long a read may take.
LOOK_BACK = 200
READ_TIMEOUT_S = 15.0

# (source topic, partition, source offset) -> True: the remote partition holds, committed,
# everything the copy up to that offset wrote; False: it does not; None: it cannot be told (the
# source record or the remote one could not be read).
Landed = Callable[[str, int, int], "bool | None"]


def landed_check(
    source_consumer: Mapping[str, Any],
    target_consumer: Mapping[str, Any],
    remote_topic: Callable[[str], str | None],
    *,
    source: str = "",
    target: str = "",
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
        last = _last_committed(target_consumer, remote, partition)
        if last is None or last is False:
            return last  # not read in time, or nothing committed there
        try:
            stamp = read_provenance(last.headers())
        except ProvenanceError:
            stamp = None
        if stamp is not None and (stamp.source_topic, stamp.source_partition) == (topic, partition):
            if source and stamp.path[-1:] != (source,):
                return None
            return _nothing_left_between(
                source_consumer, topic, partition, stamp.source_offset, offset, target
            )
        record = _record_at(source_consumer, topic, partition, offset)
        if record is None:
            return None
        return same_record(record, last)

    return landed


def _nothing_left_between(
    config: Mapping[str, Any], topic: str, partition: int, copied: int, offset: int, target: str
) -> bool | None:
    """Whether a remote partition whose last committed record copies source offset `copied`
    holds everything up to `offset`: no source record in between that a copy would write."""
    if copied == offset:
        return True
    if copied > offset:
        # Copies past the open progress were committed since (by a later transaction): writing
        # this older progress again would move progress back, and the abort loses nothing.
        return False
    read = read_partition(
        config, topic, partition, start=copied + 1, end=offset + 1, idle_timeout_s=READ_TIMEOUT_S
    )
    try:
        with contextlib.closing(read):
            for record in read:
                if not (target and is_loop(record.headers(), target)):
                    return False
    except (KafkaException, KafkaCallError):
        return None
    return True


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
