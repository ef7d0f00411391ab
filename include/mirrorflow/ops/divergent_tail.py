"""The divergent tail of a failback: records the groups' new cluster holds that were never copied.

A failover from A to B moves groups to B. Whatever producers wrote to A after A->B's last copy
never reached B: when the groups come back (failback, B to A), those records sit in A's topics
between what the groups read on B and what is new on A. mirrorflow never lets them pass in
silence: failover finds them per partition (A's last stable offset beyond A->B's progress) for
every topic the moving groups will read on A, and a run that would commit offsets with such a
tail needs the runbook's choice:

* `replay`: the groups read the tail where it is, in offset order, after the records they read on
  B; a group that read part of it on A before the failover keeps its offset there (never
  rewound, nothing read twice). A->B's next run copies the tail to B as usual.
* `aside`: the tail is copied to `<topic>.divergent` on A (same partition, key, value, headers,
  timestamp, and a provenance header naming each record's original offset), idempotently, and
  the groups start after it: nothing stale reaches them, and nothing is lost.

The same holds in the other direction for active/active pairs (B's own topics, read on B after a
failover from A, beyond B->A's progress).
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import NewTopic, OffsetSpec

from mirrorflow.clients import FlowClients
from mirrorflow.config import ConfigError, MirrorConfig
from mirrorflow.config.airflow_connections import ConnectionExtra
from mirrorflow.kafka import admin_client, await_topics, read_partition, served
from mirrorflow.kafka_offsets import list_offsets
from mirrorflow.policy import should_replicate_topic
from mirrorflow.policy.provenance import is_loop, read_provenance, stamp_provenance
from mirrorflow.replicate.progress import read_progress

REPLAY, ASIDE = "replay", "aside"
CHOICES = (REPLAY, ASIDE)
ASIDE_SUFFIX = ".divergent"
TIMEOUT_S = 60.0


@dataclass(frozen=True, slots=True)
class Tail:
    """Offsets [start, end) of `topic`-`partition` on the cluster the groups move to that its
    flow back to the cluster they leave has not copied."""

    topic: str
    partition: int
    start: int
    end: int

    @property
    def offsets(self) -> int:
        return self.end - self.start

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "offsets": self.offsets}


def aside_topic(topic: str) -> str:
    return topic + ASIDE_SUFFIX


def divergent_tails(
    config: MirrorConfig,
    leaving: str,
    moving_to: str,
    topics: Iterable[str],
    *,
    connection_extra: ConnectionExtra | None = None,
) -> dict[tuple[str, int], Tail]:
    """Per partition of `topics` on `moving_to`, the offsets the flow `moving_to`->`leaving` has
    not copied (from its progress, or the partition's start when it never copied it). Empty when
    that flow is not enabled: then nothing on `moving_to` is meant to be on `leaving`. With
    identity-named topics in both directions the range also holds copies that came from
    `leaving` (the flow back skips those): an upper bound, and keep_aside leaves them out."""
    if not config.replication_enabled(moving_to, leaving):
        return {}
    try:
        back = config.flow(moving_to, leaving)
    except ConfigError:
        return {}
    clients = FlowClients.resolve(back, connection_extra)
    admin = admin_client(clients.source_admin)
    wanted = set(topics)
    if not wanted:
        return {}
    listed = admin.list_topics(timeout=TIMEOUT_S).topics
    parts = [
        (name, p)
        for name in sorted(wanted)
        # Only what the flow back copies can be behind it: remote topics of the cluster the
        # groups leave (A.orders on B) are never copied back there.
        if name in listed and listed[name].error is None and should_replicate_topic(back, name)
        for p in listed[name].partitions
    ]
    earliest = list_offsets(admin, parts, OffsetSpec.earliest())
    stable = list_offsets(admin, parts, OffsetSpec.latest(), read_committed=True)
    progress = read_progress(clients.target_consumer, back.offset_storage_topic, back.source)
    tails = {}
    for where in parts:
        start = max(earliest[where], progress.get(where, -1) + 1)
        if stable[where] > start:
            tails[where] = Tail(where[0], where[1], start, stable[where])
    return tails


def keep_aside(
    tails: Iterable[Tail],
    *,
    cluster: str,
    leaving: str,
    producer_config: dict[str, Any],
    consumer_config: dict[str, Any],
    admin_config: dict[str, Any],
    replication_factor: int,
) -> dict[str, int]:
    """Copy each tail to `<topic>.divergent` on `cluster` (created with the topic's partition
    count where missing), the same partition, skipping what an earlier attempt already copied
    there (read back from the last record's provenance). Returns records copied per aside topic."""
    tails = sorted(tails, key=lambda t: (t.topic, t.partition))
    if not tails:
        return {}
    admin = admin_client(admin_config)
    listed = admin.list_topics(timeout=TIMEOUT_S).topics
    counts = {t.topic: len(listed[t.topic].partitions) for t in tails}
    missing = [
        NewTopic(aside_topic(topic), n, replication_factor)
        for topic, n in counts.items()
        if aside_topic(topic) not in listed
    ]
    futures = admin.create_topics(missing, request_timeout=TIMEOUT_S) if missing else {}
    for future in futures.values():
        try:
            future.result(TIMEOUT_S)
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise
    if missing:
        await_topics(admin, {aside_topic(t): n for t, n in counts.items()})
    aside_ends = list_offsets(
        admin, [(aside_topic(t.topic), t.partition) for t in tails], OffsetSpec.latest(), read_committed=False
    )
    producer = Producer({**producer_config, "enable.idempotence": True, "acks": "all"})
    copied: dict[str, int] = {}
    errors: list[str] = []

    def delivered(error: KafkaError | None, _message: Any) -> None:
        if error is not None:
            errors.append(error.str())

    for tail in tails:
        aside = aside_topic(tail.topic)
        start = tail.start
        end_there = aside_ends[(aside, tail.partition)]
        if end_there > 0:
            last = next(
                iter(
                    read_partition(
                        consumer_config,
                        aside,
                        tail.partition,
                        start=end_there - 1,
                        isolation="read_uncommitted",
                    )
                ),
                None,
            )
            provenance = read_provenance(last.headers()) if last is not None else None
            if provenance is not None and provenance.source_topic == tail.topic:
                start = max(start, provenance.source_offset + 1)
        for record in read_partition(consumer_config, tail.topic, tail.partition, start=start, end=tail.end):
            if is_loop(record.headers(), leaving):
                continue  # a copy of a record the cluster left holds (identity-named topics): not divergent
            headers = stamp_provenance(
                record.headers(),
                source_alias=cluster,
                topic=tail.topic,
                partition=tail.partition,
                offset=record.offset(),
            )
            while True:
                try:
                    producer.produce(
                        aside,
                        record.value(),
                        record.key(),
                        tail.partition,
                        timestamp=record.timestamp()[1],
                        headers=headers,
                        on_delivery=delivered,
                    )
                    break
                except BufferError:
                    producer.poll(0.1)
            producer.poll(0)
            copied[aside] = copied.get(aside, 0) + 1
    deadline = time.monotonic() + TIMEOUT_S
    while served(producer.flush, 1.0) and time.monotonic() < deadline:
        pass
    if errors or len(producer):
        raise RuntimeError(
            f"copying the divergent tail aside failed ({errors[0] if errors else f'{len(producer)} records unsent'}); "
            "no group was moved: run the failover again, it continues where the copy stopped"
        )
    return copied
