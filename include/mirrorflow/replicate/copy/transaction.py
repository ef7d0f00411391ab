"""One transaction of N partitions of a slot (N = 1 included): the only way records reach the
target.

Exactly-once: the partitions' records, their progress and (when offset-syncs live on the target)
their offset-syncs go into one transaction of the slot's producer, committed together or not at
all; the target never holds data without its progress or progress without its data.
At-least-once: the records go through the idempotent producer and are flushed first; the progress
then commits in a transaction of the slot's id (see writer.SlotWriter), so a crash re-copies at
most the transaction in flight.

A commit that fails may still have happened (its answer was lost, the coordinator moved, a newer
writer's fencing waited for it to complete): its outcome is read back from progress, which holds
exactly what the transaction committed, before anything is counted or retried. What follows a
commit (counting, the source-side offset-syncs) never fails the copy.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass

from confluent_kafka import KafkaException, Producer

from mirrorflow.kafka import ClusterUnreachable, ClusterWatch
from mirrorflow.mm2.formats import OffsetSync
from mirrorflow.replicate.copy.calls import abort, flush_all, is_too_large, kafka_error, retrying
from mirrorflow.replicate.copy.chunk import Chunk, PartitionCopy, feed_runs
from mirrorflow.replicate.copy.clients import SharedClients
from mirrorflow.replicate.copy.held_syncs import SyncRecords, produce_syncs
from mirrorflow.replicate.copy.job import CopyError, CopyJob, Fenced
from mirrorflow.replicate.copy.reader import SourceReader
from mirrorflow.replicate.copy.refusal import RecordRefused
from mirrorflow.replicate.copy.writer import SlotWriter
from mirrorflow.replicate.phases import phase
from mirrorflow.replicate.progress import ProgressReadError, Stored, progress_record

log = logging.getLogger("mirrorflow.replicate.copy")


class Interleaved(Exception):
    """Another writer's records landed among a partition's records: its chunk is copied again,
    every record reporting its target offset."""

    def __init__(self, copies: Sequence[PartitionCopy]) -> None:
        super().__init__(", ".join(f"{c.span.remote_topic}-{c.span.partition}" for c in copies))
        self.copies = list(copies)


class ForeignWriter(Exception):
    """Records of another writer appeared in a remote partition only this flow writes, between
    this writer's own: a writer of an older kind still running (its id is fenced and the copy goes
    on from progress read again), a zombie of the at-least-once mode finishing its chunk in
    flight, or a client that should not write there (the partition fails after ATTEMPTS)."""

    def __init__(self, message: str, copy: PartitionCopy) -> None:
        super().__init__(message)
        self.copy = copy


class CommitUnknown(CopyError):
    """The commit failed and its outcome could not be read back."""


@dataclass
class _Staged:
    copy: PartitionCopy
    chunk: Chunk | None  # None: only its progress moves (to its end)
    last: int
    downs: Sequence[int]
    syncs: SyncRecords


def transact(
    job: CopyJob,
    copies: Sequence[PartitionCopy],
    shared: SharedClients,
    writer: SlotWriter,
    reader: SourceReader | None,
    watches: tuple[ClusterWatch, ClusterWatch],
) -> None:
    """Copy the next bounded piece of each of `copies` in one transaction; on success their
    positions, results and the writer's committed progress have moved. Raises on failure, the
    transaction aborted or decided not to have committed; the caller drops the writer's producer."""
    watch = watches[1]
    producer = writer.producer
    assert producer is not None and shared.progress_partitions is not None
    started = time.monotonic()
    exactly_once = job.exactly_once
    if exactly_once:
        producer.begin_transaction()
    chunks = [(c, c.new_chunk()) for c in copies if c.pending > 0]
    if chunks:
        assert reader is not None
        with phase("copy: read the source and produce"):
            reader.fill(job, chunks, producer, watch, started + job.chunk_seconds)
    with phase("copy: flush and check the records"):
        staged = _staged(job, copies, dict((id(c), chunk) for c, chunk in chunks), producer, writer, watch)
    if not staged:
        if exactly_once:
            abort(producer, watch)
        return
    commit = os.urandom(6).hex()
    with phase("copy: progress records"):
        outgoing = _stage_progress(job, staged, producer if exactly_once else writer.fence, shared, commit)
    with phase("copy: commit"):
        _commit(staged, producer if exactly_once else writer.fence, writer, shared, watch, commit)
    with phase("copy: after the commit (offset-syncs)"):
        _after_commit(job, staged, outgoing, shared, writer, time.monotonic() - started, commit)


