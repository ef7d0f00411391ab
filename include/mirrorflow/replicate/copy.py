"""Copy one source partition's span to the same partition number of its remote topic.

Exactly-once (the default): the producer's transactional.id is that of the partition's writer
slot (one of COPY_SLOTS per flow, by a hash of topic and partition), the same for every writer
of the partition, so starting a copy fences any older writer of it (a retried Spark task, a
zombie, a concurrent run) and aborts its open transaction. A worker copies the partitions of
one slot one after another with one producer. Progress is then read back settled (see
progress.py) and the copy resumes right after it. Each chunk of at most `max_records`
offsets / `max_bytes` bytes is one transaction holding the data, the new progress and (when
offset-syncs live on the target) the offset-syncs, so the target never holds data without its
progress or progress without its data.

At-least-once: the same loop with an idempotent producer; data is flushed before progress is
written, so a crash re-copies at most the chunk in flight.

Records keep key, value (null included), headers and timestamp; mirrorflow's provenance headers
are added when enabled, and a record whose provenance shows it came from the target cluster is
not copied back (loop prevention that works with identity topic names).

Downstream offsets. The dense offset-syncs need the target offset of every copied record, and a
delivery report per record costs the copy loop about a tenth of all it spends on the record. So
in exactly-once mode only the chunk's first record and the last record of every consumed batch
report back. An idempotent producer appends one partition's records in produce order, each at
an offset of its own, so n records whose first and last offsets lie n - 1 apart occupy
consecutive offsets and every offset in between is known. When another writer's records landed
among ours (an identity-named remote topic that local clients also write, say), the check fails,
the chunk's transaction is aborted and the chunk is copied again with a report per record, as
is the rest of that partition's span. At-least-once mode cannot take a chunk back, so it always
reports per record.
"""

from __future__ import annotations

import contextlib
import logging
import struct
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition

from mirrorflow.kafka import ClusterUnreachable, ClusterWatch, served, watermarks
from mirrorflow.mm2.formats import OffsetSync
from mirrorflow.policy.provenance import (
    HEADER_PREFIX,
    PROVENANCE_HEADER,
    RECORD_HEADROOM,
    ProvenanceError,
    fresh_stamp,
    is_loop,
    stamp_provenance,
)
from mirrorflow.replicate.offset_syncs import DenseSyncEmitter, SyncPoint
from mirrorflow.replicate.plan import COPY_SLOTS, PartitionSpan, writer_slot
from mirrorflow.replicate.progress import ProgressReader, ProgressReadError, Stored, progress_record

CONSUME_BATCH = 2000
CONSUME_TIMEOUT_S = 0.1
ATTEMPTS = 3
CLIENT_TIMEOUT_S = 60.0
WAIT_SLICE_S = 1.0  # blocking client calls wait this long at a time, then look at the clusters
NEW_TOPIC_WAIT_S = 10.0
ABORT_TIMEOUT_S = 10.0
DEFAULT_TRANSACTION_TIMEOUT_MS = 60000  # librdkafka's default
COPY_REQUEST_BYTES = 100 << 20  # Kafka's socket.request.max.bytes default: no bigger record can arrive

# Source consumer settings that suit a bulk copy; the user's source consumer config overrides
# them. Once its prefetch queue holds queued.max.messages.kbytes (64 MiB), librdkafka waits
# fetch.queue.backoff.ms (1 s by default) before it fetches again, while a copy drains that
# queue in a fraction of the time: with the default, a single-partition copy mostly waits.
# A copy reads one partition at a time, so a fetch carries at most max.partition.fetch.bytes
# (1 MiB by default); 8 MiB means an eighth of the fetch requests for both sides to handle.
# A worker's consumers are reused from partition to partition (see SharedClients), and a
# consumer sends one fetch at a time to a broker: once a partition's copy has read to the end,
# the broker holds the next fetch for fetch.wait.max.ms (500 ms by default) before it answers,
# and the next partition's first fetch waits behind it. A fetch that finds records returns at
# once whatever this is, so only that idle wait gets shorter.
CONSUMER_DEFAULTS: dict[str, object] = {
    "fetch.queue.backoff.ms": 10,
    "max.partition.fetch.bytes": 8 << 20,
    "fetch.wait.max.ms": 10,
}

_pack_offset = struct.Struct(">q").pack
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CopyJob:
    """Everything a worker needs for one flow's copy; shipped to Spark executors as is.

    Client configs may hold credentials, so they never appear in repr().
    """

    run_id: str
    source: str
    target: str
    exactly_once: bool
    max_records: int
    max_bytes: int
    provenance: bool
    progress_topic: str
    offset_syncs_topic: str | None
    offset_syncs_on_target: bool
    source_consumer: dict[str, Any] = field(repr=False)
    target_producer: dict[str, Any] = field(repr=False)
    target_consumer: dict[str, Any] = field(repr=False)
    source_producer: dict[str, Any] = field(repr=False)
    stall_timeout_s: float = 120.0
    unreachable_timeout_s: float = 15.0


@dataclass
class UnitResult:
    """What copying one partition did. `copy_seconds` is the time spent moving records once the
    clients were ready (the steady-rate figure); `interleaved_chunks` counts chunks copied twice
    because another writer's records landed among ours on the target."""

    topic: str
    partition: int
    remote_topic: str
    planned_start: int
    planned_end: int
    resumed_from: int = -1
    progress: int = -1
    records: int = 0
    bytes: int = 0
    skipped_loops: int = 0
    retimed: int = 0
    """Records with CreateTime 0 that the target got with the copy's wall-clock time instead:
    librdkafka (and so every confluent-kafka producer) reads a timestamp of 0 as "now"."""
    transactions: int = 0
    offset_syncs: int = 0
    offset_sync_errors: int = 0
    attempts: int = 0
    seconds: float = 0.0
    copy_seconds: float = 0.0
    interleaved_chunks: int = 0
    unreachable: str | None = None
    """The alias of a cluster this copy found unreachable (its worker then skips the rest)."""
    lost: list[tuple[int, int]] = field(default_factory=list)
    """Offset ranges [start, end) deleted from the source (retention, DeleteRecords) before they
    were copied: found by the plan or met by the copy. Ranges, not a count, so that attempts
    which meet the same gap again never count it twice."""
    error: str | None = None

    @classmethod
    def not_copied(
        cls, span: PartitionSpan, error: str, *, progress: int = -1, unreachable: str | None = None
    ) -> UnitResult:
        """The result of a unit that never ran, and why."""
        return cls(
            span.topic,
            span.partition,
            span.remote_topic,
            span.start,
            span.end,
            progress=progress,
            unreachable=unreachable,
            error=error,
        )

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def lost_to_retention(self) -> int:
        return sum(end - start for start, end in self.lost)

    def count_lost(self, start: int, end: int) -> None:
        self.lost = merge_ranges([*self.lost, (start, end)])


def merge_ranges(ranges: Sequence[Sequence[int]]) -> list[tuple[int, int]]:
    """The union of half-open offset ranges, sorted and without overlaps or empty ranges."""
    out: list[tuple[int, int]] = []
    for start, end in sorted((int(a), int(b)) for a, b in ranges if b > a):
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


def transactional_id_prefix(source: str, target: str) -> str:
    """What every transactional.id of a flow's copy starts with (the ACL's prefixed resource)."""
    return f"mirrorflow-{source}->{target}-"


def slot_transactional_id(source: str, target: str, slot: int, slots: int = COPY_SLOTS) -> str:
    # "#" cannot appear in a topic name, so no slot's id is ever a per-partition id.
    return f"{transactional_id_prefix(source, target)}#{slot}-of-{slots}"


def transactional_id(source: str, target: str, topic: str, partition: int, slots: int = COPY_SLOTS) -> str:
    """The transactional.id that writes the copy of a source partition: its slot's."""
    return slot_transactional_id(source, target, writer_slot(topic, partition, slots), slots)


def partition_transactional_id(source: str, target: str, topic: str, partition: int) -> str:
    """The id a mirrorflow without writer slots wrote a partition's copy under."""
    return f"{transactional_id_prefix(source, target)}{topic}-{partition}"


_created_lock = threading.Lock()
source_consumers_created = 0
"""Source consumers this process has created for copies (a measure of client set-ups)."""
writers_opened = 0
"""Slot writers this process has opened (each initialised a transactional producer)."""
older_writers_fenced = 0
"""Transactional ids of older kinds of writer this process has fenced (see _SlotWriter)."""


