"""The read loop of a progress reader (mirrorflow.replicate.progress.ProgressReader): a
read_committed consumer assigned the offsets-topic partitions to read, from the first offset not
seen yet, until each has reached its target; each record of MirrorSourceConnector for the
source cluster becomes what the reader knows of its source partition (a tombstone removes it),
and every other record of the topic (other connectors, other source clusters) is passed over."""

from __future__ import annotations

import time

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from mirrorflow.kafka import POLL_S
from mirrorflow.mm2.connect_offsets import (
    MIRROR_SOURCE_CONNECTOR,
    ConnectOffsetFormatError,
    SourceOffsetKey,
    decode_offset_entry,
)
from mirrorflow.replicate.progress_records import ProgressBlocked, Stored


def read_until(
    consumer: Consumer,
    topic: str,
    source_alias: str,
    targets: dict[int, int],
    next_offsets: dict[int, int],
    found: dict[tuple[str, int], Stored],
    *,
    timeout_s: float,
    limit_s: float,
) -> int:
    """Read `topic`'s partitions from `next_offsets` until each reaches its offset in `targets`
    (which empties as they do), within `timeout_s`; `next_offsets` and `found` are kept up to
    date. Returns the records read. ProgressBlocked when the time runs out (`limit_s` is the
    settle limit its message names)."""
    read = 0
    # Assigned only while reading, from the first offset not seen yet: an idle reader sends
    # no fetches, and a new assignment fetches at once (a resumed pause waits about 1 s).
    assigned = [TopicPartition(topic, p, next_offsets[p]) for p in targets]
    consumer.incremental_assign(assigned)
    deadline = time.monotonic() + timeout_s
    try:
        while targets:
            if time.monotonic() > deadline:
                stuck = {p: next_offsets[p] for p in targets}
                raise ProgressBlocked(
                    f"progress topic {topic}: a transaction stayed open for {limit_s:.0f}s in "
                    + ", ".join(f"partition {p} from offset {o}" for p, o in sorted(stuck.items()))
                    + ", longer than any live writer of the flow keeps one open (the broker aborts it "
                    "after transaction.timeout.ms): it is hanging, left by a broker that lost its abort "
                    "marker. The flow's next replicate run ends it; or end it with kafka-transactions.sh "
                    f"abort --topic {topic} --partition N --start-offset OFFSET",
                    stuck,
                )
            # poll() returns with the first record; consume() would wait out its timeout
            # unless it filled the whole batch.
            first = consumer.poll(POLL_S)
            batch = [] if first is None else [first, *consumer.consume(1000, timeout=0)]
            for message in batch:
                partition = message.partition()
                error = message.error()
                if error is not None:
                    if error.code() != KafkaError._PARTITION_EOF:
                        raise KafkaException(error)
                    seen = message.offset()
                else:
                    _apply(found, message.key(), message.value(), source_alias)
                    read += 1
                    seen = message.offset() + 1
                if partition not in next_offsets:
                    continue
                if seen > next_offsets[partition]:
                    next_offsets[partition] = seen
                if partition in targets and next_offsets[partition] >= targets[partition]:
                    del targets[partition]
    finally:
        consumer.incremental_unassign(assigned)
    return read


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
        entry = decode_offset_entry(value)
    except ConnectOffsetFormatError:
        return
    if entry.offset is None:
        found.pop(where, None)
    else:
        found[where] = Stored(entry.offset, entry.incarnation, entry.slots, entry.commit)
