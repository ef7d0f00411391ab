"""One partition's records as a transaction produces them: provenance, loop checks, the produce
call, and the target offsets its delivery reports prove.

Downstream offsets. The dense offset-syncs need the target offset of every copied record, and a
delivery report per record costs the copy loop about a tenth of all it spends on the record. So
in exactly-once mode only the chunk's first record and the last record of every consumed batch
report back. An idempotent producer appends one partition's records in produce order, each at
an offset of its own, so n records whose first and last offsets lie n - 1 apart occupy
consecutive offsets and every offset in between is known. When another writer's records landed
among ours (an identity-named remote topic that local clients also write, say), the check fails,
the transaction is aborted and the partition is copied again with a report per record (`exact`).
At-least-once mode cannot take a chunk back, so it always reports per record.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Message, Producer

from mirrorflow.kafka import ClusterWatch, served
from mirrorflow.policy.provenance import (
    HEADER_PREFIX,
    PROVENANCE_HEADER,
    ProvenanceError,
    fresh_stamp,
    is_loop,
    stamp_provenance,
)
from mirrorflow.replicate.copy.calls import is_too_large
from mirrorflow.replicate.copy.job import CopyError, CopyJob, UnitResult
from mirrorflow.replicate.copy.refusal import (
    Refusal,
    over_producer_limit,
    record_size,
    refused_by_target,
)
from mirrorflow.replicate.copy.resume import sync_incarnation
from mirrorflow.replicate.offset_syncs import DenseSyncEmitter
from mirrorflow.replicate.plan import PartitionSpan

_pack_offset = struct.Struct(">q").pack


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
class Chunk:
    """One transaction's records of one partition, as produced, before they are known durable."""

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
    first_timestamp: int = -1  # the source timestamp of the chunk's first produced record


