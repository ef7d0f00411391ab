"""Whole-topic reads of MM2's single-partition internal topics (offset-syncs, checkpoints):
from the log start to the partition's end as of now, and nothing when the topic does not exist."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from confluent_kafka import KafkaError, Message

from mirrorflow.kafka import TIMEOUT_S, KafkaCallError, read_partition, reader


def topic_exists(consumer_config: Mapping[str, Any], topic: str) -> bool:
    consumer = reader(consumer_config)
    try:
        metadata = consumer.list_topics(topic, timeout=TIMEOUT_S).topics.get(topic)
    finally:
        consumer.close()
    if metadata is None:
        return False
    if metadata.error is not None:
        if metadata.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
            return False
        raise KafkaCallError(f"cannot describe {topic}: {metadata.error.str()}")
    return True


def read_from_start(
    consumer_config: Mapping[str, Any],
    topic: str,
    *,
    isolation: str = "read_committed",
    idle_timeout_s: float = TIMEOUT_S,
) -> Iterator[Message]:
    """Every visible record of `topic` partition 0 up to its end now; nothing if the topic is missing."""
    if not topic_exists(consumer_config, topic):
        return
    yield from read_partition(consumer_config, topic, 0, isolation=isolation, idle_timeout_s=idle_timeout_s)
