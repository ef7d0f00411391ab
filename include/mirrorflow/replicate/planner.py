"""Plan one run of a flow: discover topics, prepare the target, and fix what to copy.

The plan fixes each partition's end at plan time (the source's last stable offset, or the
offset of a timestamp for a point-in-time migration), so a run copies a bounded amount of data
and a migration stops exactly where it was asked to.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterable
from dataclasses import dataclass

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, OffsetSpec

from mirrorflow.clients import FlowClients
from mirrorflow.config import FlowConfig
from mirrorflow.config.replicate_mode import MICRO_BATCH
from mirrorflow.kafka import TIMEOUT_S, ClusterWatch, KafkaCallError, admin_client, reader, topic_ids
from mirrorflow.kafka_offsets import list_offsets
from mirrorflow.policy.filters import TopicFilter
from mirrorflow.replicate import runs
from mirrorflow.replicate.copy.job import settle_timeout_s
from mirrorflow.replicate.copy.recovery.landed import landed_check
from mirrorflow.replicate.copy.recovery.progress_sweep import end_hanging_progress
from mirrorflow.replicate.found_copies import copies_without_progress
from mirrorflow.replicate.plan import PartitionSpan, Plan, flow_writer_slots
from mirrorflow.replicate.progress import (
    ProgressBlocked,
    ProgressReader,
    ProgressSnapshot,
    Stored,
    incarnation,
    split_incarnation,
)
from mirrorflow.replicate.topics import COMPACTED, RemoteTopics, ensure_topic, sync_remote_topics

_LATEST_RESETS = {"latest", "largest", "end"}


@dataclass(frozen=True)
class PlanOutcome:
    plan: Plan
    topics: RemoteTopics
    internal_topics_created: tuple[str, ...]


def with_topics(flow: FlowConfig, topics_regex: str) -> FlowConfig:
    """The flow with its `topics` include list replaced (a migration's or a verification's topic
    choice). The choice is all it copies: MM2 adds heartbeat topics to every flow's topics, but a
    person who asked for `orders` did not ask for `heartbeats` (a regex that names them still
    gets them)."""
    topics = (topics_regex,)
    return dataclasses.replace(
        flow,
        topics=topics,
        topic_filter=TopicFilter(topics, flow.topics_exclude),
        heartbeats_replication_enabled=False,
    )


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


def _settled_read(
    clients: FlowClients,
    target_admin: AdminClient,
    topic: str,
    source: str,
    limit: float,
    start: ProgressSnapshot | None,
) -> ProgressSnapshot | None:
    """A settle of the whole progress topic, as a snapshot (its id left to the caller); None
    when the topic does not exist yet. From `start` on (an earlier plan's read) when it was read
    from the topic that is there now."""

    def topic_id() -> str:
        return topic_ids(target_admin, [topic], answered=True).get(topic, "")

    with ProgressReader(
        clients.target_consumer, topic, source, timeout_s=limit, start=start, start_id=topic_id
    ) as progress:
        progress.settle()
        return progress.snapshot("")


def read_settled_progress(
    flow: FlowConfig, clients: FlowClients, target_admin: AdminClient, start: ProgressSnapshot | None = None
) -> ProgressSnapshot | None:
    """All of the flow's progress, every transaction open in it decided. One still open after
    the flow's transaction.timeout.ms is hanging (a broker dropped its abort marker, as after a
    target crash): it would hold this read, and every later one, for good, so it is ended with
    the id of the writer that opened it (copy/recovery/progress_sweep.py) and progress read again; one no
    id of the flow can end stops the plan with Kafka's command for it."""
    limit = settle_timeout_s(clients.target_producer)
    topic = flow.offset_storage_topic
    try:
        return _settled_read(clients, target_admin, topic, flow.source, limit, start)
    except ProgressBlocked as exc:
        stuck = exc.stuck
    bootstrap = str(clients.target_producer.get("bootstrap.servers", ""))
    watch = ClusterWatch(flow.target, bootstrap, flow.cluster_unreachable_timeout_ms / 1000)
    ends = (reader(clients.target_consumer), reader(clients.target_consumer, isolation="read_uncommitted"))
    try:
        end_hanging_progress(
            source=flow.source,
            target=flow.target,
            target_producer=clients.target_producer,
            target_consumer=clients.target_consumer,
            progress_topic=topic,
            stuck=stuck,
            ends=ends,
            watch=watch,
            landed=landed_check(
                clients.source_consumer,
                clients.target_consumer,
                lambda topic: flow.policy.format_remote_topic(flow.source, topic),
                source=flow.source,
                target=flow.target,
            ),
        )
    finally:
        for consumer in ends:
            consumer.close()
    return _settled_read(clients, target_admin, topic, flow.source, limit, start)