def _staged(
    job: CopyJob,
    copies: Sequence[PartitionCopy],
    chunks: dict[int, Chunk],
    producer: Producer,
    writer: SlotWriter,
    watch: ClusterWatch,
) -> list[_Staged]:
    """Flush what was produced and decide, per partition, what the transaction commits."""
    reports = [chunk.reports for chunk in chunks.values()]
    try:
        flush_all(producer, watch, "records", lambda: sum(len(r.offsets) for r in reports))
        for copy in copies:
            chunk = chunks.get(id(copy))
            if chunk is not None and chunk.refused is not None:
                raise KafkaException(chunk.refused)
        interleaved = []
        staged = []
        for copy in copies:
            chunk = chunks.get(id(copy))
            if chunk is None:
                if copy.moves:
                    staged.append(_Staged(copy, None, copy.span.end - 1, (), []))
                continue
            if chunk.processed == 0 and not chunk.reached_end:
                continue  # not reached before the deadline: the next transaction carries it
            downs = copy.downstream_offsets(chunk)
            if downs is None:
                interleaved.append(copy)
                continue
            _check_landing(job, copy, writer, downs)
            staged.append(_Staged(copy, chunk, chunk.last_processed, downs, []))
        if interleaved:
            raise Interleaved(interleaved)
        return staged
    except KafkaException as exc:
        if len(copies) == 1 and is_too_large(exc):
            copy = copies[0]
            chunk = chunks.get(id(copy))
            if (chunk is not None and chunk.refused is not None) or not copy.refusal.solo:
                # The producer must go (its transaction needs an epoch bump); the next attempt
                # copies one record at a time, or up to the refused record.
                copy.refusal.solo = True
                raise RecordRefused(str(exc)) from exc
        raise


def _check_landing(job: CopyJob, copy: PartitionCopy, writer: SlotWriter, downs: Sequence[int]) -> None:
    """In a remote partition only this flow writes, this writer's records land right after its
    own last ones (and the commit marker): anything else means another writer is copying the
    same partition, and the two would put the same records there twice."""
    span = copy.span
    where = (span.remote_topic, span.partition)
    expected = writer.landing.get(where)
    if not job.exactly_once or expected is None or span.remote_topic == span.topic or not downs:
        return  # at-least-once cannot take records back anyway; identity names: others may write
    if downs[0] == expected:
        return
    raise ForeignWriter(
        f"another writer wrote {downs[0] - expected} record(s) into {span.remote_topic}-{span.partition} "
        f"(offsets {expected} to {downs[0] - 1}) while this copy of {span.topic}-{span.partition} wrote it: "
        "only this flow's copy writes that topic, so another copy of it is running (a mirrorflow of an "
        "older version, or MirrorMaker 2 on the same flow); stop the other copy "
        "(docs/operations/upgrading.md), then check the target with `mirrorflow verify`",
        copy,
    )


def _stage_progress(
    job: CopyJob, staged: list[_Staged], producer: Producer | None, shared: SharedClients, commit: str
) -> list[SyncRecords]:
    """Produce each partition's progress (and target-side offset-syncs) into the transaction;
    returns the offset-syncs as records, for the source side once it commits."""
    assert producer is not None
    if not job.exactly_once:
        producer.begin_transaction()
    outgoing = []
    for item in staged:
        copy, span = item.copy, item.copy.span
        if item.chunk is not None:
            feed_runs(copy.emitter, item.chunk.ups, item.downs)
            copy.emitter.boundary()
        syncs = copy.emitter.drain() if job.offset_syncs_topic else []
        key, value, partition = progress_record(
            job.source,
            span.topic,
            span.partition,
            item.last,
            shared.progress_partitions or 0,
            span.incarnation,
            job.slots,
            commit,
        )
        producer.produce(job.progress_topic, key=key, value=value, partition=partition)
        records = [
            (OffsetSync(span.topic, span.partition, s.upstream, s.downstream), s.headers(copy.incarnation))
            for s in syncs
        ]
        if job.offset_syncs_on_target and job.offset_syncs_topic:
            produce_syncs(producer, job.offset_syncs_topic, records)
        outgoing.append(records)
    return outgoing


