"""Reading the run-records topic and other small topics of the status: bounded ranges of several
partitions with one consumer, and where the run-records topic begins and ends."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Message, TopicPartition

from mirrorflow.kafka import KafkaCallError, reader, watermarks
from mirrorflow.replicate.runs import RUNS_TOPIC

STATUS_FETCH_WAIT_MS = 20


def runs_bounds(consumer_config: dict[str, Any], timeout_s: float) -> tuple[int, int] | None:
    """(low, high) watermarks of the run-records topic; None when the cluster does not have it."""
    consumer = reader(consumer_config)
    try:
        meta = consumer.list_topics(RUNS_TOPIC, timeout=timeout_s).topics.get(RUNS_TOPIC)
        if meta is None or meta.error is not None:
            return None
        return watermarks(consumer, RUNS_TOPIC, 0, timeout_s=timeout_s)
    finally:
        consumer.close()


def read_ranges(
    consumer_config: dict[str, Any], ranges: dict[tuple[str, int], tuple[int, int]], idle_timeout_s: float
) -> Iterator[Message]:
    """Records of several partitions, each from its start up to its end (exclusive), with one
    consumer: status reads many tiny topics, and a consumer per partition costs a fetch wait each."""
    pending = {tp for tp, (start, end) in ranges.items() if start < end}
    if not pending:
        return
    # The reads are short and end at known offsets: an empty fetch held for the default 500 ms
    # would only delay the end-of-partition signal.
    consumer = reader({**consumer_config, "fetch.wait.max.ms": STATUS_FETCH_WAIT_MS})
    try:
        consumer.assign([TopicPartition(t, p, ranges[(t, p)][0]) for t, p in sorted(pending)])
        last_seen = time.monotonic()
        while pending:
            message = consumer.poll(0.2)
            if message is None:
                if time.monotonic() - last_seen > idle_timeout_s:
                    names = ", ".join(f"{t}-{p}" for t, p in sorted(pending))
                    raise KafkaCallError(f"{names} stopped before the offsets to read up to")
                continue
            last_seen = time.monotonic()
            tp = (message.topic(), message.partition())
            error = message.error()
            if error is not None and error.code() != KafkaError._PARTITION_EOF:
                raise KafkaException(error)
            end = ranges[tp][1]
            if error is None and message.offset() < end:
                yield message
            if message.offset() + (0 if error is not None else 1) >= end:
                pending.discard(tp)
    finally:
        consumer.close()