class _PooledConsumer:
    """A source consumer of the pool, and where its errors go: its librdkafka error callback
    is fixed when it is created, so it reports to whichever attempt's source watch holds the
    consumer now, and counts what it reported during that lease."""

    def __init__(self, job: CopyJob) -> None:
        global source_consumers_created
        self.watch: ClusterWatch | None = None
        self.errors = 0
        self.topics: set[str] = set()
        self.consumer = Consumer({**source_consumer_config(job), "error_cb": self._on_error})
        with _created_lock:
            source_consumers_created += 1

    def _on_error(self, error: KafkaError) -> None:
        # Called from consume(), in the thread of the attempt that holds the consumer.
        self.errors += 1
        if self.watch is not None:
            self.watch.on_error(error)


class SharedClients:
    """What one worker reuses across the partitions of its share: the progress reader (read
    once, then kept up to date), the partition counts of the progress topic and of the remote
    topics, the producer of source-side offset-syncs (idempotent, with no identity of its own;
    flushed at the end of each partition, which counts its own unsent syncs) and a pool of
    source consumers. Target producers belong to writer slots (see _SlotWriter): one per slot
    the worker copies, whose init_transactions fences the slot's older writers.

    A source consumer copies one partition at a time: an attempt takes one from the pool
    (`source_consumer`), assigns its partition, and gives it back (`give_back`) unassigned and
    drained, so the next partition's copy sees nothing of this one. A consumer that reported an
    error, or whose attempt failed, is closed instead. With up to SMALL_SPAN_THREADS partitions
    copied side by side, a worker creates about that many consumers, not one per partition."""

    def __init__(self, job: CopyJob) -> None:
        self.job = job
        self.progress = ProgressReader(job.target_consumer, job.progress_topic, job.source)
        self.progress_partitions: int | None = None
        self._sync_producer: Producer | None = None
        self._sync_watch: ClusterWatch | None = None
        self._lock = threading.Lock()
        self._idle: list[_PooledConsumer] = []
        self.consumers_created = 0
        self._remote_partitions: dict[str, int] = {}
        self.large = threading.Semaphore(1)
        """Held while a large span (see SMALL_SPAN) is copied: one at a time per worker."""
        self.unreachable: UnitResult | None = None
        """The first copy of the worker that found a cluster unreachable."""

    def remote_partitions(self, producer: Producer, topic: str, partition: int, watch: ClusterWatch) -> int:
        """Partitions of remote `topic`: asked once per worker, and again when `partition` is
        beyond the count known (the plan may have grown the topic since)."""
        with self._lock:
            known = self._remote_partitions.get(topic)
        if known is not None and known > partition:
            return known
        count = _partition_count(producer, topic, watch)
        with self._lock:
            self._remote_partitions[topic] = count
        return count

    def source_consumer(self, watch: ClusterWatch) -> _PooledConsumer:
        """A source consumer with no assignment, reporting its errors to `watch` (the attempt's
        source watch) until it is given back."""
        with self._lock:
            pooled = self._idle.pop() if self._idle else None
            if pooled is None:
                self.consumers_created += 1
        if pooled is None:
            pooled = _PooledConsumer(self.job)
        pooled.watch = watch
        pooled.errors = 0
        return pooled

    def give_back(self, pooled: _PooledConsumer, *, reusable: bool) -> None:
        """Return a consumer after an attempt: unassigned and drained for the next partition when
        `reusable` and it reported no error meanwhile, closed otherwise."""
        reusable = reusable and pooled.errors == 0
        if reusable:
            try:
                # The copy pauses a partition it has read to the end; librdkafka keeps an
                # application's pause through unassign, so it is lifted first.
                assigned = pooled.consumer.assignment()
                if assigned:
                    pooled.consumer.resume(assigned)
                pooled.consumer.unassign()
                # Whatever the old assignment left queued (records, EOF events) goes now; the
                # copy loop also ignores any record of another partition (see _PartitionCopy).
                while pooled.consumer.consume(CONSUME_BATCH, timeout=0):
                    pass
            except (KafkaException, RuntimeError):
                reusable = False
            else:
                reusable = pooled.errors == 0
        pooled.watch = None
        if reusable:
            with self._lock:
                self._idle.append(pooled)
            return
        _close_quietly(pooled.consumer)

    def sync_producer(self, watch: ClusterWatch) -> Producer | None:
        job = self.job
        if not job.offset_syncs_topic or job.offset_syncs_on_target:
            return None
        with self._lock:
            if self._sync_producer is None:
                self._sync_watch = watch
                self._sync_producer = Producer(
                    {**watch.config(job.source_producer), "enable.idempotence": True, "acks": "all"}
                )
            return self._sync_producer

    def flush_syncs(self) -> int:
        """Send the offset-syncs still queued; how many could not be sent."""
        if self._sync_producer is None or self._sync_watch is None:
            return 0
        # With partitions copied side by side this waits for their syncs too, and syncs still
        # unsent when it gives up (the source unreachable) count for each partition waiting.
        try:
            return _flush(self._sync_producer, self._sync_watch)
        except ClusterUnreachable:
            return len(self._sync_producer)

    def close(self) -> None:
        self.flush_syncs()  # each unit flushed and counted its own; nothing is left here
        self.progress.close()
        with self._lock:
            idle, self._idle = self._idle, []
        for pooled in idle:
            _close_quietly(pooled.consumer)

    def __enter__(self) -> SharedClients:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _close_quietly(consumer: Consumer) -> None:
    with contextlib.suppress(KafkaException, RuntimeError):
        consumer.close()


SMALL_SPAN = 10_000
"""Spans with more pending offsets than this are "large": their copy is limited by the CPU, so a
worker copies one at a time (see SharedClients.large), beside any number of small ones."""


def copy_unit(job: CopyJob, span: PartitionSpan, shared: SharedClients | None = None) -> UnitResult:
    """Copy `span` with a writer of its own slot; never raises (the error is in the result).

    `shared`: the worker's clients, when it copies more partitions than this one."""
    if shared is None:
        with SharedClients(job) as own:
            return copy_units(job, [span], own)[0]
    return copy_units(job, [span], shared)[0]


def copy_units(job: CopyJob, spans: Sequence[PartitionSpan], shared: SharedClients) -> list[UnitResult]:
    """Copy spans of one writer slot one after another, with one writer that the first of them
    opens (fencing every older writer of the slot) and the rest reuse; results in `spans` order.

    Once a newer writer fenced the slot, the spans left are not tried: starting another writer
    would fence that one back, and the two would take turns. Once a copy found the source or the
    target unreachable (here or in another thread of the worker), the spans left fail at once
    with the same cause instead of each waiting out the same limit."""
    slots = {writer_slot(s.topic, s.partition) for s in spans}
    if len(slots) > 1:
        raise ValueError(f"copy_units takes the spans of one writer slot, got slots {sorted(slots)}")
    results: list[UnitResult] = []
    if not spans:
        return results
    writer = _SlotWriter(job, slots.pop(), shared)
    done: dict[int, UnitResult] = {}
    grouped_until = 0  # spans before this one were offered to a group (that copied or failed)
    try:
        index = 0
        while index < len(spans):
            span = spans[index]
            skipped = _not_tried(span, shared, writer)
            if skipped is not None:
                done[index] = skipped
                index += 1
                continue
            if index >= grouped_until and _groupable(job, span):
                group = _group_at(job, spans, index)
                grouped_until = index + len(group)
                if len(group) > 1:
                    outcome = _copy_group(job, group, shared, writer, spans[index:])
                    for offset, (result, finished) in enumerate(outcome):
                        if finished:
                            done[index + offset] = result
                        else:
                            # Cut short (a byte or time bound): on by itself from its progress.
                            done[index + offset] = _copy_with_retries(
                                job, spans[index + offset], shared, writer, spans[index + offset :], result
                            )
                    if outcome:  # one (result, finished) per span of the group
                        index += len(outcome)
                        continue
            # One by one: a large span, a group of one, or a group that failed (each of its
            # spans then finds its own error, or copies).
            if span.pending > SMALL_SPAN:
                with shared.large:
                    result = _copy_with_retries(job, span, shared, writer, spans[index:])
            else:
                result = _copy_with_retries(job, span, shared, writer, spans[index:])
            done[index] = result
            if result.unreachable:
                shared.unreachable = result
            index += 1
    finally:
        writer.close()
    return [done[i] for i in range(len(spans))]