def make_plan(
    flow: FlowConfig,
    clients: FlowClients,
    *,
    run_id: str,
    mode: str = "replicate",
    until_ms: int | None = None,
    delivery: str | None = None,
    progress_from: ProgressSnapshot | None = None,
) -> PlanOutcome:
    """The plan of one run (or of a window's refresh); `progress_from`: an earlier plan's read of
    progress to read on from (a window's refreshes), instead of the topic's start."""
    source_admin = admin_client(clients.source_admin)
    target_admin = admin_client(clients.target_admin)
    topics = sync_remote_topics(flow, source_admin, target_admin)
    internal = prepare_internal_topics(flow, clients)
    progress_read = read_settled_progress(flow, clients, target_admin, progress_from)
    progress = {} if progress_read is None else progress_read.stored()

    ready = topics.ready()
    source_ids = planned_topic_ids(source_admin, ready, flow.source)
    # The progress topic's id with the remote topics' (one request): the tasks take this plan's
    # read of progress only from the topic it was read from.
    remote_ids = planned_topic_ids(target_admin, [*ready.values(), flow.offset_storage_topic], flow.target)
    progress_id = remote_ids.get(flow.offset_storage_topic, "")
    if progress_read is not None:
        progress_read = dataclasses.replace(progress_read, topic_id=progress_id) if progress_id else None
    parts = [(t, p) for t in ready for p in range(topics.partitions[t])]
    earliest = list_offsets(source_admin, parts, OffsetSpec.earliest())
    stable = list_offsets(source_admin, parts, OffsetSpec.latest(), read_committed=True)
    ends = dict(stable)
    if until_ms is not None:
        at_time = list_offsets(source_admin, parts, OffsetSpec.for_timestamp(until_ms))
        # No record at or after the timestamp means everything up to now is before it.
        ends = {tp: stable[tp] if at_time[tp] < 0 else min(at_time[tp], stable[tp]) for tp in parts}
    from_latest = str(clients.source_consumer.get("auto.offset.reset", "earliest")).lower() in _LATEST_RESETS
    adopted, progress = copies_without_progress(
        flow,
        clients,
        target_admin,
        [(t, p, ready[t]) for t, p in parts],
        progress,
        earliest,
        stable,
        reread=lambda: read_settled_progress(flow, clients, target_admin, progress_read),
    )

    restarts: dict[tuple[str, int], str] = {}
    for topic, partition in parts:
        stored = progress.get((topic, partition))
        if stored is not None:
            why = _restart_reason(
                stored,
                source_ids.get(topic, ""),
                remote_ids.get(ready[topic], ""),
                remote_created=ready[topic] in topics.created,
                past_end=stored.offset + 1 > stable[(topic, partition)],
                remote=ready[topic],
            )
            if why:
                restarts[(topic, partition)] = why
    # Where the copy of a restarted partition begins on the target: below it lie the records of
    # an earlier source incarnation, which translation must never take for the new one's.
    floors = list_offsets(
        target_admin, [(ready[t], p) for t, p in restarts], OffsetSpec.latest(), read_committed=False
    )

    slots = flow_writer_slots(flow.replicate_mode == MICRO_BATCH, flow.tasks_max)
    # A partition with no progress has no older writer to fence, unless a mirrorflow from before
    # writer slots copies this flow (its progress names no slot count): then its id per partition
    # may be writing one that has none yet. Fencing it for every new partition cost a window of
    # 1,000 new partitions 1,000 InitProducerId requests (31 s) before its first batch.
    unfenced = 0 if any(stored.slots == 0 for stored in progress.values()) else slots
    spans = []
    for topic, partition in parts:
        low, end = earliest[(topic, partition)], ends[(topic, partition)]
        remote = ready[topic]
        stored = progress.get((topic, partition))
        restarted = restarts.get((topic, partition), "")
        floor = 0
        if stored is None and (topic, partition) in adopted:
            start = adopted[(topic, partition)] + 1
        elif stored is None:
            start = stable[(topic, partition)] if from_latest else low
        elif restarted:
            start = low
            floor = floors.get((remote, partition), 0)
        else:
            start = stored.offset + 1
            floor = stored.floor
        lost = max(0, low - start)
        start = max(start, low)
        spans.append(
            PartitionSpan(
                topic,
                partition,
                remote,
                start,
                max(start, end),
                progress=-1 if stored is None else stored.offset,
                lost=lost,
                incarnation=incarnation(source_ids.get(topic, ""), remote_ids.get(remote, ""), floor),
                progress_incarnation="" if stored is None else stored.incarnation,
                restarted=restarted,
                progress_slots=unfenced if stored is None else stored.slots,
            )
        )
    spans = open_remote(target_admin, spans)
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
        slots=slots,
        progress_read=progress_read,
    )
    return PlanOutcome(plan, topics, tuple(internal))


