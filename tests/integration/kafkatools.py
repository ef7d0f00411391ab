"""Test-side helpers: create topics, produce fixtures, read partitions back."""

from __future__ import annotations

from dataclasses import dataclass

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from mirrorflow.kafka import read_partition
from mirrorflow.policy.provenance import HEADER_PREFIX


def create_topics(bootstrap: str, *topics: tuple[str, int] | tuple[str, int, dict[str, str]]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    new = [NewTopic(t[0], t[1], 1, config=t[2] if len(t) > 2 else {}) for t in topics]
    for future in admin.create_topics(new, operation_timeout=10).values():
        future.result()


@dataclass(frozen=True)
class Rec:
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    timestamp: int

    def content(self) -> tuple:
        """What must survive a copy byte for byte (mirrorflow's own headers aside)."""
        user_headers = tuple(h for h in self.headers if not h[0].startswith(HEADER_PREFIX))
        return (self.key, self.value, user_headers, self.timestamp)


def read_all(bootstrap: str, topic: str, partition: int = 0, isolation: str = "read_committed") -> list[Rec]:
    return [
        Rec(m.offset(), m.key(), m.value(), tuple(m.headers() or ()), m.timestamp()[1])
        for m in read_partition({"bootstrap.servers": bootstrap}, topic, partition, isolation=isolation)
    ]


def produce(bootstrap: str, topic: str, records: list[dict], **config: object) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 2, **config})
    for record in records:
        producer.produce(topic, **record)
    assert producer.flush(30) == 0
