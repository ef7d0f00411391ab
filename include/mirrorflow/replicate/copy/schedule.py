"""The order in which a slot's partitions are copied: which go into the next transaction, what a
failure costs, and when the slot stops.

Partitions with little to copy (at most SMALL_SPAN offsets, and at most a transaction's worth)
share transactions, up to the job's group_partitions of them (GROUP_PARTITIONS in a batch flow,
WINDOW_GROUP_PARTITIONS in a micro-batch flow) and max_records offsets in all: a busy
partition then costs a share of a transaction instead of one of its own (AddPartitionsToTxn,
EndTxn, the markers, and the wait for the coordinator to finish the last one). A larger partition
takes transactions of its own, chunk after chunk.

A failed transaction of several partitions is not retried as such: each of its partitions goes
on alone, meeting (and reporting) its own error, if any. A partition alone is retried up to
ATTEMPTS times; finding a record the target refuses takes up to two more, which are not retries.
Once a newer writer took the slot (fencing), nothing more of the slot is tried: another writer
would fence that one back, and the two would take turns. Once a cluster is found unreachable
(here or in another thread of the worker), what is left fails at once with the same cause
instead of each waiting out the same limit.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Sequence

from confluent_kafka import KafkaException

from mirrorflow.kafka import ClusterUnreachable, ClusterWatch
from mirrorflow.replicate.copy.calls import abort, describe
from mirrorflow.replicate.copy.chunk import PartitionCopy
from mirrorflow.replicate.copy.clients import SharedClients
from mirrorflow.replicate.copy.failures import (
    fenced_error,
    retry_or_error,
    swept_out_error,
    taken_error,
)
from mirrorflow.replicate.copy.job import CopyError, CopyJob, Fenced, StalePlan, UnitResult
from mirrorflow.replicate.copy.reader import SourceReader
from mirrorflow.replicate.copy.recovery.remote_clear import ensure_clear
from mirrorflow.replicate.copy.resume import check_live, moves_progress, resume_offset
from mirrorflow.replicate.copy.transaction import ForeignWriter, Interleaved, transact
from mirrorflow.replicate.copy.writer import SlotWriter
from mirrorflow.replicate.offset_syncs import DenseSyncEmitter
from mirrorflow.replicate.phases import phase
from mirrorflow.replicate.plan import PartitionSpan, writer_slot
from mirrorflow.replicate.progress import ProgressReadError

SMALL_SPAN = 10_000
"""Spans with more pending offsets than this are "large": their copy is limited by the CPU, so a
worker copies one at a time (see SharedClients.large), beside any number of small ones."""
LIVE_RECHECK_S = 60.0
"""How long a slot's copy goes on before it asks again whether its topics are the plan's."""

log = logging.getLogger("mirrorflow.replicate.copy")


def copy_units(job: CopyJob, spans: Sequence[PartitionSpan], shared: SharedClients) -> list[UnitResult]:
    """Copy spans of one writer slot with the worker's writer of that slot; results in `spans`
    order; never raises (each partition's error is in its result)."""
    slots = {writer_slot(s.topic, s.partition, job.slots) for s in spans}
    if len(slots) > 1:
        raise ValueError(f"copy_units takes the spans of one writer slot, got slots {sorted(slots)}")
    if not spans:
        return []
    copies = [PartitionCopy(job, span, UnitResult.for_span(span)) for span in spans]
    slot = slots.pop()
    try:
        _SlotCopy(job, copies, shared, shared.writer(slot, SlotWriter)).run()
    finally:
        shared.release(slot)
    return [c.result for c in copies]


class _SlotCopy:
    def __init__(
        self, job: CopyJob, copies: list[PartitionCopy], shared: SharedClients, writer: SlotWriter
    ) -> None:
        self.job, self.copies, self.shared, self.writer = job, copies, shared, writer
        self.reader: SourceReader | None = None
        self.reader_ok = True
        self.alone: set[int] = set()
        self.started = {id(c): time.monotonic() for c in copies}
        self.watches: tuple[ClusterWatch, ClusterWatch] = shared.watches
        self.live_checked, self.recheck = 0.0, False

    def run(self) -> None:
        try:
            # Source-side offset-syncs go out after each commit through one idempotent producer,
            # which sends nothing until it has a connection and a producer id. Made when the first
            # commit needs it, it was not ready for runs of a few seconds, and a kill in that time
            # lost every sync the run had committed data for (partitions left without any).
            with contextlib.suppress(Exception):
                self.shared.sync_producer(self.watches[0])
            with phase("copy: check topic identities"):
                self._check_live()
            while True:
                pending = [c for c in self.copies if not c.done]
                if not pending or self._stopped(pending):
                    break
                if self.recheck or time.monotonic() - self.live_checked > LIVE_RECHECK_S:
                    # Each opening of the writer (a retry) and each minute of a long copy asks
                    # again: a topic deleted and created again meanwhile is never copied as the old.
                    with phase("copy: check topic identities"):
                        self._check_live()
                    continue
                with phase("copy: open the slot's writer"):
                    opened = self._open(pending)
                if not opened:
                    continue
                ready = [c for c in pending if not c.done]
                if ready:
                    self._transact(self._next_batch(ready))
        except Exception as exc:  # the contract: every partition fails with its cause, nothing raises
            log.exception("copying slot %d failed unexpectedly", self.writer.slot)
            for copy in self.copies:
                if not copy.done:
                    self._fail(copy, f"unexpected {type(exc).__name__}: {exc}")
        finally:
            if self.reader is not None:
                self.shared.give_back(self.reader.pooled, reusable=self.reader_ok)

    # -- before anything is written -----------------------------------------------------------
    def _check_live(self) -> None:
        """Spans whose topics were deleted and created again since the plan are not copied, nor
        are those whose topic ids cannot be read now (fails closed)."""
        self.live_checked, self.recheck = time.monotonic(), False
        copies = [c for c in self.copies if not c.done]
        spans = [c.span for c in copies]
        if not spans:
            return
        try:
            source_ids, remote_ids = self.shared.live_topic_ids(
                {s.topic for s in spans}, {s.remote_topic for s in spans}
            )
        except ClusterUnreachable as exc:
            # Silent for the limit: nothing of the slot is copied (as _failed does for a batch).
            for copy in copies:
                copy.result.unreachable = exc.alias
                self._fail(copy, str(exc))
            self.shared.unreachable = copies[0].result
            return
        except KafkaException as exc:
            for copy in copies:
                self._fail(
                    copy,
                    f"the topic ids of {copy.span.topic} and {copy.span.remote_topic} could not be read "
                    f"({describe(exc)}): not copied, since a topic deleted and created again since the plan "
                    "would be copied as the old one; the next run tries again",
                )
            return
        for copy in copies:
            try:
                check_live(copy.span, source_ids, remote_ids)
            except StalePlan as exc:
                self._fail(copy, str(exc), stale=True)

    def _open(self, pending: list[PartitionCopy]) -> bool:
        """Open the slot's writer for `pending` and decide where each partition starts; whether
        the copy can go on to a transaction (False: a failure was handled, look again)."""
        target_watch = self.watches[1]
        failure: Exception | None = None
        try:
            reopening = self.writer.producer is None
            producer = self.writer.open(pending, target_watch)
            for copy in pending:
                if reopening or copy.position < 0:
                    # A new producer fenced whoever took the slot since the last one went (a
                    # concurrent run may have copied these partitions meanwhile): every partition
                    # starts again from the progress it settled, not where it stood before.
                    try:
                        self._prepare(copy, producer, target_watch)
                    except CopyError as exc:
                        self._fail(copy, str(exc), stale=isinstance(exc, StalePlan))
            # A partition with nothing to copy whose remote partition the plan saw a transaction
            # open in is checked too (PartitionSpan.open_at).
            writing = [c for c in pending if not c.done and (c.pending > 0 or c.span.open_at >= 0)]
            for where, error in ensure_clear(self.writer, writing, target_watch).items():
                for copy in writing:
                    if (copy.span.remote_topic, copy.span.partition) == where:
                        self._fail(copy, str(error))
            for copy in writing:
                start = self.writer.rewound.pop((copy.span.topic, copy.span.partition), None)
                if start is not None:
                    # A transaction that had committed lost its marker there, and its abort took
                    # its records back: they are copied again, even where the plan began after them.
                    copy.position = start
                    copy.emitter = DenseSyncEmitter()
                    copy.result.resumed_from = min(copy.result.resumed_from, start)
                    copy.result.progress = start - 1
                if not copy.done and copy.pending == 0 and not copy.moves:
                    self._finish(copy)
            return True
        except Exception as exc:  # noqa: BLE001 - classified below, as a transaction's failure is
            failure = exc
        # Handled outside the except clause, like a transaction's failure (see _transact).
        self._failed(pending, failure, opening=True)
        return False

    def _prepare(self, copy: PartitionCopy, producer, watch: ClusterWatch) -> None:
        span = copy.span
        if (
            self.shared.remote_partitions(producer, span.remote_topic, span.partition, watch)
            <= span.partition
        ):
            raise CopyError(
                f"remote topic {span.remote_topic} has no partition {span.partition}; "
                "the plan step grows remote partitions, so rerun it"
            )
        stored = self.writer.stored(span.topic, span.partition)
        start = resume_offset(span, stored)
        copy.position = start
        copy.emitter = DenseSyncEmitter()
        if copy.result.resumed_from < 0:
            copy.result.resumed_from = start
        if stored is not None and copy.result.transactions == 0:
            copy.result.progress = stored.offset
        if copy.result.attempts == 0:
            copy.result.attempts = 1
        if start >= copy.end:
            if copy.refusal.stop_at is not None:
                # Copied up to the record the target refuses, which stays uncopied.
                self._fail(copy, copy.refusal.message)
                return
            copy.moves = moves_progress(span, stored)
            if not copy.moves and span.open_at < 0:
                self._finish(copy)

    # -- transactions ----------------------------------------------------------------------------
    def _groupable(self, copy: PartitionCopy) -> bool:
        return id(copy) not in self.alone and copy.pending <= min(SMALL_SPAN, self.job.max_records)

    def _next_batch(self, ready: list[PartitionCopy]) -> list[PartitionCopy]:
        first = ready[0]
        if not self._groupable(first):
            return [first]
        batch: list[PartitionCopy] = []
        offsets = 0
        for copy in ready[: self.job.group_partitions]:
            if not self._groupable(copy) or (batch and offsets + copy.pending > self.job.max_records):
                break
            batch.append(copy)
            offsets += copy.pending
        return batch

    def _transact(self, batch: list[PartitionCopy]) -> None:
        source_watch, target_watch = self.watches
        if any(c.pending for c in batch):
            if self.reader is None:
                self.reader = SourceReader(
                    self.shared.source_consumer(source_watch), source_watch, self.shared.throttle
                )
            self.reader.watch = self.reader.pooled.watch = source_watch
        large = any(c.pending > SMALL_SPAN for c in batch)
        # A failure is handled after its except clause has ended: confluent-kafka 2.16 keeps a
        # reference it never releases to the exception being handled whenever one of its calls
        # raises meanwhile (the abort and drop of the failed producer do), and that exception's
        # traceback would keep this worker's frames, and every client they hold, alive for good.
        failure: Exception | None = None
        interleaved: Interleaved | None = None
        try:
            with self.shared.large if large else contextlib.nullcontext():
                if self.shared.unreachable is not None:
                    return  # found while this one waited its turn: what is left fails at once
                transact(self.job, batch, self.shared, self.writer, self.reader, self.watches)
        except Interleaved as exc:
            interleaved = exc
        except Exception as exc:  # noqa: BLE001 - classified below
            failure = exc
        if interleaved is not None:
            # Copied again with a report per record; the abort keeps the writer (it is not at fault).
            for copy in interleaved.copies:
                copy.exact = True
                copy.result.interleaved_chunks += 1
            producer = self.writer.producer
            assert producer is not None
            try:
                abort(producer, target_watch)
            except Exception as abort_error:  # noqa: BLE001 - classified as the transaction's failure
                failure = abort_error
            if failure is None:
                return
        if failure is not None:
            self._failed(batch, failure)
            return
        for copy in batch:
            if copy.done:
                if copy.refusal.stop_at is not None:
                    copy.result.error = copy.refusal.message
                self._finish(copy)

    # -- failures ------------------------------------------------------------------------------------
    def _failed(self, batch: list[PartitionCopy], exc: BaseException, *, opening: bool = False) -> None:
        """After a failed transaction (or a failed opening of the writer for `batch`): the writer's
        producer goes, and each partition of `batch` is retried, goes on alone, or fails, as the
        error says."""
        job, writer = self.job, self.writer
        writer.learn_fatal()
        self.reader_ok = False
        if self.reader is not None:
            self.shared.give_back(self.reader.pooled, reusable=False)
            self.reader = None
        unreachable = exc.alias if isinstance(exc, ClusterUnreachable) else None
        if isinstance(exc, ForeignWriter) and writer.producer is not None:
            # A writer of this version that took the slot over fenced this one first; the abort says.
            try:
                abort(writer.producer, self.watches[1])
            except KafkaException as abort_error:
                if writer.is_fenced(abort_error):
                    exc = Fenced(str(exc))
        fenced = writer.is_fenced(exc)
        if fenced:
            where = batch[0].span
            writer.take_over(f"{where.topic}-{where.partition}")
        swept_out, writer.swept_out = writer.swept_out and not fenced, False
        writer.discard(reachable=unreachable != job.target)
        self.recheck = True
        for copy in batch:
            copy.position = -1
        if swept_out:
            # This worker's own sweep of a hanging progress transaction used the slot's id: the
            # writer opens again and every partition goes on from its settled progress.
            log.info(
                "writer slot %d was fenced by this worker's sweep of a hanging transaction; opening again",
                writer.slot,
            )
            for copy in batch:
                if (error := swept_out_error(copy, exc)) is not None:
                    self._fail(copy, error)
            return
        if fenced:
            for copy in batch:
                self._fail(copy, fenced_error(copy))
            return
        if unreachable is not None:
            for copy in batch:
                copy.result.unreachable = unreachable
                self._fail(copy, str(exc))
            self.shared.unreachable = batch[0].result
            return
        if isinstance(exc, ForeignWriter):
            # Fence what may have written there, and go on from progress as it is read again.
            with contextlib.suppress(Exception):
                writer.fence_older_now(exc.copy, self.watches[1])
            span = exc.copy.span
            writer.committed.pop((span.topic, span.partition), None)
            batch = [exc.copy]
        if len(batch) > 1 and not opening and not isinstance(exc, ProgressReadError):
            log.debug("copying %d partitions in one transaction failed (%s); one by one now", len(batch), exc)
            self.alone.update(id(c) for c in batch)
            return
        retried = [copy for copy in batch if self._retry_or_fail(copy, exc)]
        if retried:
            time.sleep(min(5.0, 0.5 * (max(c.result.attempts for c in retried) - 1)))

    def _retry_or_fail(self, copy: PartitionCopy, exc: BaseException) -> bool:
        """Fail `copy` for `exc`, or count one more attempt; whether it is retried after a pause."""
        retry, error = retry_or_error(copy, exc)
        if error is not None:
            self._fail(copy, error)
        return retry

    def _stopped(self, pending: list[PartitionCopy]) -> bool:
        """Fail what is left, without trying, once the slot was taken or a cluster is gone."""
        gone, fenced = self.shared.unreachable, self.writer.fenced
        if gone is None and fenced is None:
            return False
        for copy in pending:
            copy.result.progress = (
                copy.span.progress if copy.result.transactions == 0 else copy.result.progress
            )
            if gone is not None:
                copy.result.unreachable = gone.unreachable
                self._fail(copy, f"not copied: {gone.error}")
            else:
                self._fail(copy, taken_error(copy, fenced))
        return True

    def _fail(self, copy: PartitionCopy, error: str, *, stale: bool = False) -> None:
        copy.result.error, copy.result.stale = error, stale
        self._finish(copy)

    def _finish(self, copy: PartitionCopy) -> None:
        copy.done = True
        copy.result.seconds = round(time.monotonic() - self.started[id(copy)], 3)