@dataclass
class PartitionCopy:
    """One partition's copy across the transactions that carry it: where it stands, what it has
    learnt (a refused record, records of another writer among ours) and its result."""

    job: CopyJob
    span: PartitionSpan
    result: UnitResult
    refusal: Refusal = field(default_factory=Refusal)
    position: int = -1
    """The next source offset to copy; -1 until resume decides it."""
    committed: int | None = None
    """The progress this writer last committed for it (None: nothing yet)."""
    done: bool = False
    moves: bool = False
    """Nothing (left) to copy, but its progress must still move to its end (see resume.moves_progress)."""
    exact: bool = False
    """Every record reports its target offset (another writer's records were met among ours)."""
    landing: int | None = None
    """Where this writer's next record must land on the target when nobody else writes the
    remote partition (the offset after its last commit marker); None when unknown."""
    emitter: DenseSyncEmitter = field(default_factory=DenseSyncEmitter)
    stamp: tuple[bytes, bytes] | None = None
    incarnation: str = ""

    def __post_init__(self) -> None:
        # For records that carry no provenance yet, the header value is the same but for the
        # offset: `prefix + offset + suffix`, as policy.provenance lays it out.
        if self.job.provenance:
            self.stamp = fresh_stamp(self.job.source, self.span.topic, self.span.partition)
        self.incarnation = sync_incarnation(self.span)

    @property
    def end(self) -> int:
        return self.refusal.end(self.span.end)

    @property
    def pending(self) -> int:
        return max(0, self.end - self.position)

    @property
    def reports_every_record(self) -> bool:
        # At-least-once cannot abort a chunk, so it can never copy one again; after a refusal every
        # record reports too, one at a time.
        return self.exact or not self.job.exactly_once or self.refusal.solo

    def new_chunk(self) -> Chunk:
        return Chunk(last_processed=self.position - 1)

    def take(self, chunk: Chunk, batch: list[Message], producer: Producer, watch: ClusterWatch) -> None:
        """Produce the records of `batch` (consumed from this partition, in order) into `chunk`, up
        to the partition's end; sets chunk.reached_end once the partition is read to it. (The reader
        handles records the source no longer has before they get here.)

        The copy's hot path: about a third of a copied record's CPU is spent here, so it keeps to
        local names and passes produce() its arguments by position (topic, value, key, partition,
        callback, on_delivery, timestamp, headers), which saves parsing keywords per record."""
        job, span = self.job, self.span
        refusal = self.refusal
        end = self.end
        target = job.target
        remote, partition = span.remote_topic, span.partition
        stamp = self.stamp
        prefix, suffix = stamp if stamp is not None else (b"", b"")
        produce = producer.produce
        exact = self.reports_every_record
        solo = refusal.solo and refusal.stop_at is None
        ups = chunk.ups
        add_up = ups.append
        reports = chunk.reports
        reported_at = chunk.reported_at
        processed = chunk.processed
        chunk_bytes = chunk.bytes
        retimed = chunk.retimed
        last_processed = chunk.last_processed
        first_timestamp = chunk.first_timestamp
        reached_end = False
        last = None if exact else _last_copied(batch, end, target)
        for message in batch:
            if message.error() is not None:
                error = message.error()
                if error.code() == KafkaError._PARTITION_EOF:
                    if message.offset() >= end:
                        reached_end = True
                        break
                    continue
                raise KafkaException(error)
            offset = message.offset()
            if offset >= end:
                reached_end = True
                break
            processed += 1
            last_processed = offset
            headers = message.headers()
            if headers is None:
                if stamp is not None:
                    headers = [(PROVENANCE_HEADER, prefix + _pack_offset(offset) + suffix)]
            elif _has_provenance(headers):
                headers = self._restamp(headers, offset)
                if headers is None:
                    chunk.skipped_loops += 1
                    continue
            elif stamp is not None:
                headers = [*headers, (PROVENANCE_HEADER, prefix + _pack_offset(offset) + suffix)]
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
                produce(remote, value, key, partition, callback, None, ts, headers)
            except BufferError:
                _produce_when_room(producer, watch, remote, value, key, partition, callback, ts, headers)
            except KafkaException as exc:
                if is_too_large(exc):
                    size = record_size(key, value, headers)
                    raise CopyError(
                        over_producer_limit(span, target, job.target_producer, offset, size)
                    ) from exc
                raise
            if first_timestamp < 0:
                first_timestamp = ts
            add_up(offset)
            if key is not None:
                chunk_bytes += len(key)
            if value is not None:
                chunk_bytes += len(value)
            if solo and self._refused(chunk, producer, offset, key, value, headers):
                last_processed = offset - 1
                break
        if not reached_end and last_processed >= end - 1 and chunk.refused is None:
            reached_end = True
        chunk.processed = processed
        chunk.bytes = chunk_bytes
        chunk.retimed = retimed
        chunk.last_processed = last_processed
        chunk.first_timestamp = first_timestamp
        chunk.reached_end = reached_end

    def _restamp(self, headers: list[tuple[str, Any]], offset: int) -> list[tuple[str, Any]] | None:
        """The headers of a record that carries provenance already (it was copied to the source
        from elsewhere): None when it comes from the target (a loop), else this hop's stamp."""
        span, job = self.span, self.job
        try:
            if is_loop(headers, job.target):
                return None
            if self.stamp is None:
                return headers
            return stamp_provenance(
                headers, source_alias=job.source, topic=span.topic, partition=span.partition, offset=offset
            )
        except ProvenanceError as exc:
            raise CopyError(
                f"{span.topic}-{span.partition} offset {offset} carries a {PROVENANCE_HEADER} header "
                f"this mirrorflow cannot read ({exc}); it cannot tell whether the record loops "
                "back, so the partition stops there: remove or fix that header on the source, "
                "or upgrade mirrorflow if a newer version wrote it"
            ) from exc

    def _refused(
        self,
        chunk: Chunk,
        producer: Producer,
        offset: int,
        key: bytes | None,
        value: bytes | None,
        headers: Any,
    ) -> bool:
        """In solo mode: send the record just produced and tell whether the target refused it as
        too large; if so it leaves the chunk, which then ends right before it."""
        served(producer.flush, 30.0)
        errors = chunk.reports.errors
        if not errors or errors[-1].code() != KafkaError.MSG_SIZE_TOO_LARGE:
            return False
        chunk.refused = errors.pop()
        chunk.ups.pop()
        self.refusal.stop_at = offset
        self.refusal.message = refused_by_target(
            self.span, self.job.target, offset, record_size(key, value, headers), chunk.refused
        )
        return True

    def downstream_offsets(self, chunk: Chunk) -> Sequence[int] | None:
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


def _produce_when_room(
    producer: Producer,
    watch: ClusterWatch,
    topic: str,
    value: bytes | None,
    key: bytes | None,
    partition: int,
    callback: _Reports | None,
    timestamp: int,
    headers: Any,
) -> None:
    while True:
        served(producer.poll, 0.01)
        watch.check()
        try:
            producer.produce(topic, value, key, partition, callback, None, timestamp, headers)
            return
        except BufferError:
            continue


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


def _has_provenance(headers: list[tuple[str, Any]]) -> bool:
    return any(name.startswith(HEADER_PREFIX) for name, _ in headers)