def _not_tried(span: PartitionSpan, shared: SharedClients, writer: _SlotWriter) -> UnitResult | None:
    """The result of a span not to try: a cluster is known unreachable, or the slot was taken."""
    gone = shared.unreachable
    if gone is not None:
        return UnitResult.not_copied(
            span, f"not copied: {gone.error}", progress=span.progress, unreachable=gone.unreachable
        )
    if writer.fenced is not None:
        return UnitResult.not_copied(
            span,
            f"fenced: another writer took over {span.topic}-{span.partition} (a newer attempt or a "
            f"concurrent run of this flow took its writer slot while this one copied {writer.fenced}); "
            "not copied",
            progress=span.progress,
        )
    return None


GROUP_PARTITIONS = 32
"""Most partitions whose small spans share one transaction (see _copy_group)."""


def _groupable(job: CopyJob, span: PartitionSpan) -> bool:
    return job.exactly_once and span.pending <= min(SMALL_SPAN, job.max_records)


def _group_at(job: CopyJob, spans: Sequence[PartitionSpan], index: int) -> list[PartitionSpan]:
    """The groupable spans from `index` on that fit one transaction together: at most
    GROUP_PARTITIONS of them, with at most max_records offsets in all."""
    group: list[PartitionSpan] = []
    offsets = 0
    for span in spans[index : index + GROUP_PARTITIONS]:
        if not _groupable(job, span) or (group and offsets + span.pending > job.max_records):
            break
        group.append(span)
        offsets += span.pending
    return group


def _copy_group(
    job: CopyJob,
    group: Sequence[PartitionSpan],
    shared: SharedClients,
    writer: _SlotWriter,
    left: Sequence[PartitionSpan],
) -> list[tuple[UnitResult, bool]]:
    """Copy the small spans of `group` (one slot's) in one transaction: each partition's
    records, its progress and its offset-syncs, all committed together or not at all, so each
    partition keeps its data and progress atomic while a busy partition costs a share of one
    transaction instead of one of its own (a transaction's AddPartitionsToTxn, EndTxn and
    markers, and a reused producer's wait for the coordinator to finish its last one).

    The group's partitions are read with one assignment (see _fill_group). Returns (result,
    finished) per span, in order: a span that reading did not finish within chunk_seconds (the
    transaction must not outlive its timeout) or max_bytes comes back unfinished, its progress
    settled, to go on by itself. Any failure aborts the transaction and returns nothing: the
    group's spans are then copied one by one, each meeting (and reporting) its own error."""
    source_watch, target_watch = _watches(job)
    started = time.monotonic()
    deadline = started + chunk_seconds(job)
    # Per span taken: its result and its copy with the chunk read, or (None, None) when it had
    # nothing (left) to copy, or (None, True) when only its progress moves, to its end.
    staged: list[tuple[PartitionSpan, UnitResult, _PartitionCopy | None, _Chunk | bool | None]] = []
    pooled: _PooledConsumer | None = None
    sync_producer: Producer | None = None
    committed = False
    target_gone = False
    try:
        producer, _ = writer.open(left, target_watch)
        progress_partitions = shared.progress_partitions
        assert progress_partitions is not None  # writer.open found it
        producer.begin_transaction()
        reading: list[int] = []  # indexes into staged of the spans with records to read
        for span in group:
            if (
                shared.remote_partitions(producer, span.remote_topic, span.partition, target_watch)
                <= span.partition
            ):
                raise CopyError(f"remote topic {span.remote_topic} has no partition {span.partition}")
            result = UnitResult(
                span.topic, span.partition, span.remote_topic, span.start, span.end, attempts=1
            )
            if span.lost:
                result.count_lost(span.start - span.lost, span.start)
            stored = shared.progress.get(span.topic, span.partition)
            start = _resume_offset(span, stored)
            result.resumed_from = start
            result.progress = -1 if stored is None else stored.offset
            if start >= span.end:
                staged.append((span, result, None, True if _moves_progress(span, stored) else None))
                continue
            partition_copy = _PartitionCopy(
                job,
                span,
                producer,
                None,  # type: ignore[arg-type]  # the group's consumer, below
                None,
                progress_partitions,
                result,
                (source_watch, target_watch),
                _Refusal(),
            )
            partition_copy.grouped = True
            staged.append((span, result, partition_copy, _Chunk(last_processed=start - 1)))
            reading.append(len(staged) - 1)
        if reading:
            sync_producer = shared.sync_producer(source_watch)
            pooled = shared.source_consumer(source_watch)
            consumer = pooled.consumer
            for index in reading:
                copy_of = staged[index][2]
                assert copy_of is not None
                copy_of.consumer, copy_of.sync_producer = consumer, sync_producer
                if copy_of.span.topic not in pooled.topics:
                    _topic_metadata(consumer, copy_of.span.topic, source_watch)
                    pooled.topics.add(copy_of.span.topic)
            copy_started = time.monotonic()
            _fill_group(job, [staged[i] for i in reading], consumer, source_watch, deadline)
            for index in reading:
                staged[index][1].copy_seconds = round(time.monotonic() - copy_started, 3)
        if _flush(producer, target_watch):
            raise CopyError("records were not acknowledged in time")
        outgoing: list[SyncRecords] = []
        for span, _, partition_copy, chunk in staged:
            if partition_copy is None:
                if chunk is True:
                    _stage_progress(job, span, producer, span.end - 1, progress_partitions, [])
                outgoing.append([])
                continue
            assert isinstance(chunk, _Chunk)
            if chunk.processed == 0 and not chunk.reached_end:
                outgoing.append([])  # not reached before the deadline: goes on by itself
                continue
            downs = partition_copy._downstream_offsets(chunk)
            if downs is None:
                # Another writer's records among ours: copied one by one, reporting each record.
                raise CopyError(
                    f"{span.remote_topic}-{span.partition} has records of another writer among the copy's"
                )
            feed_runs(partition_copy.emitter, chunk.ups, downs)
            partition_copy.emitter.boundary()
            syncs = partition_copy.emitter.drain() if job.offset_syncs_topic else []
            outgoing.append(
                _stage_progress(job, span, producer, chunk.last_processed, progress_partitions, syncs)
            )
        _retrying(producer.commit_transaction, target_watch, "commit_transaction")
        committed = True
    except ClusterUnreachable as exc:
        target_gone = exc.alias == job.target
        log.debug("copying %d partitions in one transaction failed (%s); one by one now", len(group), exc)
    except KafkaException as exc:
        if _fenced(exc):
            writer.fenced = f"{group[0].topic}-{group[0].partition} and {len(group) - 1} more"
        log.debug("copying %d partitions in one transaction failed (%s); one by one now", len(group), exc)
    except (CopyError, ProgressReadError) as exc:
        log.debug("copying %d partitions in one transaction failed (%s); one by one now", len(group), exc)
    except Exception:  # copy_units never raises: one by one, each span reports what it meets
        log.exception(
            "copying %d partitions in one transaction failed unexpectedly; one by one now", len(group)
        )
    finally:
        if pooled is not None:
            shared.give_back(pooled, reusable=committed)
        if not committed:
            writer.discard(reachable=not target_gone)
    if not committed:
        return []
    outcome: list[tuple[UnitResult, bool]] = []
    unfinished: list[tuple[str, int]] = []
    for (span, result, _, chunk), records in zip(staged, outgoing, strict=True):
        finished = True
        if chunk is True:
            result.progress = span.end - 1
        elif isinstance(chunk, _Chunk):
            result.records = len(chunk.ups)
            result.bytes = chunk.bytes
            result.skipped_loops = chunk.skipped_loops
            result.retimed = chunk.retimed
            result.progress = chunk.last_processed
            finished = chunk.reached_end
            if not finished:
                unfinished.append((span.topic, span.partition))
        _send_source_syncs(job, sync_producer, records)
        result.offset_syncs = len(records)
        outcome.append((result, finished))
    outcome[-1][0].transactions = 1
    if sync_producer is not None:
        outcome[-1][0].offset_sync_errors += shared.flush_syncs()
    if unfinished:
        # Their copy goes on from what this transaction committed.
        shared.progress.settle(unfinished)
    seconds = round(time.monotonic() - started, 3)
    for result, _ in outcome:
        result.seconds = seconds
    return outcome