def open_remote(target_admin: AdminClient, spans: list[PartitionSpan]) -> list[PartitionSpan]:
    """`spans`, those with nothing to copy whose remote partition has a transaction open marked
    with where it starts (PartitionSpan.open_at), so that their writer checks it. A copy checks
    the remote partitions it writes; a crash that lost a commit's marker in a partition with no
    new source records would otherwise leave its committed records invisible, and every
    read_committed reader of the target waiting in front of them, until the source wrote there
    again. Two batched ListOffsets (last stable offset, high watermark) for all of them. Identity-
    named remote topics are left out: other clients of the target may write there."""
    quiet = [(s.remote_topic, s.partition) for s in spans if not s.needs_copy and s.remote_topic != s.topic]
    if not quiet:
        return spans
    missing: set[tuple[str, int]] = set()
    stable = list_offsets(target_admin, quiet, OffsetSpec.latest(), read_committed=True, missing=missing)
    high = list_offsets(target_admin, quiet, OffsetSpec.latest(), read_committed=False, missing=missing)
    out = []
    for span in spans:
        where = (span.remote_topic, span.partition)
        if where in stable and where in high and stable[where] < high[where]:
            span = dataclasses.replace(span, open_at=stable[where])
        out.append(span)
    return out


def planned_topic_ids(
    admin: AdminClient, topics: Iterable[str], cluster: str, *, timeout_s: float = TIMEOUT_S
) -> dict[str, str]:
    """The topic IDs a plan compares with progress. A describe that got no answer fails the plan:
    read as "no ID", it would hide a topic deleted and created again (the plan would continue a
    recreated remote topic after the hole, or a new source topic as if it were the old one)."""
    try:
        return topic_ids(admin, topics, timeout_s=timeout_s, answered=True)
    except (TimeoutError, KafkaException) as exc:
        raise KafkaCallError(
            f"the topic IDs of cluster {cluster} could not be read ({exc or type(exc).__name__}); "
            "nothing was planned, the next run asks again"
        ) from exc


def _restart_reason(
    stored: Stored, source_id: str, remote_id: str, *, remote_created: bool, past_end: bool, remote: str
) -> str:
    """Why a partition with stored progress must be copied again from the source's earliest
    offset, or "" when its progress still holds.

    Progress names the topic incarnations it was copied between (see Stored). A source topic
    deleted and created again has a new ID and offsets from 0: its records are new and are all
    copied, even where the new topic already holds more records than the old progress (which
    offsets alone cannot tell). A remote topic deleted (and created again by this plan, or by
    someone else) lost what was copied: it is rebuilt from the source, never continued with a
    hole. Without recorded IDs (progress that MM2 or an older mirrorflow wrote) the checks that
    remain are a remote topic this plan had to create and a source that ends before the progress."""
    stored_source, stored_remote, _ = split_incarnation(stored.incarnation)
    if stored_source and source_id and stored_source != source_id:
        return "the source topic was deleted and created again (new topic ID); copying the new one from its start"
    # Progress naming this very topic holds, even when this plan created it: a concurrent run of
    # the flow may have found it created and copied into it before this plan read progress, and
    # starting over would copy those records twice.
    names_this_topic = bool(stored_remote and remote_id and stored_remote == remote_id)
    if remote_created and not names_this_topic:
        return f"the remote topic {remote} was missing and has been created again; rebuilding it from the source's earliest offset"
    if stored_remote and remote_id and not names_this_topic:
        return (
            f"the remote topic {remote} was deleted and created again (new topic ID); "
            "rebuilding it from the source's earliest offset"
        )
    if past_end:
        # Like MM2 (auto.offset.reset), a source that ends before the progress is copied from its start.
        return "the source partition ends before what was already copied (topic recreated?); copying it from its start"
    return ""
