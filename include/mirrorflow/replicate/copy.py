"""Copy one source partition's span to the same partition number of its remote topic.

Exactly-once (the default): the producer's transactional.id is stable per (flow, topic,
partition), so starting a copy fences any older writer of that partition (a retried Spark task,
a zombie, a concurrent run) and aborts its open transaction. Progress is then read back settled
(see progress.py) and the copy resumes right after it. Each chunk of at most `max_records`
offsets / `max_bytes` bytes is one transaction holding the data, the new progress and (when
offset-syncs live on the target) the offset-syncs, so the target never holds data without its
progress or progress without its data.

At-least-once: the same loop with an idempotent producer; data is flushed before progress is
written, so a crash re-copies at most the chunk in flight.

Records keep key, value (null included), headers and timestamp; mirrorflow's provenance headers
are added when enabled, and a record whose provenance shows it came from the target cluster is
not copied back (loop prevention that works with identity topic names).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import (
    TIMESTAMP_NOT_AVAILABLE,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)

from mirrorflow.mm2.formats import OffsetSync
from mirrorflow.policy.provenance import HEADER_PREFIX, is_loop, stamp_provenance
from mirrorflow.replicate.offset_syncs import DenseSyncEmitter, SyncPoint
from mirrorflow.replicate.plan import PartitionSpan
from mirrorflow.replicate.progress import progress_record, read_progress

CONSUME_BATCH = 2000
ATTEMPTS = 3
CLIENT_TIMEOUT_S = 60.0


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


@dataclass
class UnitResult:
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
    transactions: int = 0
    offset_syncs: int = 0
    offset_sync_errors: int = 0
    attempts: int = 0
    seconds: float = 0.0
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


def transactional_id(source: str, target: str, topic: str, partition: int) -> str:
    return f"mirrorflow-{source}->{target}-{topic}-{partition}"


def copy_unit(job: CopyJob, span: PartitionSpan) -> UnitResult:
    """Copy `span`, retrying transient failures; never raises (the error is in the result)."""
    result = UnitResult(span.topic, span.partition, span.remote_topic, span.start, span.end)
    started = time.monotonic()
    for attempt in range(1, ATTEMPTS + 1):
        result.attempts = attempt
        try:
            _copy_attempt(job, span, result)
            result.error = None
            break
        except KafkaException as exc:
            error = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
            result.error = _describe(exc)
            fenced = error is not None and error.code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED)
            if fenced or attempt == ATTEMPTS or (error is not None and error.fatal() and not fenced):
                if fenced:
                    result.error = (
                        f"fenced: another writer took over {span.topic}-{span.partition} "
                        "(a newer attempt or a concurrent run of this flow)"
                    )
                break
            time.sleep(min(5.0, 0.5 * attempt))
        except CopyError as exc:
            result.error = str(exc)
            break
    result.seconds = round(time.monotonic() - started, 3)
    return result


class CopyError(RuntimeError):
    """A failure that retrying cannot fix (for example the remote partition does not exist)."""


def _describe(exc: KafkaException) -> str:
    error = exc.args[0] if exc.args else None
    if isinstance(error, KafkaError):
        return f"{error.name()}: {error.str()}"
    return str(exc)


class _Deliveries:
    """Downstream offsets in produce order: with one partition and an idempotent producer,
    delivery reports arrive in the order the records were produced."""

    __slots__ = ("offsets", "errors")

    def __init__(self) -> None:
        self.offsets: list[int] = []
        self.errors: list[KafkaError] = []

    def __call__(self, error: KafkaError | None, message: Message) -> None:
        if error is not None:
            self.errors.append(error)
        else:
            self.offsets.append(message.offset())


def _producer(job: CopyJob, span: PartitionSpan) -> Producer:
    config = {**job.target_producer, "enable.idempotence": True, "acks": "all"}
    if job.exactly_once:
        config["transactional.id"] = transactional_id(job.source, job.target, span.topic, span.partition)
    return Producer(config)


def _consumer(job: CopyJob) -> Consumer:
    config = {
        "isolation.level": "read_committed",
        "auto.offset.reset": "earliest",
        **job.source_consumer,
        "group.id": f"mirrorflow-{job.source}->{job.target}",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "enable.partition.eof": True,
    }
    return Consumer(config)


def _resume_offset(span: PartitionSpan, stored: int | None) -> int:
    """Where to start: the plan's start, unless progress moved since the plan was made (a retry
    of this run finished part of the span, or another writer did) — then right after it."""
    if stored is None or stored == span.progress:
        return span.start
    return max(span.start, stored + 1)


def _partition_count(producer: Producer, topic: str) -> int:
    metadata = producer.list_topics(topic, timeout=CLIENT_TIMEOUT_S).topics.get(topic)
    if metadata is None or metadata.error is not None or not metadata.partitions:
        raise CopyError(f"topic {topic} is missing on the target cluster: {metadata and metadata.error}")
    return len(metadata.partitions)


def _copy_attempt(job: CopyJob, span: PartitionSpan, result: UnitResult) -> None:
    producer = _producer(job, span)
    consumer: Consumer | None = None
    sync_producer: Producer | None = None
    succeeded = False
    try:
        if job.exactly_once:
            producer.init_transactions(CLIENT_TIMEOUT_S)
        if _partition_count(producer, span.remote_topic) <= span.partition:
            raise CopyError(
                f"remote topic {span.remote_topic} has no partition {span.partition}; "
                "the plan step grows remote partitions, so rerun it"
            )
        progress_partitions = _partition_count(producer, job.progress_topic)
        stored = read_progress(
            job.target_consumer, job.progress_topic, job.source, only=[(span.topic, span.partition)]
        ).get((span.topic, span.partition))
        start = _resume_offset(span, stored)
        result.resumed_from = start
        result.progress = -1 if stored is None else stored
        if start >= span.end:
            # Nothing to copy, but progress may have to move (auto.offset.reset=latest, records
            # the source deleted before they were copied, a recreated topic) so the next plan
            # starts in the right place.
            planned_view = stored is None or stored == span.progress
            if planned_view and span.end > 0 and stored != span.end - 1:
                if job.exactly_once:
                    producer.begin_transaction()
                _commit_chunk(job, span, producer, None, span.end - 1, progress_partitions, [], result)
        else:
            if job.offset_syncs_topic and not job.offset_syncs_on_target:
                sync_producer = Producer({**job.source_producer, "enable.idempotence": True, "acks": "all"})
            consumer = _consumer(job)
            consumer.assign([TopicPartition(span.topic, span.partition, start)])
            _copy_chunks(job, span, start, producer, consumer, sync_producer, progress_partitions, result)
        succeeded = True
    finally:
        if consumer is not None:
            consumer.close()
        if sync_producer is not None:
            result.offset_sync_errors += sync_producer.flush(CLIENT_TIMEOUT_S)
        if not succeeded:
            # The next attempt's init_transactions aborts whatever this one left open.
            producer.purge()
        producer.flush(CLIENT_TIMEOUT_S if succeeded else 0)


def _copy_chunks(
    job: CopyJob,
    span: PartitionSpan,
    start: int,
    producer: Producer,
    consumer: Consumer,
    sync_producer: Producer | None,
    progress_partitions: int,
    result: UnitResult,
) -> None:
    emitter = DenseSyncEmitter()
    produce = producer.produce
    last_processed = start - 1
    reached_end = False
    idle_since = time.monotonic()
    while not reached_end:
        if job.exactly_once:
            producer.begin_transaction()
        deliveries = _Deliveries()
        ups: list[int] = []
        processed = 0
        chunk_bytes = 0
        while processed < job.max_records and chunk_bytes < job.max_bytes and not reached_end:
            batch = consumer.consume(min(CONSUME_BATCH, job.max_records - processed), timeout=0.5)
            if not batch:
                if time.monotonic() - idle_since > job.stall_timeout_s:
                    raise CopyError(
                        f"{span.topic}-{span.partition} returned nothing for {job.stall_timeout_s:.0f}s "
                        f"at offset {last_processed + 1} before reaching {span.end}"
                    )
                continue
            idle_since = time.monotonic()
            for message in batch:
                error = message.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        if message.offset() >= span.end:
                            reached_end = True
                            break
                        continue
                    raise KafkaException(error)
                offset = message.offset()
                if offset >= span.end:
                    reached_end = True
                    break
                processed += 1
                last_processed = offset
                headers = message.headers()
                if headers and _has_provenance(headers) and is_loop(headers, job.target):
                    result.skipped_loops += 1
                    continue
                if job.provenance:
                    headers = stamp_provenance(
                        headers,
                        source_alias=job.source,
                        topic=span.topic,
                        partition=span.partition,
                        offset=offset,
                    )
                key = message.key()
                value = message.value()
                ts_type, ts = message.timestamp()
                _produce(
                    produce,
                    producer,
                    span.remote_topic,
                    key,
                    value,
                    span.partition,
                    headers,
                    0 if ts_type == TIMESTAMP_NOT_AVAILABLE else ts,
                    deliveries,
                )
                ups.append(offset)
                chunk_bytes += (len(key) if key else 0) + (len(value) if value else 0)
            if not reached_end and last_processed >= span.end - 1:
                reached_end = True
        producer.flush(CLIENT_TIMEOUT_S)
        if deliveries.errors:
            raise KafkaException(deliveries.errors[0])
        if len(deliveries.offsets) != len(ups):
            raise CopyError(
                f"{len(ups) - len(deliveries.offsets)} records to {span.remote_topic}-{span.partition} "
                "were not acknowledged"
            )
        for up, down in zip(ups, deliveries.offsets, strict=True):
            emitter.record(up, down)
        emitter.boundary()
        if reached_end:
            last_processed = max(last_processed, span.end - 1)
        syncs = emitter.drain() if job.offset_syncs_topic else []
        _commit_chunk(job, span, producer, sync_producer, last_processed, progress_partitions, syncs, result)
        result.records += len(ups)
        result.bytes += chunk_bytes


def _has_provenance(headers: list[tuple[str, Any]]) -> bool:
    return any(name.startswith(HEADER_PREFIX) for name, _ in headers)


def _produce(
    produce: Callable[..., None],
    producer: Producer,
    topic: str,
    key: bytes | None,
    value: bytes | None,
    partition: int,
    headers: Any,
    timestamp: int,
    on_delivery: _Deliveries,
) -> None:
    while True:
        try:
            produce(
                topic,
                value=value,
                key=key,
                partition=partition,
                headers=headers,
                timestamp=timestamp,
                on_delivery=on_delivery,
            )
            return
        except BufferError:
            producer.poll(0.05)


def _commit_chunk(
    job: CopyJob,
    span: PartitionSpan,
    producer: Producer,
    sync_producer: Producer | None,
    progress: int,
    progress_partitions: int,
    syncs: list[SyncPoint],
    result: UnitResult,
) -> None:
    """Write progress (and target-side offset-syncs) and make the chunk durable."""
    key, value, partition = progress_record(
        job.source, span.topic, span.partition, progress, progress_partitions
    )
    producer.produce(job.progress_topic, key=key, value=value, partition=partition)
    records = [OffsetSync(span.topic, span.partition, s.upstream, s.downstream) for s in syncs]
    if job.offset_syncs_on_target and job.offset_syncs_topic:
        for sync in records:
            producer.produce(
                job.offset_syncs_topic, key=sync.key_bytes(), value=sync.value_bytes(), partition=0
            )
    if job.exactly_once:
        producer.commit_transaction(CLIENT_TIMEOUT_S)
        result.transactions += 1
    else:
        remaining = producer.flush(CLIENT_TIMEOUT_S)
        if remaining:
            raise CopyError(f"{remaining} progress/offset-sync records were not acknowledged in time")
    if sync_producer is not None:
        for sync in records:
            sync_producer.produce(
                job.offset_syncs_topic, key=sync.key_bytes(), value=sync.value_bytes(), partition=0
            )
        sync_producer.poll(0)
    result.offset_syncs += len(records)
    result.progress = progress
