"""Replication progress in MM2's own place: Connect source offsets in `mm2-offsets.<A>.internal`.

Each source partition's progress is the last upstream offset that is durably on the target,
stored exactly as MirrorSourceConnector's Connect offsets (see mirrorflow.mm2.connect_offsets),
so MM2 can continue a flow mirrorflow copied and the other way round.

Reading must not return a stale value: in exactly-once mode progress is written inside the same
transactions as the data, and a read_committed reader stops at the last stable offset, which
another partition's open transaction can hold below our latest committed record. So a read first
notes the high watermark and then waits until the committed view has reached it; every record
below it is then decided, and the latest committed value per key is the true one.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from mirrorflow.kafka import POLL_S, reader, watermarks
from mirrorflow.mm2.connect_offsets import (
    MIRROR_SOURCE_CONNECTOR,
    ConnectOffsetFormatError,
    SourceOffsetKey,
    decode_offset_entry,
    encode_offset_value,
)

SETTLE_TIMEOUT_S = 120.0


class ProgressReadError(RuntimeError):
    pass


@dataclass(frozen=True, slots=True)
class Stored:
    """One source partition's stored progress: the last replicated upstream offset, and the
    topic incarnations it was copied between (see `incarnation`; "" when the writer named
    none: MM2, or an older mirrorflow)."""

    offset: int
    incarnation: str = ""

    @property
    def floor(self) -> int:
        return split_incarnation(self.incarnation)[2]


def incarnation(source_id: str, remote_id: str, floor: int = 0) -> str:
    """`<source topic id>,<remote topic id>[,<floor>]`: the topic IDs (librdkafka prints them in
    standard base64, which has "/" and "+" but never ",") and, when above 0, the remote
    offset where this source incarnation's records begin (records below it came from an
    earlier incarnation of the source topic, with the same offsets, and never translate)."""
    if not source_id and not remote_id:
        return ""
    return f"{source_id},{remote_id}" + (f",{floor}" if floor > 0 else "")


def split_incarnation(text: str) -> tuple[str, str, int]:
    """(source topic id, remote topic id, floor) of an incarnation; ("", "", 0) when unknown."""
    fields = text.split(",")
    source_id = fields[0] if fields else ""
    remote_id = fields[1] if len(fields) > 1 else ""
    try:
        floor = int(fields[2]) if len(fields) > 2 else 0
    except ValueError:
        floor = 0
    return source_id, remote_id, max(0, floor)


def progress_record(
    source_alias: str, topic: str, partition: int, offset: int, num_partitions: int, incarnation: str = ""
):
    """(key, value, partition) of the progress record for one source partition."""
    key = SourceOffsetKey(cluster=source_alias, topic=topic, partition=partition)
    return key.key_bytes(), encode_offset_value(offset, incarnation), key.offsets_partition(num_partitions)


def read_progress(
    consumer_config: Mapping[str, Any],
    progress_topic: str,
    source_alias: str,
    *,
    only: Iterable[tuple[str, int]] | None = None,
    timeout_s: float = SETTLE_TIMEOUT_S,
) -> dict[tuple[str, int], int]:
    """Last replicated upstream offset per (topic, partition) of `source_alias`.

    `only` limits the read to the offsets-topic partitions that can hold those keys; with it,
    a copy task reads one small partition instead of the whole topic.
    """
    entries = read_progress_entries(
        consumer_config, progress_topic, source_alias, only=only, timeout_s=timeout_s
    )
    return {where: entry.offset for where, entry in entries.items()}


def read_progress_entries(
    consumer_config: Mapping[str, Any],
    progress_topic: str,
    source_alias: str,
    *,
    only: Iterable[tuple[str, int]] | None = None,
    timeout_s: float = SETTLE_TIMEOUT_S,
) -> dict[tuple[str, int], Stored]:
    """read_progress with each offset's incarnation."""
    consumer = Consumer(
        {
            **consumer_config,
            "group.id": f"mirrorflow-progress-{source_alias}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": "read_committed",
        }
    )
    try:
        metadata = consumer.list_topics(progress_topic, timeout=30).topics.get(progress_topic)
        if metadata is None or metadata.error is not None:
            if metadata is not None and metadata.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                return {}
            raise ProgressReadError(
                f"cannot describe progress topic {progress_topic}: {metadata and metadata.error}"
            )
        count = len(metadata.partitions)
        if only is None:
            partitions = sorted(metadata.partitions)
        else:
            partitions = sorted(
                {
                    SourceOffsetKey(cluster=source_alias, topic=t, partition=p).offsets_partition(count)
                    for t, p in only
                }
            )
        # The high watermark as a read_uncommitted reader sees it: a read_committed consumer's
        # watermark query answers with the last stable offset, which is exactly what an open
        # transaction holds back, and a read up to it would not wait at all.
        uncommitted = reader(consumer_config, isolation="read_uncommitted")
        try:
            highs = {p: watermarks(uncommitted, progress_topic, p, timeout_s=30) for p in partitions}
        finally:
            uncommitted.close()
        return _read_settled(consumer, progress_topic, highs, source_alias, timeout_s)
    finally:
        consumer.close()


def _read_settled(
    consumer: Consumer,
    topic: str,
    watermarks_now: dict[int, tuple[int, int]],
    source_alias: str,
    timeout_s: float,
) -> dict[tuple[str, int], Stored]:
    """Read until the committed view has passed each partition's high watermark of the moment
    the read began: every transaction open then (a live writer's, or a dead one's that its
    fencing or transaction.timeout.ms aborts) is decided, so no newer committed progress hides
    behind it."""
    targets: dict[int, int] = {}
    starts = []
    for p, (low, high) in watermarks_now.items():
        if high > low:
            targets[p] = high
            starts.append(TopicPartition(topic, p, low))
    if not starts:
        return {}
    consumer.assign(starts)
    found: dict[tuple[str, int], Stored] = {}
    deadline = time.monotonic() + timeout_s
    while targets:
        if time.monotonic() > deadline:
            raise ProgressReadError(
                f"progress topic {topic} partitions {sorted(targets)} stayed behind an open transaction for "
                f"{timeout_s:.0f}s; a writer may be stuck (it is aborted after its transaction.timeout.ms)"
            )
        for message in consumer.consume(1000, timeout=POLL_S):
            error = message.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    if message.offset() >= targets.get(message.partition(), 0):
                        targets.pop(message.partition(), None)
                    continue
                raise KafkaException(error)
            _apply(found, message.key(), message.value(), source_alias)
            if message.offset() + 1 >= targets.get(message.partition(), 0):
                targets.pop(message.partition(), None)
    return found


def _apply(
    found: dict[tuple[str, int], Stored], key: bytes | None, value: bytes | None, source_alias: str
) -> None:
    try:
        parsed = SourceOffsetKey.decode(key)
    except ConnectOffsetFormatError:
        return  # checkpoint/heartbeat connectors and other connectors share this topic
    if parsed.cluster != source_alias or parsed.connector != MIRROR_SOURCE_CONNECTOR:
        return
    where = (parsed.topic, parsed.partition)
    try:
        offset, incarnation = decode_offset_entry(value)
    except ConnectOffsetFormatError:
        return
    if offset is None:
        found.pop(where, None)
    else:
        found[where] = Stored(offset, incarnation)