def _fill_group(
    job: CopyJob,
    reading: Sequence[tuple[PartitionSpan, UnitResult, _PartitionCopy | None, _Chunk | bool | None]],
    consumer: Consumer,
    watch: ClusterWatch,
    deadline: float,
) -> None:
    """Read the partitions of a group with one assignment, so each fetch brings records of all of
    them, and produce each partition's records into its chunk (_PartitionCopy._take) as they
    come. A partition read to its end is paused; reading stops early, leaving the rest of the
    group's partitions unfinished, once it took until `deadline` or read max_bytes."""
    copies: dict[tuple[str, int], tuple[_PartitionCopy, _Chunk]] = {}
    for _, _, partition_copy, chunk in reading:
        assert partition_copy is not None and isinstance(chunk, _Chunk)
        copies[(partition_copy.span.topic, partition_copy.span.partition)] = (partition_copy, chunk)
    ends = {where: partition_copy._end() for where, (partition_copy, _) in copies.items()}
    consumer.assign([TopicPartition(t, p, chunk.last_processed + 1) for (t, p), (_, chunk) in copies.items()])
    unread = set(copies)
    read_bytes = 0
    idle_since = time.monotonic()
    while unread and read_bytes < job.max_bytes:
        if time.monotonic() > deadline and any(chunk.processed for _, chunk in copies.values()):
            break
        # As in _fill: never ask for more than the offsets left, or consume() waits its timeout.
        left = sum(ends[where] - copies[where][1].last_processed - 1 for where in unread)
        batch = consumer.consume(max(1, min(CONSUME_BATCH, left)), timeout=CONSUME_TIMEOUT_S)
        if not batch:
            watch.check()
            if time.monotonic() - idle_since > job.stall_timeout_s:
                partition_copy, chunk = copies[min(unread)]
                raise CopyError(partition_copy._stalled(chunk))
            continue
        idle_since = time.monotonic()
        watch.alive()
        by_partition: dict[tuple[str, int], list[Message]] = {}
        for message in batch:
            topic = message.topic()
            if topic is None:
                error = message.error()
                if error is not None:
                    raise KafkaException(error)
                continue
            by_partition.setdefault((topic, message.partition()), []).append(message)
        for where, messages in by_partition.items():
            if where not in unread:
                continue  # read to its end already, or left from the consumer's last assignment
            if read_bytes >= job.max_bytes:
                break  # what is left of the batch is read again by the spans' own copies
            partition_copy, chunk = copies[where]
            before = chunk.bytes
            partition_copy._take(chunk, messages, ends[where], exact=False)
            read_bytes += chunk.bytes - before
            if chunk.reached_end:
                unread.discard(where)
                consumer.pause([TopicPartition(*where)])
    for where, (_, chunk) in copies.items():
        if chunk.reached_end:
            chunk.last_processed = max(chunk.last_processed, ends[where] - 1)


def _copy_with_retries(
    job: CopyJob,
    span: PartitionSpan,
    shared: SharedClients,
    writer: _SlotWriter,
    left: Sequence[PartitionSpan],
    result: UnitResult | None = None,
) -> UnitResult:
    """Copy `span`, retrying transient failures (each failed attempt drops the slot's writer; the
    next one opens it again, which fences the dropped one and settles progress anew).
    `result`: what a group transaction already copied of the span, to go on from."""
    resumed_from = None if result is None else result.resumed_from
    if result is None:
        result = UnitResult(span.topic, span.partition, span.remote_topic, span.start, span.end)
        if span.lost:
            result.count_lost(span.start - span.lost, span.start)
    started = time.monotonic() - result.seconds
    refusal = _Refusal()
    attempt = 0
    while attempt < ATTEMPTS:
        attempt += 1
        result.attempts = attempt
        try:
            _copy_attempt(job, span, result, refusal, shared, writer, left)
            result.error = None
            break
        except RecordRefused as exc:
            # Finding the refused record takes up to two more attempts that are not retries.
            result.error = f"the target refused a record as too large: {exc}"
            refusal.steps += 1
            if refusal.steps > 2:
                break
            attempt -= 1
        except KafkaException as exc:
            error = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
            result.error = _describe(exc)
            fenced = _fenced(exc)
            if fenced or attempt == ATTEMPTS or (error is not None and error.fatal() and not fenced):
                if fenced:
                    result.error = (
                        f"fenced: another writer took over {span.topic}-{span.partition} "
                        "(a newer attempt or a concurrent run of this flow), or the broker aborted a "
                        "transaction of this copy that outlived the producer's transaction.timeout.ms"
                    )
                break
            time.sleep(min(5.0, 0.5 * attempt))
        except ClusterUnreachable as exc:
            result.error = str(exc)
            result.unreachable = exc.alias
            break
        except CopyError as exc:
            result.error = str(exc)
            break
        except ProgressReadError as exc:
            result.error = f"reading progress failed: {exc}"
            if attempt == ATTEMPTS:
                break
            time.sleep(min(5.0, 0.5 * attempt))
        except Exception as exc:  # the unit's contract: it fails with its cause, it never raises
            log.exception("copying %s-%s failed unexpectedly", span.topic, span.partition)
            result.error = f"unexpected {type(exc).__name__}: {exc}"
            break
    if resumed_from is not None and result.resumed_from >= 0:
        result.resumed_from = resumed_from  # where the run's copy of it began
    result.seconds = round(time.monotonic() - started, 3)
    return result


class CopyError(RuntimeError):
    """A failure that retrying cannot fix (for example the remote partition does not exist)."""


class RecordRefused(Exception):
    """The target refused a record of the partition as too large (MSG_SIZE_TOO_LARGE)."""


@dataclass
class _Refusal:
    """What the attempts of one unit learnt about a record the target refuses as too large.

    The broker refuses a whole batch, so the attempt that meets the refusal cannot tell which
    record it was, and its transactional producer must go (the transaction needs an epoch bump).
    The next attempt copies one record at a time (`solo`) until the target refuses one: its
    offset becomes `stop_at`. The attempt after that copies the records before it in chunks and
    fails the partition with `message`, which names the record and the setting to change."""

    solo: bool = False
    stop_at: int | None = None
    message: str = ""
    steps: int = 0


def _fenced(exc: KafkaException) -> bool:
    error = exc.args[0] if exc.args else None
    return isinstance(error, KafkaError) and error.code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED)


def _describe(exc: KafkaException) -> str:
    error = exc.args[0] if exc.args else None
    if isinstance(error, KafkaError):
        return f"{error.name()}: {error.str()}"
    return str(exc)


# librdkafka holds a client's connections to brokers it learns from the bootstrap metadata back
# for half of reconnect.backoff.ms ("sparse connections"; 50 ms at the default 100 ms). A copy
# makes a producer for each partition with work, so that wait was paid per partition (measured:
# 45 ms of a 55 ms first metadata request). A user's own setting wins.
COPY_RECONNECT_BACKOFF_MS = 20


def _new_client_config(config: dict[str, Any]) -> dict[str, Any]:
    if "reconnect.backoff.ms" not in config:
        ceiling = int(config.get("reconnect.backoff.max.ms", 10_000))
        config["reconnect.backoff.ms"] = min(COPY_RECONNECT_BACKOFF_MS, ceiling)
    return config


def _producer(job: CopyJob, watch: ClusterWatch, transactional: str | None) -> Producer:
    config = _new_client_config(
        {**watch.config(job.target_producer), "enable.idempotence": True, "acks": "all"}
    )
    # librdkafka refuses records above message.max.bytes (1,000,000 by default) itself, below
    # Kafka's own default limit: the target's topic limit is the one that must decide.
    config["message.max.bytes"] = max(int(config.get("message.max.bytes", 0)), COPY_REQUEST_BYTES)
    if transactional:
        config["transactional.id"] = transactional
    return Producer(config)


def _watches(job: CopyJob) -> tuple[ClusterWatch, ClusterWatch]:
    """(source, target) watches of one attempt."""
    return (
        ClusterWatch(
            job.source, str(job.source_consumer.get("bootstrap.servers", "")), job.unreachable_timeout_s
        ),
        ClusterWatch(
            job.target, str(job.target_producer.get("bootstrap.servers", "")), job.unreachable_timeout_s
        ),
    )


def _retrying(call: Callable[[float], Any], watch: ClusterWatch, what: str) -> Any:
    """Run a transactional call that may be called again after a timeout (init, commit) in
    short slices, so a cluster that went away is noticed within its unreachable limit."""
    deadline = time.monotonic() + CLIENT_TIMEOUT_S
    while True:
        try:
            result = call(WAIT_SLICE_S)
            watch.alive()
            return result
        except KafkaException as exc:
            error = exc.args[0] if exc.args else None
            if not (isinstance(error, KafkaError) and error.retriable()) or time.monotonic() > deadline:
                raise
            watch.check()
            log.debug("%s: retrying after %s", what, error)


def _flush(producer: Producer, watch: ClusterWatch, timeout_s: float = CLIENT_TIMEOUT_S) -> int:
    """producer.flush in short slices: returns what is still unsent after `timeout_s`, and raises
    ClusterUnreachable as soon as the cluster has been out of reach for its limit."""
    deadline = time.monotonic() + timeout_s
    remaining = served(producer.flush, 0)
    while remaining:
        before = remaining
        remaining = served(producer.flush, WAIT_SLICE_S)
        if remaining < before:
            watch.alive()
        watch.check()
        if time.monotonic() > deadline:
            break
    return remaining


