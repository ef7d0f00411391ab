"""Plan one run of a flow: discover topics, prepare the target, and fix what to copy.

The plan fixes each partition's end at plan time (the source's last stable offset, or the
offset of a timestamp for a point-in-time migration), so a run copies a bounded amount of data
and a migration stops exactly where it was asked to.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass

from confluent_kafka.admin import OffsetSpec

from mirrorflow.clients import FlowClients
from mirrorflow.config import FlowConfig
from mirrorflow.kafka import admin_client, list_offsets
from mirrorflow.policy.filters import TopicFilter
from mirrorflow.replicate import runs
from mirrorflow.replicate.plan import PartitionSpan, Plan
from mirrorflow.replicate.progress import read_progress
from mirrorflow.replicate.topics import COMPACTED, RemoteTopics, ensure_topic, sync_remote_topics

_LATEST_RESETS = {"latest", "largest", "end"}


@dataclass(frozen=True)
class PlanOutcome:
    plan: Plan
    topics: RemoteTopics
    internal_topics_created: tuple[str, ...]
    rewound: tuple[str, ...]  # partitions whose source offsets went backwards (topic recreated?)


def with_topics(flow: FlowConfig, topics_regex: str) -> FlowConfig:
    """The flow with its `topics` include list replaced (a migration's topic choice)."""
    topics = (topics_regex,)
    return dataclasses.replace(flow, topics=topics, topic_filter=TopicFilter(topics, flow.topics_exclude))


def prepare_internal_topics(flow: FlowConfig, clients: FlowClients) -> list[str]:
    """Progress, offset-syncs and run-record topics, created where missing."""
    created = []
    target = admin_client(clients.target_admin)
    if ensure_topic(
        target,
        flow.offset_storage_topic,
        flow.offset_storage_partitions,
        flow.offset_storage_replication_factor,
        COMPACTED,
        what="progress (Connect offsets)",
        factor_key="offset.storage.replication.factor",
    ):
        created.append(flow.offset_storage_topic)
    if flow.emit_offset_syncs_enabled:
        side = "source" if flow.offset_syncs_cluster == flow.source else "target"
        if ensure_topic(
            admin_client(clients.admin(side)),
            flow.offset_syncs_topic,
            1,
            flow.offset_syncs_topic_replication_factor,
            COMPACTED,
            what="offset-syncs",
            factor_key="offset-syncs.topic.replication.factor",
        ):
            created.append(flow.offset_syncs_topic)
    if runs.ensure_runs_topic(target, flow.checkpoints_topic_replication_factor):
        created.append(runs.RUNS_TOPIC)
    return created


def make_plan(
    flow: FlowConfig,
    clients: FlowClients,
    *,
    run_id: str,
    mode: str = "replicate",
    until_ms: int | None = None,
    delivery: str | None = None,
) -> PlanOutcome:
    source_admin = admin_client(clients.source_admin)
    target_admin = admin_client(clients.target_admin)
    topics = sync_remote_topics(flow, source_admin, target_admin)
    internal = prepare_internal_topics(flow, clients)
    progress = read_progress(clients.target_consumer, flow.offset_storage_topic, flow.source)

    ready = topics.ready()
    parts = [(t, p) for t in ready for p in range(topics.partitions[t])]
    earliest = list_offsets(source_admin, parts, OffsetSpec.earliest())
    stable = list_offsets(source_admin, parts, OffsetSpec.latest(), read_committed=True)
    ends = dict(stable)
    if until_ms is not None:
        at_time = list_offsets(source_admin, parts, OffsetSpec.for_timestamp(until_ms))
        # No record at or after the timestamp means everything up to now is before it.
        ends = {tp: stable[tp] if at_time[tp] < 0 else min(at_time[tp], stable[tp]) for tp in parts}
    from_latest = str(clients.source_consumer.get("auto.offset.reset", "earliest")).lower() in _LATEST_RESETS

    spans = []
    rewound = []
    for topic, partition in parts:
        low, end = earliest[(topic, partition)], ends[(topic, partition)]
        stored = progress.get((topic, partition))
        if stored is None:
            start = stable[(topic, partition)] if from_latest else low
        else:
            start = stored + 1
            if start > stable[(topic, partition)]:
                # The source partition ends before what was already copied: the topic was
                # deleted and recreated. Like MM2 (auto.offset.reset), copy it from its start.
                rewound.append(f"{topic}-{partition}")
                start = low
        lost = max(0, low - start)
        start = max(start, low)
        spans.append(
            PartitionSpan(
                topic,
                partition,
                ready[topic],
                start,
                max(start, end),
                progress=-1 if stored is None else stored,
                lost=lost,
            )
        )
    plan = Plan(
        run_id=run_id,
        source=flow.source,
        target=flow.target,
        mode=mode,
        created_ms=int(time.time() * 1000),
        max_records=flow.range_max_records,
        max_bytes=flow.range_max_bytes,
        delivery=delivery or flow.delivery,
        tasks_max=flow.tasks_max,
        spans=tuple(spans),
        created_topics=tuple(topics.created),
    )
    return PlanOutcome(plan, topics, tuple(internal), tuple(rewound))