def _commit(
    staged: list[_Staged],
    producer: Producer | None,
    writer: SlotWriter,
    shared: SharedClients,
    watch: ClusterWatch,
    commit: str,
) -> None:
    assert producer is not None
    try:
        retrying(producer.commit_transaction, watch, "commit_transaction")
        return
    except KafkaException as exc:
        error = kafka_error(exc)
        if error is not None and error.txn_requires_abort():
            raise  # definitely not committed; the writer aborts it
        cause: BaseException = exc
    except ClusterUnreachable as exc:
        cause = exc
    # The commit may have happened. Progress says: it holds this transaction's token (every
    # staged record carries it) or not; a newer writer's progress may equal ours in all else.
    fenced = writer.is_fenced(cause)
    keys = [(item.copy.span.topic, item.copy.span.partition) for item in staged]
    try:
        shared.progress.settle(keys)
    except (ProgressReadError, KafkaException) as exc:
        if isinstance(cause, ClusterUnreachable):
            # Still the lost target: the copy must stop as lost to it (every copy waiting on it
            # gives up, the window fails), not go on to the next batch as a failed commit would.
            raise ClusterUnreachable(
                watch.alias,
                watch.bootstrap,
                watch.limit_s,
                watch.last_error,
                message=f"{cause}; the outcome of the commit in flight is read from progress by the next run",
            ) from exc
        if writer.is_fenced(cause):
            # Whatever the outcome, the slot is another writer's now: its partitions stop here
            # (the next run reads the outcome from progress), none goes on alone to open again.
            raise Fenced(f"{keys[0][0]}-{keys[0][1]}") from cause
        raise CommitUnknown(
            f"committing the transaction failed ({cause}) and its outcome could not be read back ({exc}); "
            "the next run reads it from progress"
        ) from cause
    found = [shared.progress.get(*where) for where in keys]
    if all(stored is not None and stored.commit == commit for stored in found):
        log.info(
            "the commit of %d partition(s) reported %s but happened (progress holds it)", len(staged), cause
        )
        if fenced:
            writer.take_over(f"{keys[0][0]}-{keys[0][1]}")
        return
    if fenced:
        raise Fenced(f"{keys[0][0]}-{keys[0][1]}") from cause
    raise cause


def _after_commit(
    job: CopyJob,
    staged: list[_Staged],
    outgoing: list[SyncRecords],
    shared: SharedClients,
    writer: SlotWriter,
    seconds: float,
    commit: str,
) -> None:
    """Count what the transaction committed and hand the source-side offset-syncs to the worker,
    which sends them once their records are visible on the target (held_syncs.py); never raises."""
    marker = 1 if job.exactly_once else 0
    committed_ms = int(time.time() * 1000)
    source_side = bool(job.offset_syncs_topic) and not job.offset_syncs_on_target
    for index, (item, records) in enumerate(zip(staged, outgoing, strict=True)):
        copy, result = item.copy, item.copy.result
        span = copy.span
        copy.position = item.last + 1
        copy.moves = False
        writer.committed[(span.topic, span.partition)] = Stored(
            item.last, span.incarnation, job.slots, commit
        )
        result.progress = item.last
        result.copy_seconds = round(result.copy_seconds + seconds, 3)
        if index == 0:
            result.transactions += 1
        if item.chunk is not None:
            chunk = item.chunk
            result.records += len(chunk.ups)
            result.bytes += chunk.bytes
            result.skipped_loops += chunk.skipped_loops
            result.retimed += chunk.retimed
            if result.waited_ms < 0 and chunk.first_timestamp > 0:
                result.waited_ms = max(0, committed_ms - chunk.first_timestamp)
            if item.downs:
                writer.landing[(span.remote_topic, span.partition)] = item.downs[-1] + 1 + marker
                result.last_target_offset = item.downs[-1]
            if chunk.reached_end:
                copy.done = True
        else:
            copy.done = True
        if source_side:
            # Counted once the source acknowledges them (held_syncs.SyncDelivery), never before.
            shared.syncs.hold((span.remote_topic, span.partition), records, result)
        else:
            result.offset_syncs += len(records)
    if shared.syncs.due():
        shared.syncs.release()
