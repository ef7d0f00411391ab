"""Reading what MirrorMaker 2 writes, for the interoperability tests (MM2 itself runs as
localkafka.mirrormaker.MirrorMaker)."""

from __future__ import annotations

from typing import Any

from confluent_kafka import Consumer

from mirrorflow.kafka_offsets import watermarks
from mirrorflow.replicate.progress import read_progress


def end_offsets(bootstrap: str, topic: str) -> dict[int, int]:
    """High watermark of every partition of `topic` ({} while the topic does not exist)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "mm2-test-watermarks", "log_level": 3})
    try:
        metadata = consumer.list_topics(topic, timeout=10).topics.get(topic)
        if metadata is None or metadata.error is not None:
            return {}
        # A topic MM2 created a moment ago answers NOT_LEADER for a while: watermarks() retries.
        return {p: watermarks(consumer, topic, p, timeout_s=30)[1] for p in metadata.partitions}
    finally:
        consumer.close()


def source_offsets(bootstrap: str, source_alias: str) -> dict[tuple[str, int], int]:
    """MirrorSourceConnector's stored offsets (last replicated upstream offset per source
    partition) in `mm2-offsets.<source_alias>.internal`, read the way mirrorflow reads its progress."""
    return read_progress(
        {"bootstrap.servers": bootstrap}, f"mm2-offsets.{source_alias}.internal", source_alias, timeout_s=30
    )


def reached(current: dict[Any, int], wanted: dict[Any, int]) -> bool:
    """Every key of `wanted` is in `current` with at least its value."""
    return all(current.get(key, -1) >= value for key, value in wanted.items())
