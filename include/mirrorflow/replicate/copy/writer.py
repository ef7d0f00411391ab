"""The writer of one writer slot: who may write its partitions' copies, and proof that nothing
older can write them any more.

Every writer of a partition, whichever run, task or attempt it belongs to, uses its slot's
transactional.id (see plan.COPY_SLOTS), so opening a writer fences every older one: a retried
Spark task, a zombie, a concurrent run. Opening, in this order:

1. init_transactions with the slot's id (exactly-once; at-least-once opens a producer with the
   slot's id for its progress transactions, see `fence`) fences the slot's older writers;
2. the ids older versions wrote these partitions under (a transactional.id per partition, or
   another slot count) are fenced too, where the plan or the progress says one may be alive,
   before any wait on progress, so an older zombie's open transaction never holds the settle;
3. progress is settled: read until every transaction open in its partitions has ended, a wait no
   longer than the writers' transaction.timeout.ms; a transaction still open after it is hanging
   and is swept (recovery/hanging.py);
4. each remote partition is checked for a transaction left open before the slot writes it.

A writer once fenced stays fenced: it copies nothing more of its slot. Opening again would fence
the newer writer back, and the two would take turns. The one exception is a fencing by its own
worker: a sweep of a hanging progress transaction that another slot's writer of the same process
ran with this slot's id (recovery/progress_sweep.py) is no newer writer, so the writer opens
again. A failed transaction drops the producer (aborting what it had open); the next one opens
again, which re-checks and re-settles, and every partition of the slot then starts from that
settled progress: another writer (a concurrent run) may have held the slot in between and copied
them.

The writer stays open from range to range of its slot (a micro-batch window copies range after
range), and remembers what it committed, which is the truth for its partitions while it is the
slot's writer.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from confluent_kafka import KafkaError, KafkaException, Producer

from mirrorflow.kafka import ClusterWatch
from mirrorflow.replicate.copy.calls import (
    ABORT_TIMEOUT_S,
    FENCED_CODES,
    drop,
    init_transactions,
    is_fencing,
    partition_count,
    producer_config,
)
from mirrorflow.replicate.copy.chunk import PartitionCopy
from mirrorflow.replicate.copy.counters import stats
from mirrorflow.replicate.copy.ids import older_ids, slot_transactional_id
from mirrorflow.replicate.copy.job import CopyJob, Fenced
from mirrorflow.replicate.copy.recovery.landed import landed_check
from mirrorflow.replicate.copy.recovery.progress_sweep import (
    end_hanging_progress,
    fenced_producer,
    swept_since,
)
from mirrorflow.replicate.progress import ProgressBlocked, Stored

if TYPE_CHECKING:
    from mirrorflow.replicate.copy.clients import SharedClients

log = logging.getLogger("mirrorflow.replicate.copy")

Where = tuple[str, int]


class SlotWriter:
    def __init__(self, job: CopyJob, slot: int, shared: SharedClients) -> None:
        self.job, self.slot, self.shared = job, slot, shared
        self.transactional_id = slot_transactional_id(job.source, job.target, slot, job.slots)
        self.producer: Producer | None = None
        self.fence: Producer | None = None
        self.watch: ClusterWatch | None = None
        self.fenced: str | None = None
        """What the slot's newer writer took over (set once, never cleared)."""
        self.fatal: KafkaError | None = None
        """The first fatal error librdkafka reported for this writer's producers."""
        self.opened_at = 0.0
        """When (monotonic) the producer in use began to open."""
        self.swept_out = False
        """The producer was fenced by a sweep of this process with the slot's id, not by a newer
        writer: the failure path drops it and the writer opens again."""
        self.committed: dict[Where, Stored] = {}
        self.landing: dict[Where, int] = {}
        """Where this writer's next record lands in a remote partition nobody else writes."""
        self.checked: set[Where] = set()
        self._settled: set[Where] = set()
        self._older_fenced: set[str] = set()
        self.rewound: dict[Where, int] = {}
        """Source partitions whose progress went back (`_rewind`) -> where their copy starts now."""
        self._given: dict[str, str] = {}
        """Source topic -> remote topic of the topics this writer was given (a micro-batch window
        finds new ones after its plan); with the plan's (job.remote_topics, shared by every
        writer, not copied into each), what a landed check reads (recovery/landed.py) when a
        settle meets a hanging progress record."""

    # -- what the writer knows ------------------------------------------------------------------
    def stored(self, topic: str, partition: int) -> Stored | None:
        """The partition's progress: what this writer committed, else what the settled read found."""
        return self.committed.get((topic, partition)) or self.shared.progress.get(topic, partition)

    def take_over(self, where: str) -> None:
        if self.fenced is None:
            self.fenced = where

    def learn_fatal(self) -> None:
        """Find out why a producer failed fatally. Once one did (fenced by a newer writer while
        records were in flight, say), librdkafka answers produce() with _FATAL ("Local: Fatal
        error") and tells the cause only when polled (confluent-kafka raises it from poll(), and
        calls no error callback): without it a fenced writer reads as merely failed, is retried,
        and its retry fences the newer writer back."""
        for client in (self.producer, self.fence):
            if self.fatal is not None or client is None:
                return
            try:
                client.poll(0)
            except KafkaException as exc:
                error = exc.args[0] if exc.args else None
                if isinstance(error, KafkaError) and error.fatal():
                    self.fatal = error
            except (SystemError, RuntimeError):
                pass

    def is_fenced(self, exc: BaseException | None = None) -> bool:
        """Whether a newer writer took this slot, learned by any route: a takeover already seen,
        a fatal error librdkafka reported (by callback or poll) as a fencing, or `exc` itself
        saying so. Every path that could open the slot's producer again asks this first: a
        writer fenced once opening again would fence the newer one back. A failure that reads
        as transient (a commit that timed out) is a fencing when librdkafka learned meanwhile
        that the writer was fenced."""
        if self.fenced is not None or isinstance(exc, Fenced):
            return True
        self.learn_fatal()
        fencing = (self.fatal is not None and self.fatal.code() in FENCED_CODES) or (
            exc is not None and is_fencing(exc, self.fatal)
        )
        if fencing and swept_since(self.transactional_id, self.opened_at):
            self.swept_out = True
            return False
        return fencing

    def _on_error(self, error: KafkaError) -> None:
        if error.fatal() and self.fatal is None:
            self.fatal = error
        if self.watch is not None:
            self.watch.on_error(error)

    # -- opening -------------------------------------------------------------------------------
    def open(self, copies: Sequence[PartitionCopy], watch: ClusterWatch) -> Producer:
        """The producer that writes `copies` (the slot's partitions about to be copied), opened
        and their progress settled unless already done; raises Fenced once the slot was taken."""
        self.watch = watch
        # The poll that learns a fencing is asked only before a producer is made: an open one that
        # was fenced fails its next call, whose failure path asks too.
        if self.fenced is not None or (self.producer is None and self.is_fenced()):
            first = copies[0].span if copies else None
            self.take_over("its slot" if first is None else f"{first.topic}-{first.partition}")
            raise Fenced(self.fenced or "")
        job = self.job
        if self.producer is None:
            # A fatal error of the producers that went was theirs (the check above took a
            # fencing for a takeover); this one starts with none.
            self.fatal, self.swept_out = None, False
            self.opened_at = time.monotonic()
            config = producer_config(job, watch, self.transactional_id if job.exactly_once else None)
            config["error_cb"] = self._on_error
            producer = Producer(config)
            try:
                # Metadata first: it brings up the broker connection, so init_transactions finds a
                # broker at once instead of retrying on librdkafka's 500 ms timer.
                self.shared.progress_partitions = partition_count(producer, job.progress_topic, watch)
                if job.exactly_once:
                    init_transactions(producer, job.progress_topic, watch)
                else:
                    self.fence = self._fenced_producer(self.transactional_id, watch, keep=True)
                self._check_still_ours(copies)
            except BaseException:
                drop(producer)
                if self.fence is not None:
                    drop(self.fence)
                    self.fence = None
                raise
            self.producer = producer
            # What the writer committed before is no longer the truth: another writer may have
            # held the slot between the two producers. The settle below reads what holds now.
            self.committed.clear()
            self.checked.clear()
            self._settled.clear()
            self.landing.clear()
            stats.add("writers_opened")
        self._given.update((c.span.topic, c.span.remote_topic) for c in copies)
        fresh = [c for c in copies if (c.span.topic, c.span.partition) not in self._settled]
        if fresh:
            # Older writers the plan saw first (their open transactions would hold the settle),
            # with the ids of every slot count the flow's progress named before this plan or a
            # window of the flow announced (a writer of the last window before a tasks.max change
            # may hold a partition that has no progress yet, or have committed nothing at all);
            # then those the settled progress names.
            planned = [(c, c.span.progress_slots) for c in fresh]
            planned += [(c, slots) for c in fresh for slots in sorted(self.shared.older_slots())]
            self._fence_older(planned, watch)
            keys = [(c.span.topic, c.span.partition) for c in fresh]
            self._settle(keys, watch)
            seen = [(c, self._slots_of(c)) for c in fresh]
            self._refuse_newer(seen)
            if self._fence_older(seen, watch):
                self._settle(keys, watch)
            self._settled.update(keys)
        return self.producer

    def _check_still_ours(self, copies: Sequence[PartitionCopy]) -> None:
        """Once this writer's producer is initialised, and before it writes: Fenced when the slot
        is no longer this worker's (shared.may_write). A newer window announces its takeover
        before it fences the older ids, so a look made after this initialisation sees every
        takeover whose fencing came before it. Without the look, a task of the last window that
        opened a slot's writer just after a window of another writer-slot count had fenced that
        id and settled the slot's partitions (its check before opening was made before the
        announcement) copied them beside it, each from the progress it had read: the same records
        twice, both windows reporting success."""
        may_write = self.shared.may_write
        if may_write is None:
            return
        why = may_write(self.slot)
        if why:
            first = copies[0].span if copies else None
            self.take_over("its slot" if first is None else f"{first.topic}-{first.partition}")
            raise Fenced(why)

    def _slots_of(self, copy: PartitionCopy) -> int:
        """The slot count the settled progress of `copy` names; with none, the plan's (whose
        older writers, if any, were fenced already)."""
        stored = self.shared.progress.get(copy.span.topic, copy.span.partition)
        return copy.span.progress_slots if stored is None else stored.slots

    def _refuse_newer(self, seen: Iterable[tuple[PartitionCopy, int]]) -> None:
        """Progress written under a slot count this job does not know as older (its own, one its
        plan saw, or none) is a newer writer's of the flow: a window planned after a change of
        tasks.max or of mode. Its id is not fenced, which would take the flow back from it: the
        slot is taken (Fenced), as a fencing by a newer writer of the same id would."""
        known = {self.job.slots, 0, *self.shared.older_slots()}
        for copy, slots in seen:
            if slots not in known and slots != copy.span.progress_slots:
                span = copy.span
                where = f"{span.topic}-{span.partition}"
                self.take_over(where)
                raise Fenced(
                    f"{where}: its progress was written by a writer of {slots} writer slots, newer than "
                    f"this copy (of {self.job.slots})"
                )

    def _fence_older(self, copies: Iterable[tuple[PartitionCopy, int]], watch: ClusterWatch) -> bool:
        """Fence the older ids that may still write these partitions; whether any was new."""
        job = self.job
        ids: set[str] = set()
        for copy, slots in copies:
            ids.update(
                older_ids(job.source, job.target, copy.span.topic, copy.span.partition, slots, job.slots)
            )
        ids -= self._older_fenced
        for transactional in sorted(ids):
            self._fenced_producer(transactional, watch)  # fenced once initialised; nothing to send
        self._older_fenced |= ids
        stats.add("older_writers_fenced", len(ids))
        return bool(ids)

    def fence_older_now(self, copy: PartitionCopy, watch: ClusterWatch) -> None:
        """Fence the older ids of a partition again: another writer was seen writing it."""
        job = self.job
        for transactional in older_ids(
            job.source, job.target, copy.span.topic, copy.span.partition, 0, job.slots
        ):
            self._fenced_producer(transactional, watch)
            stats.add("older_writers_fenced")

    def _fenced_producer(self, transactional: str, watch: ClusterWatch, *, keep: bool = False) -> Producer:
        """A producer with the transactional.id `transactional`, initialised: every older producer
        with that id is fenced (its open transaction aborted). At-least-once writes progress (and
        target-side offset-syncs) through the slot's (`keep`): a writer fenced since can write no
        progress any more, so two writers of one partition never copy side by side for more than
        the chunk in flight, and a writer that wakes from a pause never moves progress back. The
        data itself goes through an idempotent producer, outside transactions."""
        job = self.job
        error_cb = self._on_error if keep else None
        return fenced_producer(job.target_producer, transactional, job.progress_topic, watch, error_cb)

    def _settle(self, keys: list[Where], watch: ClusterWatch) -> None:
        progress = self.shared.progress
        try:
            progress.settle(keys)
        except ProgressBlocked as exc:
            self._sweep_progress(exc.stuck, watch)
            progress.settle(keys)

    def _sweep_progress(self, stuck: dict[int, int], watch: ClusterWatch) -> None:
        """End the hanging transactions that held a settle (recovery/progress_sweep.py), with this
        writer's own producer where the slot's id is the one that ends it. As the plan step does,
        each is first checked for a copy that had committed (recovery/landed.py): its progress is
        then written again; one of a topic this writer does not know is left open and reported
        (the next plan, which knows every topic of the flow, ends it)."""
        job = self.job
        own = self.producer if job.exactly_once else self.fence
        end_hanging_progress(
            source=job.source,
            target=job.target,
            target_producer=job.target_producer,
            target_consumer=job.target_consumer,
            progress_topic=job.progress_topic,
            stuck=stuck,
            ends=self.shared.end_readers(),
            watch=watch,
            own=None if own is None else (self.transactional_id, own),
            landed=landed_check(
                job.source_consumer,
                job.target_consumer,
                self._remote_topic,
                source=job.source,
                target=job.target,
            ),
        )

    def _remote_topic(self, topic: str) -> str | None:
        return self.job.remote_topics.get(topic) or self._given.get(topic)

    # -- after a failure, and at the end ------------------------------------------------------
    def discard(self, *, reachable: bool) -> None:
        """After a failed transaction: abort it now (so read_committed readers of the target are
        not held at it until transaction.timeout.ms) and let the producers go. A fenced producer
        cannot abort (the writer that fenced it already did), nor can one whose cluster is gone
        (the coordinator aborts at the timeout)."""
        producer, fence = self.producer, self.fence
        self.producer = self.fence = None
        self.landing.clear()
        if producer is None:
            return
        reachable = reachable and self.fenced is None and self.fatal is None
        aborter = producer if self.job.exactly_once else fence
        if reachable and aborter is not None:
            producer.purge()
            _abort_quietly(aborter, self.transactional_id)
        drop(producer)
        if fence is not None:
            drop(fence)

    def close(self) -> None:
        """Everything this writer wrote was committed (or aborted) already: nothing waits."""
        producer, fence = self.producer, self.fence
        self.producer = self.fence = None
        for client in (producer, fence):
            if client is not None:
                drop(client)


def _abort_quietly(producer: Producer, transactional: str) -> None:
    try:
        producer.abort_transaction(ABORT_TIMEOUT_S)
    except KafkaException as exc:
        error = exc.args[0] if exc.args else None
        if not (isinstance(error, KafkaError) and error.code() == KafkaError._STATE):
            log.warning(
                "could not abort the open transaction of %s (%s); the broker aborts it after "
                "transaction.timeout.ms",
                transactional,
                exc,
            )