def chunk_seconds(job: CopyJob) -> float:
    """How long one chunk may keep reading before it commits.

    A transaction that is still open after the producer's transaction.timeout.ms is aborted by
    the broker, and on a slow link a chunk bounded by records and bytes alone would then fail the
    same way on every run. Reading stops after a quarter of the timeout, which leaves the rest
    for the flush and the commit."""
    timeout_ms = float(job.target_producer.get("transaction.timeout.ms", DEFAULT_TRANSACTION_TIMEOUT_MS))
    return max(0.05, timeout_ms / 1000 / 4)


def source_consumer_config(job: CopyJob) -> dict[str, Any]:
    """The copy consumer's settings: the user's, over mirrorflow's defaults, under what the copy
    itself relies on (no group offsets, EOF events, its own group id)."""
    return {
        "isolation.level": "read_committed",
        **CONSUMER_DEFAULTS,
        **job.source_consumer,
        # The plan fixed where each span starts (the user's auto.offset.reset only decides that
        # for partitions with no progress). The copy never jumps by itself: an offset that is
        # gone is an error event, counted as lost to retention or failed, never skipped silently.
        "auto.offset.reset": "error",
        "group.id": f"mirrorflow-{job.source}->{job.target}",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "enable.partition.eof": True,
    }


def _as_planned(span: PartitionSpan, stored: Stored | None) -> bool:
    """Whether progress is still what the plan saw (offset and incarnation)."""
    if stored is None:
        return True
    return stored.offset == span.progress and stored.incarnation == span.progress_incarnation


def _moves_progress(span: PartitionSpan, stored: Stored | None) -> bool:
    """Whether a span with nothing (left) to copy must still write progress: to its end, when
    the plan's view still holds and progress is not there yet (auto.offset.reset=latest, records
    the source deleted before they were copied, a recreated topic: its progress is then -1 if
    the new topic is empty), so the next plan starts in the right place."""
    return (
        _as_planned(span, stored)
        and (span.end > 0 or bool(span.restarted))
        and (stored is None or stored.offset != span.end - 1 or bool(span.restarted))
    )


def _resume_offset(span: PartitionSpan, stored: Stored | None) -> int:
    """Where to start: the plan's start, unless progress moved since the plan was made (a retry
    of this run finished part of the span, or another writer did) — then right after it. A span
    that starts over (a recreated topic) compares incarnations too: the old topic's progress
    may hold the very offset that the copy of the new one has since reached."""
    if stored is None or _as_planned(span, stored):
        return span.start
    return max(span.start, stored.offset + 1)


def _topic_metadata(client: Producer | Consumer, topic: str, watch: ClusterWatch) -> Any:
    """One Metadata request for `topic` (None when the answer does not name it); a cluster
    that does not answer within the watch's limit is ClusterUnreachable."""
    try:
        metadata = client.list_topics(topic, timeout=watch.limit_s).topics.get(topic)
    except KafkaException as exc:
        error = exc.args[0] if exc.args else None
        if isinstance(error, KafkaError) and error.code() in (KafkaError._TRANSPORT, KafkaError._TIMED_OUT):
            raise ClusterUnreachable(watch.alias, watch.bootstrap, watch.limit_s, error.str()) from exc
        raise
    watch.alive()
    return metadata


def _init_transactions(producer: Producer, topic: str, watch: ClusterWatch) -> None:
    """init_transactions on a new producer, after a Metadata request that waits for a broker
    connection. A new client's first Metadata answer comes over its bootstrap connection, which
    librdkafka then closes for the brokers the answer names; init_transactions called before one
    of those is up finds "no brokers available for Transactions" and waits for the coordinator
    query timer, 500 ms (measured: one init in seven, 90 ms on average; 4 ms with this request)."""
    _topic_metadata(producer, topic, watch)
    _retrying(producer.init_transactions, watch, "init_transactions")


def _partition_count(producer: Producer, topic: str, watch: ClusterWatch) -> int:
    """Partitions of `topic` on the target. A topic the plan created moments ago may not have
    reached every broker yet (UNKNOWN_TOPIC_OR_PARTITION for a while): wait that out, briefly."""
    deadline = time.monotonic() + NEW_TOPIC_WAIT_S
    while True:
        metadata = _topic_metadata(producer, topic, watch)
        if metadata is not None and metadata.error is None and metadata.partitions:
            return len(metadata.partitions)
        unknown = metadata is None or (
            metadata.error is not None and metadata.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART
        )
        if not unknown or time.monotonic() > deadline:
            raise CopyError(f"topic {topic} is missing on the target cluster: {metadata and metadata.error}")
        time.sleep(0.1)


class _SlotWriter:
    """What writes one writer slot's partitions to the target for a worker: in exactly-once mode
    a transactional producer with the slot's id; in at-least-once mode an idempotent producer
    for the data and a transactional one with the slot's id for progress (see _fence).

    Opened by the first of the slot's partitions to be copied and kept for the rest, so a busy
    partition costs no client set-up, no InitProducerId and no coordinator lookup of its own.
    Opening fences every older writer of the slot's partitions, then settles their progress
    once: no older writer can commit any more. A failed attempt drops the writer; the next
    attempt opens it again (fencing the dropped one, and settling anew)."""

    def __init__(self, job: CopyJob, slot: int, shared: SharedClients) -> None:
        self.job, self.slot, self.shared = job, slot, shared
        self.transactional_id = slot_transactional_id(job.source, job.target, slot)
        self.producer: Producer | None = None
        self.fence: Producer | None = None
        self.fenced: str | None = None
        """The partition whose copy found the slot taken over by a newer writer."""

    def open(self, spans: Sequence[PartitionSpan], watch: ClusterWatch) -> tuple[Producer, Producer | None]:
        """(producer, at-least-once fence) for copying `spans`, the slot's partitions still to
        copy; opened (and their progress settled) unless already open."""
        if self.producer is not None:
            return self.producer, self.fence
        job, shared = self.job, self.shared
        producer = _producer(job, watch, self.transactional_id if job.exactly_once else None)
        fence = None
        try:
            # Metadata first: it brings up the broker connection, so init_transactions finds a
            # broker at once instead of retrying on librdkafka's 500 ms timer.
            # (Two Metadata answers before init_transactions: see _fence.)
            shared.progress_partitions = _partition_count(producer, job.progress_topic, watch)
            if job.exactly_once:
                _init_transactions(producer, job.progress_topic, watch)
            else:
                fence = _fence(job, self.transactional_id, watch)
        except BaseException:
            with contextlib.suppress(KafkaException, SystemError):
                producer.flush(0)
            raise
        self.producer, self.fence = producer, fence
        global writers_opened, older_writers_fenced
        with _created_lock:
            writers_opened += 1
        # Settled after the fence: no older writer of these partitions can commit any more.
        wanted = [(s.topic, s.partition) for s in spans]
        shared.progress.settle(wanted)
        older = self.legacy_ids(spans)
        if older:
            for transactional in older:
                _fence(job, transactional, watch)
            with _created_lock:
                older_writers_fenced += len(older)
            shared.progress.settle(wanted)
        return producer, fence

    def legacy_ids(self, spans: Sequence[PartitionSpan]) -> list[str]:
        """Other transactional ids that may still write these partitions: a partition whose
        progress was not written under COPY_SLOTS slots (or not written at all) may have a
        writer of an earlier mirrorflow, with a transactional.id per partition or of another
        slot count, still alive. Fenced once: the first commit here records the slot count."""
        job, progress = self.job, self.shared.progress
        ids: set[str] = set()
        for span in spans:
            stored = progress.get(span.topic, span.partition)
            slots = 0 if stored is None else stored.slots
            if slots == COPY_SLOTS:
                continue
            if slots:
                ids.add(transactional_id(job.source, job.target, span.topic, span.partition, slots))
            else:
                ids.add(partition_transactional_id(job.source, job.target, span.topic, span.partition))
        return sorted(ids)

    def discard(self, *, reachable: bool) -> None:
        """After a failed attempt: drop what it left unsent, abort its transaction now (so
        read_committed readers of the target are not held at it until transaction.timeout.ms)
        and let the clients go."""
        producer, fence = self.producer, self.fence
        self.producer = self.fence = None
        if producer is None:
            return
        # A fenced producer cannot abort: the writer that fenced it already did.
        reachable = reachable and self.fenced is None
        _abandon(self.job, self.transactional_id, producer, reachable=reachable)
        if fence is not None and reachable:
            _abort_quietly(fence, self.transactional_id)
        # Serve what callbacks are left; the attempt's own error is what gets reported.
        with contextlib.suppress(KafkaException, SystemError):
            producer.flush(0)

    def close(self) -> None:
        producer = self.producer
        self.producer = self.fence = None
        if producer is not None:
            with contextlib.suppress(KafkaException, SystemError):
                served(producer.flush, CLIENT_TIMEOUT_S)


