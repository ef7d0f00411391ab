"""MM2 checkpoints with exact offsets: the `emit.checkpoints` job, and MirrorClient's reader.

One pass: list the source groups once, read their committed offsets in concurrent batches, read
the offset-syncs and the previous checkpoints once, translate every relevant group partition
exactly (control/translation), and write the checkpoints MM2's rule lets through to
`<source>.checkpoints.internal` on the target, in MM2's binary format, partition 0:

- a partition's first checkpoint is always written;
- after that only when the group rewound upstream or the downstream offset advanced, so the
  target never sees a downstream rewind or a repeat.

The previous checkpoints are read from the topic at the start of the pass, as MM2's
CheckpointStore does when a task starts, so passes run by separate Airflow tasks behave like
one long-lived MM2 task. MM2's own tools read the result: `remote_consumer_offsets` is
MirrorClient.remoteConsumerOffsets (what RemoteClusterUtils.translateOffsets returns).
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from confluent_kafka import KafkaError, Message, Producer

from mirrorflow.clients import FlowClients, check_reachable
from mirrorflow.config import FlowConfig, MirrorConfig
from mirrorflow.config.airflow_connections import ConnectionExtra
from mirrorflow.control.flows import load, replication_flow, require_checkpoints, reverse_flow
from mirrorflow.control.reading import read_from_start
from mirrorflow.control.translation.group_pass import relevant_group_offsets, translate_offsets
from mirrorflow.control.translation.partition_pass import Translator
from mirrorflow.kafka import TIMEOUT_S, KafkaCallError, admin_client
from mirrorflow.mm2.formats import Checkpoint, Mm2FormatError
from mirrorflow.ops.acl_check import require_job_acls
from mirrorflow.policy.replication import DefaultReplicationPolicy, ReplicationPolicy
from mirrorflow.replicate.topics import COMPACTED, ensure_topic

log = logging.getLogger(__name__)

CheckpointKey = tuple[str, str, int]  # group, downstream topic, partition


class OffsetAndMetadata(NamedTuple):
    offset: int
    metadata: str


@dataclass(frozen=True, slots=True)
class StoredCheckpoint:
    checkpoint: Checkpoint
    timestamp_ms: int


def _checkpoint_records(
    consumer_config: Mapping[str, Any], topic: str, *, isolation: str, timeout_s: float
) -> Iterator[tuple[Checkpoint, Message]]:
    """Decodable checkpoints of partition 0, oldest first, up to its end now; undecodable ones skipped.

    A missing topic reads as empty, as a Java consumer assigned to it finds nothing. The read
    always reaches the end: MirrorClient returns what it read by its deadline, which would hand
    a failover the older checkpoints of groups whose newer ones lie beyond it; here only a read
    that stops making progress for `timeout_s` ends, with KafkaCallError naming where.
    """
    skipped = 0
    for message in read_from_start(consumer_config, topic, isolation=isolation, idle_timeout_s=timeout_s):
        try:
            yield Checkpoint.decode(message.key(), message.value()), message
        except Mm2FormatError:
            skipped += 1
    if skipped:
        log.info("skipped %d records of %s that are not checkpoints", skipped, topic)


def read_checkpoints(
    consumer_config: Mapping[str, Any], topic: str, *, timeout_s: float = TIMEOUT_S
) -> dict[CheckpointKey, StoredCheckpoint]:
    """The latest checkpoint per (group, downstream topic, partition), as MM2's CheckpointStore loads it."""
    latest: dict[CheckpointKey, StoredCheckpoint] = {}
    for checkpoint, message in _checkpoint_records(
        consumer_config, topic, isolation="read_committed", timeout_s=timeout_s
    ):
        key = (checkpoint.group, checkpoint.topic, checkpoint.partition)
        latest[key] = StoredCheckpoint(checkpoint, message.timestamp()[1])
    return latest


def remote_consumer_offsets(
    target_client_config: Mapping[str, Any],
    source_alias: str,
    group: str,
    *,
    policy: ReplicationPolicy | None = None,
    timeout_s: float = TIMEOUT_S,
) -> dict[tuple[str, int], OffsetAndMetadata]:
    """MirrorClient.remoteConsumerOffsets: the offsets `group` should commit on this cluster.

    Reads `policy.checkpoints_topic(source_alias)` partition 0 from the beginning to its end
    offset (never stopping early at a deadline, unlike MirrorClient), keeps the last checkpoint per
    partition for the group and skips records that do not decode. The consumer reads with the
    config's isolation.level, read_uncommitted unless set, as Java's consumer defaults.
    """
    topic = (policy or DefaultReplicationPolicy()).checkpoints_topic(source_alias)
    isolation = str(target_client_config.get("isolation.level", "read_uncommitted"))
    offsets: dict[tuple[str, int], OffsetAndMetadata] = {}
    for checkpoint, _ in _checkpoint_records(
        target_client_config, topic, isolation=isolation, timeout_s=timeout_s
    ):
        if checkpoint.group == group:
            offsets[(checkpoint.topic, checkpoint.partition)] = OffsetAndMetadata(
                checkpoint.downstream_offset, checkpoint.metadata
            )
    return offsets


def ensure_checkpoints_topic(flow: FlowConfig, clients: FlowClients) -> bool:
    """Create `<source>.checkpoints.internal` on the target (compacted, 1 partition) if missing."""
    return ensure_topic(
        admin_client(clients.target_admin),
        flow.checkpoints_topic,
        1,
        flow.checkpoints_topic_replication_factor,
        COMPACTED,
        what="checkpoints",
        factor_key="checkpoints.topic.replication.factor",
    )


