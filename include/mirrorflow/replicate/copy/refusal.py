"""Records the target will not take: which one it is, and what the operator changes.

A producer's own limit (message.max.bytes) refuses a record in produce() itself; the broker's
limit (the topic's max.message.bytes, the brokers' message.max.bytes) refuses a whole batch, so
the attempt that meets it cannot tell which record it was, and its transactional producer must go
(the transaction needs an epoch bump). The next attempt copies one record at a time (`solo`)
until the target refuses one: its offset becomes `stop_at`. The attempt after that copies the
records before it and fails the partition with `message`, which names the record and the setting
to change.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaError

from mirrorflow.policy.provenance import RECORD_HEADROOM
from mirrorflow.replicate.copy.calls import COPY_REQUEST_BYTES
from mirrorflow.replicate.plan import PartitionSpan

REFUSAL_STEPS = 2
"""Attempts that go to finding the refused record; they are not retries."""


class RecordRefused(Exception):
    """The target refused a record of the partition as too large (MSG_SIZE_TOO_LARGE)."""


@dataclass
class Refusal:
    """What the attempts of one partition learnt about a record the target refuses."""

    solo: bool = False
    stop_at: int | None = None
    message: str = ""
    steps: int = 0

    def end(self, span_end: int) -> int:
        """Where reading stops: the span's end, or the refused record."""
        return span_end if self.stop_at is None else min(span_end, self.stop_at)


def record_size(key: bytes | None, value: bytes | None, headers: Any) -> int:
    size = (len(key) if key else 0) + (len(value) if value else 0)
    return size + sum(len(name) + (len(v) if v else 0) for name, v in headers or ())


def over_producer_limit(
    span: PartitionSpan, target: str, producer_config: dict[str, Any], offset: int, size: int
) -> str:
    """librdkafka refuses a record above its own message.max.bytes in produce(), with the
    broker's error code (MSG_SIZE_TOO_LARGE, "Broker: Message size too large"), though no broker
    saw it: say which side refused and the key that raises the limit."""
    limit = max(int(producer_config.get("message.max.bytes", 0)), COPY_REQUEST_BYTES)
    return (
        f"{span.topic}-{span.partition} offset {offset}: mirrorflow's producer refuses the record as too "
        f"large ({size:,} bytes, above its message.max.bytes of {limit:,}); the target cluster never saw "
        f"it: raise {target}.producer.message.max.bytes (or {target}.producer.max.request.size, which "
        f"mirrorflow maps to it) above the record's size, and the target brokers' "
        f"socket.request.max.bytes and {span.remote_topic}'s max.message.bytes with it, then run again "
        "(the partition's copy stops before this record)"
    )


def refused_by_target(span: PartitionSpan, target: str, offset: int, size: int, error: KafkaError) -> str:
    return (
        f"{span.topic}-{span.partition} offset {offset}: the target refuses the record as too large "
        f"({size:,} bytes; its broker refused it, not mirrorflow's producer): raise max.message.bytes "
        f"of {span.remote_topic} on the target cluster {target} above that and run again; the "
        f"records before it have been copied (a topic without its own limit takes the brokers' "
        f"message.max.bytes; mirrorflow creates remote topics, and its topic config sync sets them, with "
        f"the source topic's limit plus {RECORD_HEADROOM} bytes; its producer allows records up to "
        f"{COPY_REQUEST_BYTES:,} bytes; broker: {error.str()})"
    )