def _copy_attempt(
    job: CopyJob,
    span: PartitionSpan,
    result: UnitResult,
    refusal: _Refusal,
    shared: SharedClients,
    writer: _SlotWriter,
    left: Sequence[PartitionSpan],
) -> None:
    source_watch, target_watch = _watches(job)
    pooled: _PooledConsumer | None = None
    sync_producer: Producer | None = None
    producer: Producer | None = None
    succeeded = False
    target_gone = False
    try:
        producer, fence = writer.open(left, target_watch)
        if (
            shared.remote_partitions(producer, span.remote_topic, span.partition, target_watch)
            <= span.partition
        ):
            raise CopyError(
                f"remote topic {span.remote_topic} has no partition {span.partition}; "
                "the plan step grows remote partitions, so rerun it"
            )
        progress_partitions = shared.progress_partitions
        assert progress_partitions is not None  # writer.open found it
        stored = shared.progress.get(span.topic, span.partition)
        start = _resume_offset(span, stored)
        result.resumed_from = start
        result.progress = -1 if stored is None else stored.offset
        if start >= span.end:
            # Nothing to copy, but progress may have to move (auto.offset.reset=latest, records
            # the source deleted before they were copied, a recreated topic: its progress is
            # then -1 if the new topic is empty) so the next plan starts in the right place.
            if _moves_progress(span, stored):
                if job.exactly_once:
                    producer.begin_transaction()
                _commit_chunk(
                    job,
                    span,
                    producer,
                    None,
                    span.end - 1,
                    progress_partitions,
                    [],
                    result,
                    target_watch,
                    fence,
                )
        else:
            sync_producer = shared.sync_producer(source_watch)
            pooled = shared.source_consumer(source_watch)
            consumer = pooled.consumer
            if span.topic not in pooled.topics:
                # A consumer assigned a partition of a topic it has no metadata for finds the
                # leader on librdkafka's timers (measured: about 0.9 s); asking first takes one
                # Metadata request, as a new consumer's start-up did.
                _topic_metadata(consumer, span.topic, source_watch)
                pooled.topics.add(span.topic)
            consumer.assign([TopicPartition(span.topic, span.partition, start)])
            copy_started = time.monotonic()
            try:
                _PartitionCopy(
                    job,
                    span,
                    producer,
                    consumer,
                    sync_producer,
                    progress_partitions,
                    result,
                    (source_watch, target_watch),
                    refusal,
                    fence,
                ).run(start)
            finally:
                result.copy_seconds = round(result.copy_seconds + time.monotonic() - copy_started, 3)
        succeeded = True
    except ClusterUnreachable as exc:
        target_gone = exc.alias == job.target
        raise
    except KafkaException as exc:
        if _fenced(exc):
            writer.fenced = f"{span.topic}-{span.partition}"
        raise
    finally:
        if pooled is not None:
            shared.give_back(pooled, reusable=succeeded)
        if sync_producer is not None:
            result.offset_sync_errors += shared.flush_syncs()
        if not succeeded:
            writer.discard(reachable=not target_gone)
        elif producer is not None:
            served(producer.flush, CLIENT_TIMEOUT_S)


def _fence(job: CopyJob, transactional: str, watch: ClusterWatch) -> Producer:
    """A producer with the transactional.id `transactional`, initialised: every older producer
    with that id is fenced (its open transaction aborted). At-least-once writes progress (and
    target-side offset-syncs) through the slot's: a writer fenced since can write no progress
    any more, so two writers of one partition never copy side by side for more than the chunk
    in flight, and a writer that wakes from a pause never moves progress back. The data itself
    goes through the idempotent producer, outside transactions. Also how older kinds of writer
    are fenced (see _SlotWriter.legacy_ids)."""
    config = {
        **watch.config(job.target_producer),
        "enable.idempotence": True,
        "acks": "all",
        "transactional.id": transactional,
    }
    fence = Producer(_new_client_config(config))
    # Its first Metadata request brings up the connection, the second waits for a named broker.
    _topic_metadata(fence, job.progress_topic, watch)
    _init_transactions(fence, job.progress_topic, watch)
    return fence


def _abort_quietly(producer: Producer, transactional: str) -> None:
    try:
        producer.abort_transaction(ABORT_TIMEOUT_S)
    except KafkaException as exc:
        error = exc.args[0] if exc.args else None
        if not (isinstance(error, KafkaError) and error.code() == KafkaError._STATE):
            log.warning("could not abort the progress transaction of %s: %s", transactional, exc)


def _abandon(job: CopyJob, transactional: str, producer: Producer, *, reachable: bool) -> None:
    """Drop what a failed attempt left unsent and abort its transaction now. When the producer
    was fenced or hit a fatal error it cannot abort; the writer that fenced it (or the
    coordinator, at the timeout) already did. Nor can it when the target is unreachable: the
    coordinator aborts the transaction at its timeout."""
    producer.purge()
    if not job.exactly_once or not reachable:
        return
    try:
        producer.abort_transaction(ABORT_TIMEOUT_S)
    except KafkaException as exc:
        error = exc.args[0] if exc.args else None
        if isinstance(error, KafkaError) and error.code() == KafkaError._STATE:
            return  # no transaction was open
        log.warning(
            "could not abort the open transaction of %s (%s); the broker aborts it after transaction.timeout.ms",
            transactional,
            exc,
        )


class _Reports:
    """Target offsets of the records produced with this as their delivery callback, in produce
    order: with one partition and an idempotent producer, reports arrive in that order."""

    __slots__ = ("offsets", "errors")

    def __init__(self) -> None:
        self.offsets: list[int] = []
        self.errors: list[KafkaError] = []

    def __call__(self, error: KafkaError | None, message: Message) -> None:
        if error is not None:
            self.errors.append(error)
        else:
            self.offsets.append(message.offset())


@dataclass
class _Chunk:
    """One transaction's records as produced, before they are known to be durable."""

    last_processed: int
    ups: list[int] = field(default_factory=list)
    reports: _Reports = field(default_factory=_Reports)
    reported_at: list[int] = field(default_factory=list)  # indexes into ups; empty when every record reports
    bytes: int = 0
    skipped_loops: int = 0
    retimed: int = 0
    processed: int = 0  # offsets read, records skipped as loops included
    reached_end: bool = False
    refused: KafkaError | None = None  # the record the target refused as too large (solo mode)


def _too_large(exc: KafkaException) -> bool:
    error = exc.args[0] if exc.args else None
    return isinstance(error, KafkaError) and error.code() == KafkaError.MSG_SIZE_TOO_LARGE


