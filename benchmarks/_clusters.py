"""The two local Apache Kafka clusters a benchmark runs on, and topics made on them in bulk.

Benchmarks that compare replicators start a source and a target the same way (single nodes from
localkafka with QUICK_CLUSTER, stopped whatever happens); topics are created and deleted many
to a request, so a thousand topics cost a few round trips, not a thousand.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic

from localkafka import QUICK_CLUSTER, LocalKafka
from mirrorflow.kafka import await_topics

PARTITIONS_PER_REQUEST = 5000
"""Kafka's controller refuses a CreateTopics of more than 10,000 partitions in all."""
TIMEOUT_S = 300.0
SINGLE_NODE_REPLICATION = (
    "replication.factor = 1\noffset-syncs.topic.replication.factor = 1\n"
    "checkpoints.topic.replication.factor = 1\nheartbeats.topic.replication.factor = 1\n"
    "offset.storage.replication.factor = 1\n"
)
"""The replication factors of mm2.properties for flows between single-node clusters."""


@contextmanager
def two_clusters(tmp: Path, *, heap: str | None = None) -> Iterator[tuple[LocalKafka, LocalKafka]]:
    """A started source and target under `tmp`, stopped when the block ends."""
    options: dict[str, object] = {"overrides": QUICK_CLUSTER}
    if heap:
        options["heap"] = heap
    source = LocalKafka(tmp / "source", **options)
    target = LocalKafka(tmp / "target", **options)
    try:
        source.launch()
        target.launch()
        source.start()
        target.start()
        yield source, target
    finally:
        source.stop()
        target.stop()


def _batches(names: list[str], partitions: int) -> Iterator[list[str]]:
    step = max(1, PARTITIONS_PER_REQUEST // max(1, partitions))
    for start in range(0, len(names), step):
        yield names[start : start + step]


def create_topics(
    bootstrap: str, names: list[str], partitions: int, config: dict[str, str] | None = None
) -> None:
    """Create the topics and wait until the broker serves every partition (a producer that asks
    sooner is told the topic is unknown)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for batch in _batches(names, partitions):
        created = admin.create_topics(
            [NewTopic(n, partitions, 1, config=dict(config or {})) for n in batch], request_timeout=TIMEOUT_S
        )
        for future in created.values():
            future.result(TIMEOUT_S)
    for batch in _batches(names, partitions):
        await_topics(admin, dict.fromkeys(batch, partitions), timeout_s=TIMEOUT_S)


def delete_topics(bootstrap: str, names: list[str], partitions: int) -> None:
    """Delete the topics (those that exist), so that the next measurement's brokers do not carry
    this one's partitions."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    existing = set(admin.list_topics(timeout=60).topics)
    for batch in _batches([n for n in names if n in existing], partitions):
        for future in admin.delete_topics(batch, request_timeout=TIMEOUT_S).values():
            future.result(TIMEOUT_S)
