"""Compaction on demand, with Kafka's own log cleaner.

Kafka compacts only closed segments, closes the active one at an append once it is older than
`segment.ms`, and looks for dirty logs every `log.cleaner.backoff.ms` (15 s by default; test and
demo clusters use 1 s). So `compact` sets quick-compaction configs on the topic, waits past
`segment.ms`, appends one record per partition (the roll record: it becomes the first record
of the new active segment and stays in the topic), waits until the cleaner's checkpoint in the
log dir says everything before it was cleaned (duplicates of a key and aborted transactional
records gone, offsets with gaps left behind), and then puts the topic's configs back, so it
is compacted once, now, and not again behind the caller's back (nor on a remote copy that
synced those configs).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path

from localkafka.node import LocalKafka, LocalKafkaError

QUICK_COMPACTION = {"segment.ms": "100", "min.cleanable.dirty.ratio": "0.01", "min.compaction.lag.ms": "0"}
CHECKPOINT_FILE = "cleaner-offset-checkpoint"


def cleaned_offsets(kafka: LocalKafka) -> dict[tuple[str, int], int]:
    """Per partition, the offset up to which the log cleaner has cleaned (the highest any node has)."""
    cleaned: dict[tuple[str, int], int] = {}
    for node in kafka.nodes:
        path = Path(node.directory) / "data" / CHECKPOINT_FILE
        if not path.exists():
            continue
        lines = path.read_text().splitlines()
        for line in lines[2:]:  # version, count, then "topic partition offset"
            topic, partition, offset = line.rsplit(" ", 2)
            key = (topic, int(partition))
            cleaned[key] = max(cleaned.get(key, -1), int(offset))
    return cleaned


def compact(
    kafka: LocalKafka,
    topic: str,
    roll: Mapping[int, tuple[bytes | None, bytes | None]],
    *,
    timeout: float = 30.0,
) -> dict[int, int]:
    """Compact the partitions named in `roll` ({partition: (key, value) of its roll record})
    now; returns each partition's roll-record offset (everything below it is compacted)."""
    from confluent_kafka.admin import (
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ConfigSource,
    )

    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
    described = ConfigResource("topic", topic)
    current = admin.describe_configs([described])[described].result(timeout)
    # What to put back afterwards: the topic's own setting, or none (the broker default).
    restore = [
        ConfigEntry(key, current[key].value, incremental_operation=AlterConfigOpType.SET)
        if key in current and _source(current[key].source) == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
        else ConfigEntry(key, None, incremental_operation=AlterConfigOpType.DELETE)
        for key in QUICK_COMPACTION
    ]

    def alter(entries: list[ConfigEntry]) -> None:
        resource = ConfigResource("topic", topic, incremental_configs=entries)
        admin.incremental_alter_configs([resource])[resource].result(timeout)

    alter(
        [
            ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET)
            for key, value in {"cleanup.policy": "compact", **QUICK_COMPACTION}.items()
        ]
    )
    try:
        return _roll_and_wait(kafka, topic, roll, timeout)
    finally:
        alter(restore)


def _source(source: object) -> int:
    return int(getattr(source, "value", source))  # librdkafka gives an int or the enum


def _roll_and_wait(
    kafka: LocalKafka, topic: str, roll: Mapping[int, tuple[bytes | None, bytes | None]], timeout: float
) -> dict[int, int]:
    from confluent_kafka import Producer

    time.sleep(float(QUICK_COMPACTION["segment.ms"]) / 1000 * 1.5)
    offsets: dict[int, int] = {}
    producer = Producer({"bootstrap.servers": kafka.bootstrap, "acks": "all"})

    def delivered(err, msg) -> None:
        if err is None:
            offsets[msg.partition()] = msg.offset()

    for partition, (key, value) in roll.items():
        producer.produce(topic, key=key, value=value, partition=partition, on_delivery=delivered)
    if producer.flush(timeout) or len(offsets) != len(roll):
        raise LocalKafkaError(f"the roll records for {topic} were not acknowledged")
    deadline = time.monotonic() + timeout
    while True:
        cleaned = cleaned_offsets(kafka)
        if all(cleaned.get((topic, p), -1) >= offset for p, offset in offsets.items()):
            return offsets
        if time.monotonic() > deadline:
            raise LocalKafkaError(
                f"the log cleaner did not compact {topic} within {timeout:.0f}s (cleaned up to "
                f"{ {p: cleaned.get((topic, p)) for p in offsets} }, rolled at {offsets}); is "
                "log.cleaner.backoff.ms small on this cluster?"
            )
        time.sleep(0.05)