class _PartitionCopy:
    """The copy loop of one partition, chunk after chunk, with clients already set up."""

    def __init__(
        self,
        job: CopyJob,
        span: PartitionSpan,
        producer: Producer,
        consumer: Consumer,
        sync_producer: Producer | None,
        progress_partitions: int,
        result: UnitResult,
        watches: tuple[ClusterWatch, ClusterWatch],
        refusal: _Refusal,
        fence: Producer | None = None,
    ) -> None:
        self.job = job
        self.source_watch, self.target_watch = watches
        self.span = span
        self.producer = producer
        self.consumer = consumer
        self.sync_producer = sync_producer
        self.progress_partitions = progress_partitions
        self.result = result
        self.emitter = DenseSyncEmitter()
        self.chunk_seconds = chunk_seconds(job)
        # For records that carry no provenance yet, the header value is the same but for the
        # offset: `prefix + offset + suffix`, as policy.provenance lays it out.
        self.stamp: tuple[bytes, bytes] | None = None
        if job.provenance:
            self.stamp = fresh_stamp(job.source, span.topic, span.partition)
        self.refusal = refusal
        self.fence = fence
        self.grouped = False
        """Read beside other partitions of a group (see _fill_group): the consumer is not its own."""

    def run(self, start: int) -> None:
        # At-least-once cannot abort a chunk, so it can never copy one again: it reports per record.
        # After a refusal (see _Refusal) every record reports too, one at a time.
        refusal = self.refusal
        exact = not self.job.exactly_once or refusal.solo
        position = start
        while True:
            if refusal.stop_at is not None and position >= refusal.stop_at:
                raise CopyError(refusal.message)
            if self.job.exactly_once:
                self.producer.begin_transaction()
            chunk = self._fill(position, exact)
            if chunk.reached_end:
                # Nothing more to read here: without a pause the consumer goes on fetching the
                # partition's end (every fetch.wait.max.ms) while the chunk flushes and commits,
                # which took 8 empty fetches per partition on a busy broker.
                self.consumer.pause([TopicPartition(self.span.topic, self.span.partition)])
            try:
                _flush(self.producer, self.target_watch)
                if chunk.refused is not None:
                    raise KafkaException(chunk.refused)
                downs = self._downstream_offsets(chunk)
                if downs is not None:
                    self._commit(chunk, downs)
            except KafkaException as exc:
                if _too_large(exc) and (chunk.refused is not None or not refusal.solo):
                    # The producer must go (its transaction needs an epoch bump); the next
                    # attempt copies one record at a time, or up to the refused record.
                    refusal.solo = True
                    raise RecordRefused(str(exc)) from exc
                raise
            if downs is None:
                _retrying(self.producer.abort_transaction, self.target_watch, "abort_transaction")
                if chunk.reached_end:
                    self.consumer.resume([TopicPartition(self.span.topic, self.span.partition)])
                self.consumer.seek(TopicPartition(self.span.topic, self.span.partition, position))
                self.result.interleaved_chunks += 1
                exact = True
                continue
            position = chunk.last_processed + 1
            if chunk.reached_end:
                if refusal.stop_at is not None:
                    raise CopyError(refusal.message)
                return

    def _fill(self, position: int, exact: bool) -> _Chunk:
        """Consume from `position` and produce one chunk. Only the chunk's first record and each
        batch's last produced record report back, unless `exact` asks for every one."""
        job, span = self.job, self.span
        end = self._end()
        partition = span.partition
        chunk = _Chunk(last_processed=position - 1)
        idle_since = time.monotonic()
        deadline = time.monotonic() + self.chunk_seconds
        while (
            chunk.processed < job.max_records
            and chunk.bytes < job.max_bytes
            and not chunk.reached_end
            and (chunk.processed == 0 or time.monotonic() < deadline)
            and chunk.refused is None
        ):
            # consume() returns before its timeout only once it has as many messages as asked for
            # (an EOF event counts), so never ask for more than the span's offsets left, and keep
            # the timeout short for a tail that offset gaps leave shorter still.
            wanted = min(CONSUME_BATCH, job.max_records - chunk.processed, end - chunk.last_processed - 1)
            batch = self.consumer.consume(wanted, timeout=CONSUME_TIMEOUT_S)
            # The consumer may have copied another partition before (see SharedClients). librdkafka
            # drops what a partition fetched once it is unassigned, and the pool drains the queue
            # too; were anything of it still queued, it would come before this partition's own.
            if batch and (
                _foreign(batch[0], span.topic, partition) or _foreign(batch[-1], span.topic, partition)
            ):
                batch = [m for m in batch if not _foreign(m, span.topic, partition)]
            if not batch:
                self.source_watch.check()
                if time.monotonic() - idle_since > job.stall_timeout_s:
                    raise CopyError(self._stalled(chunk))
                continue
            idle_since = time.monotonic()
            self.source_watch.alive()
            self._take(chunk, batch, end, exact)
        if chunk.reached_end:
            chunk.last_processed = max(chunk.last_processed, end - 1)
        return chunk

    def _end(self) -> int:
        """Where this attempt's reading stops: the span's end, or a refused record."""
        stop_at = self.refusal.stop_at
        return self.span.end if stop_at is None else min(self.span.end, stop_at)

    def _stalled(self, chunk: _Chunk) -> str:
        span = self.span
        return (
            f"{span.topic}-{span.partition} returned nothing for {self.job.stall_timeout_s:.0f}s "
            f"at offset {chunk.last_processed + 1} before reaching {span.end}"
        )

    def _take(self, chunk: _Chunk, batch: list[Message], end: int, exact: bool) -> None:
        """Produce the records of `batch` (consumed from this partition, in order) into `chunk`,
        up to `end`; sets chunk.reached_end once the partition is read to it."""
        job, span = self.job, self.span
        refusal = self.refusal
        target = job.target
        remote, partition = span.remote_topic, span.partition
        stamp = self.stamp
        produce = self.producer.produce
        ups = chunk.ups
        reports = chunk.reports
        reported_at = chunk.reported_at
        processed = chunk.processed
        chunk_bytes = chunk.bytes
        skipped = chunk.skipped_loops
        retimed = chunk.retimed
        last_processed = chunk.last_processed
        reached_end = False
        last = None if exact else _last_copied(batch, end, target)
        for message in batch:
            error = message.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    if message.offset() >= end:
                        reached_end = True
                        break
                    continue
                if error.code() == KafkaError._AUTO_OFFSET_RESET:
                    resume = self._skip_deleted(
                        message.offset() if message.offset() >= 0 else last_processed + 1
                    )
                    last_processed = resume - 1
                    if resume >= end:
                        reached_end = True
                    break
                raise KafkaException(error)
            offset = message.offset()
            if offset >= end:
                reached_end = True
                break
            processed += 1
            last_processed = offset
            headers = message.headers()
            if headers is not None and _has_provenance(headers):
                try:
                    if is_loop(headers, target):
                        skipped += 1
                        continue
                    if stamp is not None:
                        headers = stamp_provenance(
                            headers,
                            source_alias=job.source,
                            topic=span.topic,
                            partition=partition,
                            offset=offset,
                        )
                except ProvenanceError as exc:
                    raise CopyError(
                        f"{span.topic}-{partition} offset {offset} carries a {PROVENANCE_HEADER} header "
                        f"this mirrorflow cannot read ({exc}); it cannot tell whether the record loops "
                        "back, so the partition stops there: remove or fix that header on the source, "
                        "or upgrade mirrorflow if a newer version wrote it"
                    ) from exc
            elif stamp is not None:
                header = (PROVENANCE_HEADER, stamp[0] + _pack_offset(offset) + stamp[1])
                headers = [header] if headers is None else [*headers, header]
            key = message.key()
            value = message.value()
            ts = message.timestamp()[1]
            if ts == 0:
                retimed += 1
            if exact:
                callback = reports
            elif message is last or not ups:
                callback = reports
                reported_at.append(len(ups))
            else:
                callback = None
            try:
                try:
                    produce(
                        remote,
                        value,
                        key,
                        partition,
                        on_delivery=callback,
                        timestamp=ts,
                        headers=headers,
                    )
                except BufferError:
                    self._produce_when_room(remote, value, key, partition, callback, ts, headers)
            except KafkaException as exc:
                if _too_large(exc):
                    raise CopyError(self._over_producer_limit(offset, key, value, headers)) from exc
                raise
            ups.append(offset)
            chunk_bytes += (len(key) if key else 0) + (len(value) if value else 0)
            if refusal.solo and refusal.stop_at is None and self._refused(chunk, offset, key, value, headers):
                last_processed = offset - 1
                break
        if not reached_end and last_processed >= end - 1 and chunk.refused is None:
            reached_end = True
        chunk.processed = processed
        chunk.bytes = chunk_bytes
        chunk.skipped_loops = skipped
        chunk.retimed = retimed
        chunk.last_processed = last_processed
        chunk.reached_end = reached_end

    def _over_producer_limit(self, offset: int, key: bytes | None, value: bytes | None, headers: Any) -> str:
        """librdkafka refuses a record above its own message.max.bytes in produce(), with the
        broker's error code (MSG_SIZE_TOO_LARGE, "Broker: Message size too large"), though no
        broker saw it: say which side refused and the key that raises the limit."""
        span, target = self.span, self.job.target
        size = (len(key) if key else 0) + (len(value) if value else 0)
        size += sum(len(name) + (len(v) if v else 0) for name, v in headers or ())
        limit = max(int(self.job.target_producer.get("message.max.bytes", 0)), COPY_REQUEST_BYTES)
        return (
            f"{span.topic}-{span.partition} offset {offset}: mirrorflow's producer refuses the record as too "
            f"large ({size:,} bytes, above its message.max.bytes of {limit:,}); the target cluster never saw "
            f"it: raise {target}.producer.message.max.bytes (or {target}.producer.max.request.size, which "
            f"mirrorflow maps to it) above the record's size, and the target brokers' "
            f"socket.request.max.bytes and {span.remote_topic}'s max.message.bytes with it, then run again "
            "(the partition's copy stops before this record)"
        )

    def _refused(
        self, chunk: _Chunk, offset: int, key: bytes | None, value: bytes | None, headers: Any
    ) -> bool:
        """In solo mode: send the record just produced and tell whether the target refused it as
        too large; if so it leaves the chunk, which then ends right before it."""
        _flush(self.producer, self.target_watch)
        errors = chunk.reports.errors
        if not errors or errors[-1].code() != KafkaError.MSG_SIZE_TOO_LARGE:
            return False
        chunk.refused = errors.pop()
        chunk.ups.pop()
        self.refusal.stop_at = offset
        size = (len(key) if key else 0) + (len(value) if value else 0)
        size += sum(len(name) + (len(v) if v else 0) for name, v in headers or ())
        span = self.span
        self.refusal.message = (
            f"{span.topic}-{span.partition} offset {offset}: the target refuses the record as too large "
            f"({size:,} bytes; its broker refused it, not mirrorflow's producer): raise max.message.bytes "
            f"of {span.remote_topic} on the target cluster {self.job.target} above that and run again; the "
            f"records before it have been copied (a topic without its own limit takes the brokers' "
            f"message.max.bytes; mirrorflow creates remote topics, and its topic config sync sets them, with "
            f"the source topic's limit plus {RECORD_HEADROOM} bytes; its producer allows records up to "
            f"{COPY_REQUEST_BYTES:,} bytes; broker: {chunk.refused.str()})"
        )
        return True

    def _skip_deleted(self, position: int) -> int:
        """The source no longer has `position`. If retention (or DeleteRecords) removed it, count
        what is gone up to the partition's earliest offset and read on from there; anything else
        (the partition now ends below it: a recreated topic) fails the partition."""
        span = self.span
        if self.grouped:
            # Moving this partition's position would take the others' assignment with it.
            raise CopyError(f"{span.topic}-{span.partition}: offset {position} is gone; copied by itself")
        low, high = watermarks(self.consumer, span.topic, span.partition)
        if position >= low:
            raise CopyError(
                f"{span.topic}-{span.partition}: offset {position} is out of range on the source, whose "
                f"offsets now run from {low} to {high}; the partition was truncated or the topic "
                "recreated, so the copy stops rather than guess where to go on"
            )
        resume = min(low, span.end)
        self.result.count_lost(position, resume)
        if resume < span.end:
            self.consumer.assign([TopicPartition(span.topic, span.partition, resume)])
        return resume

    def _produce_when_room(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None,
        partition: int,
        callback: _Reports | None,
        timestamp: int,
        headers: Any,
    ) -> None:
        while True:
            served(self.producer.poll, 0.01)
            self.target_watch.check()
            try:
                self.producer.produce(
                    topic,
                    value,
                    key,
                    partition,
                    on_delivery=callback,
                    timestamp=timestamp,
                    headers=headers,
                )
                return
            except BufferError:
                continue

    def _downstream_offsets(self, chunk: _Chunk) -> Sequence[int] | None:
        """Every produced record's target offset, or None when the chunk's records are not
        provably consecutive on the target (so they must be copied again, reporting each)."""
        reports = chunk.reports
        if reports.errors:
            raise KafkaException(reports.errors[0])
        count = len(chunk.ups)
        expected = len(chunk.reported_at) if chunk.reported_at else count
        if len(reports.offsets) != expected:
            raise CopyError(
                f"{expected - len(reports.offsets)} records to {self.span.remote_topic}-{self.span.partition} "
                "were not acknowledged"
            )
        if not chunk.reported_at:
            return reports.offsets
        offsets, marks = reports.offsets, chunk.reported_at
        if marks[-1] != count - 1:
            return None
        first = offsets[0]
        if any(offset - first != mark for offset, mark in zip(offsets, marks, strict=True)):
            return None
        return range(first, first + count)

    def _commit(self, chunk: _Chunk, downs: Sequence[int]) -> None:
        feed_runs(self.emitter, chunk.ups, downs)
        self.emitter.boundary()
        syncs = self.emitter.drain() if self.job.offset_syncs_topic else []
        _commit_chunk(
            self.job,
            self.span,
            self.producer,
            self.sync_producer,
            chunk.last_processed,
            self.progress_partitions,
            syncs,
            self.result,
            self.target_watch,
            self.fence,
        )
        self.result.records += len(chunk.ups)
        self.result.bytes += chunk.bytes
        self.result.skipped_loops += chunk.skipped_loops
        self.result.retimed += chunk.retimed


