"""The clients one copy worker shares across the partitions and ranges it copies.

A worker keeps, for as long as it lives (one batch run, or one micro-batch window): the progress
reader (read once, then kept up to date), the partition counts of the progress and remote topics,
the producer of source-side offset-syncs, a pool of source consumers, the end-offset reader that
finds open transactions, and one writer per writer slot (see writer.SlotWriter), which stays
open from range to range.

A source consumer reads for one transaction's partitions at a time: a copy takes one from the
pool, assigns its partitions, and gives it back unassigned and drained, so the next copy sees
nothing of this one. A consumer that reported an error, or whose copy failed, is closed instead.
With up to SLOT_THREADS slots copied side by side, a worker creates about that many consumers.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient

from mirrorflow.kafka import ClusterUnreachable, ClusterWatch, admin_client, reader
from mirrorflow.replicate.copy.calls import (
    CONSUMER_DEFAULTS,
    described_topic_ids,
    flush,
    new_client_config,
    partition_count,
    source_consumer_config,
    watches,
)
from mirrorflow.replicate.copy.counters import stats
from mirrorflow.replicate.copy.held_syncs import SYNC_WAIT_S, HeldSyncs
from mirrorflow.replicate.copy.job import CopyJob, UnitResult, settle_timeout_s
from mirrorflow.replicate.plan import PartitionSpan
from mirrorflow.replicate.progress import ProgressReader

CONSUME_BATCH = 2000


class Throttle:
    """A worker's share of its flow's byte rate, shared by the worker's copy threads.

    A virtual clock: each read of n bytes moves the time the worker's budget frees up by n / rate
    (from now, if that time has passed: an idle worker earns nothing), and a reader sleeps while
    that time is more than BURST_S ahead of now. So over any stretch the worker moves at most its
    rate times the stretch plus BURST_S, and nothing is spent on a clock while there is no cap."""

    BURST_S = 0.25

    def __init__(self, bytes_per_second: float) -> None:
        self.rate = bytes_per_second
        self._lock = threading.Lock()
        self._free_at = time.monotonic()

    def take(self, count: int) -> None:
        if self.rate <= 0 or count <= 0:
            return
        with self._lock:
            now = time.monotonic()
            self._free_at = max(self._free_at, now) + count / self.rate
            wait = self._free_at - now - self.BURST_S
        if wait > 0:
            time.sleep(wait)


class PooledConsumer:
    """A source consumer of the pool, and where its errors go: its librdkafka error callback is
    fixed when it is created, so it reports to whichever copy's source watch holds the consumer
    now, and counts what it reported during that lease."""

    def __init__(self, job: CopyJob) -> None:
        self.watch: ClusterWatch | None = None
        self.errors = 0
        self.topics: set[str] = set()
        self.consumer = Consumer({**source_consumer_config(job), "error_cb": self._on_error})
        stats.add("source_consumers_created")

    def _on_error(self, error: KafkaError) -> None:
        # Called from consume(), in the thread of the copy that holds the consumer.
        self.errors += 1
        if self.watch is not None:
            self.watch.on_error(error)


LIVE_IDS_REUSE_S = 1.0
"""How long a copy call's topic-id answer (SharedClients.check_ahead) serves its slots' checks."""


@dataclass(frozen=True)
class _LiveIds:
    asked: float
    sources: frozenset[str]
    remotes: frozenset[str]
    answer: tuple[dict, dict] | Exception

    def covers(self, sources: frozenset[str], remotes: frozenset[str]) -> bool:
        fresh = time.monotonic() - self.asked <= LIVE_IDS_REUSE_S
        return fresh and sources <= self.sources and remotes <= self.remotes


class SharedClients:
    def __init__(
        self,
        job: CopyJob,
        *,
        keep_writers: bool = False,
        may_write: Callable[[int], str] | None = None,
        older_counts: set[int] | None = None,
    ) -> None:
        self.job = job
        self.keep_writers = keep_writers
        """Slot writers stay open after a slot's copy (a worker copying range after range), or
        go with it (a batch worker: at most about SLOT_THREADS producers open at once)."""
        self.may_write = may_write
        """Asked by a slot's writer once its producer is initialised, before it writes: why the
        slot is no longer this worker's ("" while it is). A micro-batch window's task answers
        from the run-records topic (window/task.py)."""
        self.older_counts = set() if older_counts is None else older_counts
        """Writer-slot counts of older windows the caller learned of after the job was made (a
        window's task, from the takeovers it reads), fenced beside job.older_slots; the caller
        keeps adding to it."""
        self.progress = ProgressReader(
            job.target_consumer,
            job.progress_topic,
            job.source,
            timeout_s=settle_timeout_s(job.target_producer),
            start=job.progress_start,
            start_id=self._progress_topic_id,
        )
        self.progress_partitions: int | None = None
        self._writers: dict[int, Any] = {}
        self._sync_producer: Producer | None = None
        self._sync_watch: ClusterWatch | None = None
        self._lock = threading.Lock()
        self._idle: list[PooledConsumer] = []
        self.consumers_created = 0
        self._remote_partitions: dict[str, int] = {}
        self._ends: tuple[Consumer, Consumer] | None = None
        self._admins: tuple[AdminClient, AdminClient] | None = None
        self._live: _LiveIds | None = None
        self.large = threading.Semaphore(1)
        """Held while a large span (see schedule.SMALL_SPAN) is copied: one at a time per worker."""
        self.unreachable: UnitResult | None = None
        """The first copy of the worker that found a cluster unreachable."""
        self.watches = watches(job)
        """(source, target) reachability, as every copy of the worker sees it."""
        self.throttle = Throttle(job.max_bytes_per_second / max(1, job.workers))
        self.syncs = HeldSyncs(
            job.offset_syncs_topic or "",
            lambda: self.end_readers()[0],
            lambda: self.sync_producer(self.watches[0]),
            job.unreachable_timeout_s,
        )
        """Source-side offset-syncs of committed copies, sent once their records are visible."""

    # -- writers -------------------------------------------------------------------------------
    def older_slots(self) -> set[int]:
        """The writer-slot counts other than the flow's own whose ids a writer fences."""
        return {*self.job.older_slots, *self.older_counts} - {self.job.slots, 0}

    def writer(self, slot: int, make: Callable[[CopyJob, int, SharedClients], Any]) -> Any:
        """The worker's writer of `slot` (a writer.SlotWriter, made by `make` the first time),
        kept from range to range."""
        with self._lock:
            found = self._writers.get(slot)
            if found is None:
                found = self._writers[slot] = make(self.job, slot, self)
            return found

    def release(self, slot: int) -> None:
        """Let a slot's writer go, unless writers are kept (see keep_writers); a fenced one stays
        known as such."""
        if self.keep_writers:
            return
        with self._lock:
            writer = self._writers.get(slot)
            if writer is not None and writer.fenced is None:
                del self._writers[slot]
        if writer is not None:
            writer.close()

    def committed(self) -> dict[tuple[str, int], int]:
        with self._lock:
            writers = list(self._writers.values())
        return {where: stored.offset for writer in writers for where, stored in writer.committed.items()}

    def fenced_slots(self) -> list[int]:
        with self._lock:
            return sorted(slot for slot, writer in self._writers.items() if writer.fenced is not None)

    def open_slots(self) -> set[int]:
        """Slots whose writer holds an open producer nobody fenced: copying them opens nothing."""
        with self._lock:
            return {
                slot
                for slot, writer in self._writers.items()
                if writer.producer is not None and writer.fenced is None
            }

    # -- target metadata ------------------------------------------------------------------------
    def remote_partitions(self, producer: Producer, topic: str, partition: int, watch: ClusterWatch) -> int:
        """Partitions of remote `topic`: asked once per worker, and again when `partition` is
        beyond the count known (the plan may have grown the topic since)."""
        with self._lock:
            known = self._remote_partitions.get(topic)
        if known is not None and known > partition:
            return known
        count = partition_count(producer, topic, watch)
        with self._lock:
            self._remote_partitions[topic] = count
        return count

    def check_ahead(self, spans: Iterable[PartitionSpan]) -> None:
        """Ask both clusters for the topic ids of every span of a copy call at once, before its
        slots start: slots that start within LIVE_IDS_REUSE_S take their check from this answer
        (or its failure) instead of asking for their own topics, two requests per slot. A
        micro-batch task copies every interval, so that was two DescribeTopics per slot and
        interval, and their wait on every slot's path."""
        spans = list(spans)
        self._live = None
        if not spans:
            return
        sources, remotes = frozenset(s.topic for s in spans), frozenset(s.remote_topic for s in spans)
        asked = time.monotonic()
        try:
            answer: tuple[dict, dict] | Exception = self._ask_topic_ids(sources, remotes)
        except Exception as exc:  # each slot meets it where it checks, and handles it there
            answer = exc
        self._live = _LiveIds(asked, sources, remotes, answer)

    def answered_ahead(self) -> bool:
        """Whether this copy call's check_ahead was answered by both clusters."""
        live = self._live
        return live is not None and not isinstance(live.answer, Exception)

    def live_topic_ids(self, source_topics: Iterable[str], remote_topics: Iterable[str]) -> tuple[dict, dict]:
        """The topic ids the source and target clusters hold now (one DescribeTopics call each),
        to check them against the plan's (see resume.check_live); ClusterUnreachable when one
        does not answer within what is left of its limit. A check_ahead answer of this copy
        call serves it while it is fresh and covers the topics."""
        source_topics, remote_topics = frozenset(source_topics), frozenset(remote_topics)
        live = self._live
        if live is not None and live.covers(source_topics, remote_topics):
            if isinstance(live.answer, Exception):
                raise live.answer
            return live.answer
        return self._ask_topic_ids(source_topics, remote_topics)

    def _admin_pair(self) -> tuple[AdminClient, AdminClient]:
        job = self.job
        with self._lock:
            if self._admins is None:
                self._admins = (
                    admin_client(job.source_admin or job.source_consumer),
                    admin_client(job.target_admin or job.target_consumer),
                )
            return self._admins

    def _ask_topic_ids(self, source_topics: Iterable[str], remote_topics: Iterable[str]) -> tuple[dict, dict]:
        stats.add("topic_id_checks")
        source_admin, target_admin = self._admin_pair()
        source_watch, target_watch = self.watches
        return (
            described_topic_ids(source_admin, source_topics, source_watch),
            described_topic_ids(target_admin, remote_topics, target_watch),
        )

    def _progress_topic_id(self) -> str:
        """The progress topic's id now: the reader takes the plan's read of it only for the same
        topic (one DescribeTopics, at its first read)."""
        topic = self.job.progress_topic
        return described_topic_ids(self._admin_pair()[1], [topic], self.watches[1]).get(topic, "")

    def end_readers(self) -> tuple[Consumer, Consumer]:
        """(read_committed, read_uncommitted) consumers whose end-offset queries give the last
        stable offset and the high watermark of target partitions (see recovery/hanging.py)."""
        with self._lock:
            if self._ends is None:
                config = self.job.target_consumer
                self._ends = (reader(config), reader(config, isolation="read_uncommitted"))
            return self._ends

    # -- source consumers -----------------------------------------------------------------------
    def source_consumer(self, watch: ClusterWatch) -> PooledConsumer:
        """A source consumer with no assignment, reporting its errors to `watch` until it is
        given back."""
        with self._lock:
            pooled = self._idle.pop() if self._idle else None
            if pooled is None:
                self.consumers_created += 1
        if pooled is None:
            pooled = PooledConsumer(self.job)
        pooled.watch = watch
        pooled.errors = 0
        return pooled

    def give_back(self, pooled: PooledConsumer, *, reusable: bool) -> None:
        """Return a consumer after a copy: unassigned and drained for the next one when
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
                # reader also ignores any record of a partition it does not read.
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
        close_quietly(pooled.consumer)

    # -- source-side offset-syncs ---------------------------------------------------------------
    def sync_producer(self, watch: ClusterWatch) -> Producer | None:
        job = self.job
        if not job.offset_syncs_topic or job.offset_syncs_on_target:
            return None
        with self._lock:
            if self._sync_producer is None:
                self._sync_watch = watch
                self._sync_producer = Producer(
                    new_client_config(
                        {**watch.config(job.source_producer), "enable.idempotence": True, "acks": "all"}
                    )
                )
            return self._sync_producer

    def settle_syncs(self) -> None:
        """At the end of a copy call: send the held offset-syncs whose records show on the target
        (waiting up to held_syncs.SYNC_WAIT_S for them), count the others as not sent, and wait
        for the source's acknowledgements. Never raises; every sync not written is counted as an
        error of its partition (a purged one through its delivery callback)."""
        gone = self.unreachable.unreachable if self.unreachable is not None else None
        if gone == self.job.target:
            self.syncs.give_up(f"cluster {gone} is unreachable: whether their records are visible is unknown")
        else:
            self.syncs.release(wait_s=SYNC_WAIT_S)
            self.syncs.give_up(
                f"their records were not visible to read_committed readers after {SYNC_WAIT_S:.0f}s: "
                "a transaction open before them on the target, or commit markers lost in a target crash"
            )
        producer = self._sync_producer
        if self.flush_syncs() and producer is not None:
            with contextlib.suppress(KafkaException, SystemError, RuntimeError):
                producer.purge()
                producer.poll(0)

    def flush_syncs(self) -> int:
        """Send the offset-syncs still queued; how many could not be sent (never raises)."""
        if self._sync_producer is None or self._sync_watch is None:
            return 0
        try:
            return flush(self._sync_producer, self._sync_watch)
        except (ClusterUnreachable, KafkaException, SystemError):
            return len(self._sync_producer)

    # -- the end ---------------------------------------------------------------------------------
    def close(self) -> None:
        for writer in list(self._writers.values()):
            writer.close()
        self.settle_syncs()  # every copy call settled its own; nothing is left here
        self.progress.close()
        with self._lock:
            idle, self._idle = self._idle, []
            ends, self._ends = self._ends, None
        for pooled in idle:
            close_quietly(pooled.consumer)
        for consumer in ends or ():
            close_quietly(consumer)

    def __enter__(self) -> SharedClients:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def close_quietly(consumer: Consumer) -> None:
    with contextlib.suppress(KafkaException, RuntimeError):
        consumer.close()


__all__ = ["CONSUMER_DEFAULTS", "SharedClients", "PooledConsumer"]