@dataclass
class CheckpointPassReport:
    flow: str
    groups_listed: int = 0
    groups_checkpointed: int = 0
    partitions: int = 0
    translations: dict[str, int] = field(default_factory=dict)
    emitted: int = 0
    repeats_skipped: int = 0
    downstream_rewinds_skipped: int = 0
    untranslated: dict[str, str] = field(default_factory=dict)
    probes: int = 0
    created_topic: bool = False
    seconds: float = 0.0

    def summary(self) -> dict[str, Any]:
        return {
            "flow": self.flow,
            "groups_listed": self.groups_listed,
            "groups_checkpointed": self.groups_checkpointed,
            "partitions": self.partitions,
            "translations": dict(self.translations),
            "emitted": self.emitted,
            "repeats_skipped": self.repeats_skipped,
            "downstream_rewinds_skipped": self.downstream_rewinds_skipped,
            "untranslated": dict(self.untranslated),
            "probes": self.probes,
            "created_topic": self.created_topic,
            "seconds": self.seconds,
        }


def checkpoint_pass(
    flow: FlowConfig, clients: FlowClients, *, reverse: FlowConfig | None = None
) -> CheckpointPassReport:
    """Translate every relevant group's committed offsets and write the checkpoints MM2 would emit."""
    started = time.monotonic()
    report = CheckpointPassReport(flow.name)
    report.created_topic = ensure_checkpoints_topic(flow, clients)
    previous = read_checkpoints(clients.target_consumer, flow.checkpoints_topic)
    groups = relevant_group_offsets(flow, clients)
    report.groups_listed = groups.listed
    with Translator(flow, clients, reverse=reverse) as translator:
        rows = translate_offsets(translator, groups.offsets)
        report.probes = translator.probes
    statuses: Counter[str] = Counter()
    due: list[Checkpoint] = []
    checkpointed = set()
    for row in rows:
        report.partitions += 1
        if row.translation is None or row.target_topic is None:
            statuses["untranslated"] += 1
            report.untranslated[f"{row.topic}-{row.partition}"] = row.reason or "no translation"
            continue
        statuses[row.translation.status.value] += 1
        checkpoint = Checkpoint(
            row.group,
            row.target_topic,
            row.partition,
            row.committed.offset,
            row.translation.downstream_offset,
            row.committed.metadata,
        )
        stored = previous.get((row.group, row.target_topic, row.partition))
        last = stored.checkpoint if stored else None
        if should_emit(last, checkpoint):
            due.append(checkpoint)
            checkpointed.add(row.group)
        elif last is not None and checkpoint.downstream_offset < last.downstream_offset:
            report.downstream_rewinds_skipped += 1
        else:
            report.repeats_skipped += 1
    report.translations = dict(statuses)
    report.groups_checkpointed = len(checkpointed)
    write_checkpoints(clients.target_producer, flow.checkpoints_topic, due)
    report.emitted = len(due)
    report.seconds = round(time.monotonic() - started, 3)
    log.info(
        "%s: %d checkpoints written for %d groups (%d partitions translated, %d repeats and %d "
        "downstream rewinds not written, %d probes)",
        flow.name,
        report.emitted,
        report.groups_checkpointed,
        report.partitions,
        report.repeats_skipped,
        report.downstream_rewinds_skipped,
        report.probes,
    )
    return report


def write_checkpoints(producer_config: Mapping[str, Any], topic: str, checkpoints: list[Checkpoint]) -> None:
    """Partition 0, as MM2 writes; the record timestamp is the emission time."""
    if not checkpoints:
        return
    producer = Producer({**producer_config, "enable.idempotence": True, "acks": "all", "linger.ms": 5})
    errors: list[KafkaError] = []

    def delivered(error: KafkaError | None, _: Message) -> None:
        if error is not None:
            errors.append(error)

    for checkpoint in checkpoints:
        while True:
            try:
                producer.produce(
                    topic,
                    key=checkpoint.key_bytes(),
                    value=checkpoint.value_bytes(),
                    partition=0,
                    on_delivery=delivered,
                )
                break
            except BufferError:
                producer.poll(0.05)
    remaining = producer.flush(TIMEOUT_S)
    if errors or remaining:
        first = (
            f"{errors[0].name()}: {errors[0].str()}" if errors else f"{remaining} not acknowledged in time"
        )
        raise KafkaCallError(f"writing {len(checkpoints)} checkpoints to {topic} failed: {first}")


def emit_checkpoints(
    config: MirrorConfig | str,
    source: str,
    target: str,
    *,
    connection_extra: ConnectionExtra | None = None,
) -> dict[str, Any]:
    """The checkpoint job of flow source->target, once: what its DAG task and `mirrorflow checkpoints` run."""
    loaded = load(config)
    flow = replication_flow(loaded, source, target)
    require_checkpoints(flow)
    clients = FlowClients.resolve(flow, connection_extra)
    check_reachable(flow, clients)
    require_job_acls(flow, "checkpoints", clients)
    return checkpoint_pass(flow, clients, reverse=reverse_flow(loaded, flow)).summary()


def should_emit(previous: Checkpoint | None, new: Checkpoint) -> bool:
    """MM2's checkpoint emission rule: whether `new` is written, given the last checkpoint held for
    that group and partition.

    Emitted when there is none, when the group rewound upstream, or when the downstream offset
    advanced; a downstream rewind or a repeat is never written.
    """
    if previous is None:
        return True
    if (previous.group, previous.topic, previous.partition) != (new.group, new.topic, new.partition):
        raise ValueError(
            f"previous checkpoint is for {previous.group!r} {previous.topic}-{previous.partition}, "
            f"new one for {new.group!r} {new.topic}-{new.partition}: pass the previous checkpoint "
            "of the same group and partition"
        )
    if new.upstream_offset < previous.upstream_offset:
        return True
    return new.downstream_offset > previous.downstream_offset