def feed_runs(emitter: DenseSyncEmitter, ups: Sequence[int], downs: Sequence[int]) -> None:
    """Give the emitter every run contiguous on both clusters, in order: the same syncs as
    feeding it every (upstream, downstream) pair, without a Python call per record."""
    count = len(ups)
    if count == 0:
        return
    if ups[-1] - ups[0] == count - 1 and downs[-1] - downs[0] == count - 1:
        runs = [(0, count - 1)]
    else:
        runs = []
        run_start = 0
        for i in range(1, count):
            if ups[i] - ups[i - 1] != 1 or downs[i] - downs[i - 1] != 1:
                runs.append((run_start, i - 1))
                run_start = i
        runs.append((run_start, count - 1))
    for first, last in runs:
        emitter.run(ups[first], downs[first], last - first + 1)


def _last_copied(batch: list[Message], end: int, target: str) -> Message | None:
    """The batch's last record that the copy loop will produce (usually the last one)."""
    for message in reversed(batch):
        if message.error() is None and message.offset() < end:
            headers = message.headers()
            try:
                if headers is not None and _has_provenance(headers) and is_loop(headers, target):
                    continue
            except ProvenanceError:
                pass  # the copy loop stops at this record and names it
            return message
    return None


def _foreign(message: Message, topic: str, partition: int) -> bool:
    """Whether a consumed message (or event) belongs to a partition other than the one copied."""
    name = message.topic()
    return name is not None and (name != topic or message.partition() != partition)


def _has_provenance(headers: list[tuple[str, Any]]) -> bool:
    return any(name.startswith(HEADER_PREFIX) for name, _ in headers)


def _commit_chunk(
    job: CopyJob,
    span: PartitionSpan,
    producer: Producer,
    sync_producer: Producer | None,
    progress: int,
    progress_partitions: int,
    syncs: list[SyncPoint],
    result: UnitResult,
    watch: ClusterWatch,
    fence: Producer | None = None,
) -> None:
    """Write progress (and target-side offset-syncs) and make the chunk durable. Exactly-once:
    in the chunk's transaction. At-least-once: once the data is acknowledged, in a transaction
    of the partition's fencing producer (see _fence)."""
    if fence is not None:
        remaining = _flush(producer, watch)
        if remaining:
            raise CopyError(f"{remaining} records were not acknowledged in time")
        fence.begin_transaction()
        producer = fence
    records = _stage_progress(job, span, producer, progress, progress_partitions, syncs)
    if job.exactly_once or fence is not None:
        _retrying(producer.commit_transaction, watch, "commit_transaction")
        result.transactions += 1
    else:
        remaining = _flush(producer, watch)
        if remaining:
            raise CopyError(f"{remaining} progress/offset-sync records were not acknowledged in time")
    _send_source_syncs(job, sync_producer, records)
    result.offset_syncs += len(records)
    result.progress = progress


SyncRecords = list[tuple[OffsetSync, list[tuple[str, bytes]]]]


def _stage_progress(
    job: CopyJob,
    span: PartitionSpan,
    producer: Producer,
    progress: int,
    progress_partitions: int,
    syncs: list[SyncPoint],
) -> SyncRecords:
    """Produce the partition's progress record (and target-side offset-syncs) into the open
    transaction; the offset-syncs as records, for the source side once it commits."""
    key, value, partition = progress_record(
        job.source,
        span.topic,
        span.partition,
        progress,
        progress_partitions,
        span.incarnation,
        COPY_SLOTS,
    )
    producer.produce(job.progress_topic, key=key, value=value, partition=partition)
    records = [(OffsetSync(span.topic, span.partition, s.upstream, s.downstream), s.headers()) for s in syncs]
    if job.offset_syncs_on_target and job.offset_syncs_topic:
        _produce_syncs(producer, job.offset_syncs_topic, records)
    return records


def _send_source_syncs(job: CopyJob, sync_producer: Producer | None, records: SyncRecords) -> None:
    if sync_producer is None or not records or not job.offset_syncs_topic:
        return
    _produce_syncs(sync_producer, job.offset_syncs_topic, records)
    sync_producer.poll(0)


def _produce_syncs(producer: Producer, topic: str, records: SyncRecords) -> None:
    for sync, headers in records:
        producer.produce(topic, key=sync.key_bytes(), value=sync.value_bytes(), partition=0, headers=headers)
