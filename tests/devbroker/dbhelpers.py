"""Shared helpers for devbroker's own tests: brokers started per module, client shortcuts."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaError, Message, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from devbroker.launcher import DevBroker

TEST_OVERRIDES = {"group.initial.rebalance.delay.ms": 0}


@contextlib.contextmanager
def running_broker(data_dir: Path | None = None, **overrides: object) -> Iterator[DevBroker]:
    broker = DevBroker(data_dir=data_dir, overrides={**TEST_OVERRIDES, **overrides})
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()


def admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap})


def create_topic(bootstrap: str, name: str, partitions: int = 1, **configs: str) -> None:
    client = admin(bootstrap)  # must outlive the future
    futures = client.create_topics([NewTopic(name, partitions, 1, config=configs)], operation_timeout=10)
    futures[name].result(15)


def consume_all(
    bootstrap: str,
    topic: str,
    partitions: int = 1,
    *,
    isolation: str = "read_uncommitted",
    timeout: float = 15.0,
    **extra: Any,
) -> list[Message]:
    """Every message of `topic` from offset 0 up to the end (EOF on every partition)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "devbroker-tests",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": isolation,
            "auto.offset.reset": "earliest",
            **extra,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    messages: list[Message] = []
    at_eof: set[int] = set()
    deadline = time.monotonic() + timeout
    try:
        while len(at_eof) < partitions and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            if message.error() is not None:
                if message.error().code() == KafkaError._PARTITION_EOF:
                    at_eof.add(message.partition())
                    continue
                raise AssertionError(f"consumer error: {message.error()}")
            at_eof.discard(message.partition())
            messages.append(message)
    finally:
        consumer.close()
    assert len(at_eof) == partitions, f"did not reach the end of {topic} within {timeout}s"
    return messages
