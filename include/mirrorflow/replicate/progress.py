"""Replication progress in MM2's own place: Connect source offsets in `mm2-offsets.<A>.internal`.

Each source partition's progress is the last upstream offset that is durably on the target,
stored exactly as MirrorSourceConnector's Connect offsets (see mirrorflow.mm2.connect_offsets),
so MM2 can continue a flow mirrorflow copied and the other way round.

Reading must not return a stale value: in exactly-once mode progress is written inside the same
transactions as the data, and a read_committed reader stops at the last stable offset, which
another partition's open transaction can hold below our latest committed record. So a read first
notes the high watermark and then waits until the committed view has reached it; every record
below it is then decided, and the latest committed value per key is the true one.

A copy worker reads progress through one ProgressReader for its whole share of partitions, so a
run reads each record of the topic once, however many partitions it copies.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, Consumer, KafkaError, KafkaException

from mirrorflow.kafka import KafkaCallError, reader
from mirrorflow.kafka_offsets import consumer_offsets
from mirrorflow.mm2.connect_offsets import SourceOffsetKey
from mirrorflow.replicate.progress_fetch import read_until
from mirrorflow.replicate.progress_records import (
    ProgressBlocked,
    ProgressReadError,
    ProgressSnapshot,
    Stored,
    incarnation,
    progress_record,
    split_incarnation,
)

__all__ = [
    "SETTLE_TIMEOUT_S",
    "ProgressBlocked",
    "ProgressReadError",
    "ProgressReader",
    "ProgressSnapshot",
    "Stored",
    "incarnation",
    "progress_record",
    "read_progress",
    "read_progress_entries",
    "split_incarnation",
]

SETTLE_TIMEOUT_S = 120.0
READ_AHEAD_S = 10.0
"""How long a read ahead of a fencing may take in all (ProgressReader.read_ahead)."""

log = logging.getLogger(__name__)


def read_progress(
    consumer_config: Mapping[str, Any],
    progress_topic: str,
    source_alias: str,
    *,
    only: Iterable[tuple[str, int]] | None = None,
    timeout_s: float = SETTLE_TIMEOUT_S,
) -> dict[tuple[str, int], int]:
    """Last replicated upstream offset per (topic, partition) of `source_alias`.

    `only` limits the read to the offsets-topic partitions that can hold those keys; with it,
    a copy task reads one small partition instead of the whole topic.
    """
    entries = read_progress_entries(
        consumer_config, progress_topic, source_alias, only=only, timeout_s=timeout_s
    )
    return {where: entry.offset for where, entry in entries.items()}


def read_progress_entries(
    consumer_config: Mapping[str, Any],
    progress_topic: str,
    source_alias: str,
    *,
    only: Iterable[tuple[str, int]] | None = None,
    timeout_s: float = SETTLE_TIMEOUT_S,
) -> dict[tuple[str, int], Stored]:
    """read_progress with each offset's incarnation."""
    with ProgressReader(consumer_config, progress_topic, source_alias, timeout_s=timeout_s) as progress:
        progress.settle(only)
        return progress.entries(only)


class ProgressReader:
    """A source cluster's progress, read once and then kept up to date: the reader remembers
    how far it has read each offsets-topic partition and only reads what was added since.

    A copy worker holds one for its whole share of partitions. After fencing a writer slot it
    calls `settle` for that slot's partitions, which costs one batched ListOffsets call and the
    records written since the last call, not a read of the topic from its start: a run's cost grows
    with its partitions, not with their square. Partitions are assigned only while a settle
    reads them, so an idle reader sends no fetches.

    `start`: a snapshot of an earlier settled read of the same topic (a plan's), taken at the
    first read when `start_id` (the topic's id now) names the topic it was read from: the reader
    then reads only what was written after it.
    """

    def __init__(
        self,
        consumer_config: Mapping[str, Any],
        progress_topic: str,
        source_alias: str,
        *,
        timeout_s: float = SETTLE_TIMEOUT_S,
        start: ProgressSnapshot | None = None,
        start_id: Callable[[], str] | None = None,
    ) -> None:
        self.topic, self.source_alias, self.timeout_s = progress_topic, source_alias, timeout_s
        self._config = consumer_config
        self._consumer = Consumer(
            {
                **consumer_config,
                "group.id": f"mirrorflow-progress-{source_alias}",
                "enable.auto.commit": False,
                "enable.partition.eof": True,
                "isolation.level": "read_committed",
                # Settling waits for the records a writer has just committed: a long-polling
                # fetch would hold each settle for fetch.wait.max.ms (500 ms by default).
                "fetch.wait.max.ms": 10,
                "fetch.error.backoff.ms": 10,
                "fetch.queue.backoff.ms": 10,
            }
        )
        self._uncommitted: Consumer | None = None
        self._count: int | None = None
        self._next: dict[int, int] = {}  # assigned offsets partition -> next offset not yet seen
        self._found: dict[tuple[str, int], Stored] = {}
        self._where: dict[tuple[str, int], int] = {}  # source partition -> offsets-topic partition
        # A worker's copy threads share the reader; their settles are served in rounds (below).
        self._rounds = threading.Condition()
        self._started = 0  # rounds started
        self._finished = 0  # rounds finished
        self._running = False
        self._asked: list[tuple[str, int]] | None = []  # what the next round reads; None: all
        self._failures: dict[int, BaseException] = {}
        self.records_read = 0
        self._start, self._start_id = start, start_id

    def close(self) -> None:
        self._consumer.close()
        if self._uncommitted is not None:
            self._uncommitted.close()
            self._uncommitted = None

    def __enter__(self) -> ProgressReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def rounds(self) -> int:
        """Settle rounds read so far (see settle)."""
        return self._finished

    def snapshot(self, topic_id: str) -> ProgressSnapshot | None:
        """What a settle of the whole topic found and how far it read (None before one)."""
        count = self._count
        if not count or any(p not in self._next for p in range(count)):
            return None
        return ProgressSnapshot(
            self.topic,
            topic_id,
            tuple(self._next[p] for p in range(count)),
            tuple((t, p, s.offset, s.incarnation, s.slots, s.commit) for (t, p), s in self._found.items()),
        )

    def _take_start(self) -> None:
        """Seed the reader with `start` before its first read (the caller runs the round)."""
        start, self._start = self._start, None
        if start is None or self._next or self._start_id is None:
            return
        try:
            now = self._start_id()
        except Exception as exc:  # the read from the start that follows meets what is wrong
            log.info(
                "progress topic %s: its id could not be read (%s); reading it from its start", self.topic, exc
            )
            return
        if start.topic != self.topic or now != start.topic_id:
            log.info("progress topic %s is not the one the plan read; reading it from its start", self.topic)
            return
        self._next.update(enumerate(start.positions))
        self._found.update(start.stored())

    def get(self, topic: str, partition: int) -> Stored | None:
        return self._found.get((topic, partition))

    def entries(self, only: Iterable[tuple[str, int]] | None = None) -> dict[tuple[str, int], Stored]:
        """What the settled reads found (all of it, or that of `only`; callers filter further)."""
        if only is None:
            return dict(self._found)
        return {where: self._found[where] for where in set(only) if where in self._found}

    def settle(self, only: Iterable[tuple[str, int]] | None = None) -> None:
        """Read until the committed view has passed the high watermark of this moment in every
        offsets-topic partition that can hold `only`'s keys (all partitions when None): every
        transaction open now (a live writer's, or a dead one's that fencing or
        transaction.timeout.ms aborts) is then decided, so no newer committed progress hides
        behind it.

        Threads that settle at the same time share rounds: one round reads at a time, and every
        call joins the first round that starts after it was made (so the high watermarks that
        round notes are of a moment after the call, as the call needs), while the calls made
        during a round are all served by the next one. Eight copy threads that each settled a
        slot's partitions in turn spent most of a run waiting for each other's reads."""
        wanted = None if only is None else list(only)
        with self._rounds:
            if wanted is None or self._asked is None:
                self._asked = None
            else:
                self._asked.extend(wanted)
            mine = self._started + 1
            while self._running:
                self._rounds.wait()
            if self._finished >= mine:
                failure = self._failures.get(mine)
                if failure is not None:
                    raise failure
                return
            # No round running, and this call's round has not started: this thread reads it.
            self._running = True
            self._started += 1
            round_, asked, self._asked = self._started, self._asked, []
        failure: BaseException | None = None
        try:
            self._settle(asked)
        except BaseException as exc:
            failure = exc
            raise
        finally:
            with self._rounds:
                self._running = False
                self._finished = round_
                if failure is not None:
                    self._failures[round_] = failure
                for old in [r for r in self._failures if r < round_ - 64]:
                    del self._failures[old]
                self._rounds.notify_all()

    def read_ahead(self, only: Iterable[tuple[str, int]], *, timeout_s: float = READ_AHEAD_S) -> None:
        """Read what is committed now in the offsets-topic partitions that hold `only`'s keys, up
        to their last stable offset, without waiting for the transactions open there (a settle
        waits for those). A writer about to fence an older one reads ahead first: the settle after
        the fencing then reads only what was committed since, not the partitions' whole history
        (at a micro-batch handover over 1,000 partitions, 45,000 progress records read after the
        fencing held the next window's first commit about half a second). Nothing is read while a
        settle round reads; a failure, or a read not done within `timeout_s`, is left to the
        settle, which reads the rest (and fails or waits as settling does)."""
        with self._rounds:
            if self._running:
                return
            self._running = True
        deadline = time.monotonic() + timeout_s

        def left() -> float:
            return max(0.1, deadline - time.monotonic())

        try:
            self._take_start()
            count = self._partition_count(left())
            if count:
                wanted = sorted({self._offsets_partition(where, count) for where in only})
                new = [p for p in wanted if p not in self._next]
                if new:
                    self._next.update(self._list_offsets(new, OFFSET_BEGINNING, left()))
                # Through the read_committed consumer, "latest" is the last stable offset.
                stable = consumer_offsets(
                    self._consumer, [(self.topic, p) for p in wanted], OFFSET_END, timeout_s=left()
                )
                targets = {p: lso for (_, p), lso in stable.items() if lso > self._next[p]}
                if targets:
                    self._read_until(targets, left())
        except (KafkaException, KafkaCallError, ProgressReadError) as exc:
            log.debug("reading progress ahead of a fencing failed (the settle reads it): %s", exc)
        finally:
            with self._rounds:
                self._running = False
                self._rounds.notify_all()

    def _settle(self, only: Iterable[tuple[str, int]] | None) -> None:
        self._take_start()
        count = self._partition_count()
        if not count:
            return
        if only is None:
            partitions = set(range(count))
        else:
            partitions = {self._offsets_partition(where, count) for where in only}
        # The high watermark as a read_uncommitted reader sees it: a read_committed consumer's
        # watermark query answers with the last stable offset, which is exactly what an open
        # transaction holds back, and a read up to it would not wait at all.
        # One ListOffsets call for all of them (a request per leader), and the earliest offsets
        # only for partitions never read: a slot of a copy worker settles dozens at a time.
        wanted = sorted(partitions)
        highs = self._list_offsets(wanted, OFFSET_END)
        self._forget_beyond(highs, count)
        new = [p for p in wanted if p not in self._next]
        if new:
            self._next.update(self._list_offsets(new, OFFSET_BEGINNING))
        targets = {p: high for p, high in highs.items() if high > self._next[p]}
        if targets:
            self._read_until(targets)

    def _forget_beyond(self, highs: dict[int, int], count: int) -> None:
        """A progress partition that now ends below where it was read (by this reader, or by the
        plan whose read seeded it) lost records it had, or is not the log that was read: what was
        found in it is forgotten and it is read again from its start. Reading on from the old
        position would skip every record written there since, silently."""
        behind = {
            p: (self._next[p], high) for p, high in highs.items() if p in self._next and high < self._next[p]
        }
        if not behind:
            return
        log.warning(
            "progress topic %s: partition(s) %s end below where they were read (read up to, end now: %s); "
            "they are read again from their start",
            self.topic,
            ", ".join(str(p) for p in sorted(behind)),
            ", ".join(f"{p}: {read}, {high}" for p, (read, high) in sorted(behind.items())),
        )
        for partition in behind:
            del self._next[partition]
        for where in [w for w in self._found if self._offsets_partition(w, count) in behind]:
            del self._found[where]

    def _list_offsets(self, partitions: list[int], which: int, timeout_s: float = 30.0) -> dict[int, int]:
        """Latest (OFFSET_END, as a read_uncommitted reader sees it) or earliest
        (OFFSET_BEGINNING) offsets of progress partitions, in one batched ListOffsets call."""
        if self._uncommitted is None:
            self._uncommitted = reader(self._config, isolation="read_uncommitted")
        try:
            found = consumer_offsets(
                self._uncommitted, [(self.topic, p) for p in partitions], which, timeout_s=timeout_s
            )
        except KafkaCallError as exc:
            raise ProgressReadError(f"progress topic {self.topic}: {exc}") from exc
        return {partition: offset for (_, partition), offset in found.items()}

    def _offsets_partition(self, where: tuple[str, int], count: int) -> int:
        """Remembered: a watcher settles the same 20,000 keys every few seconds, and hashing
        them again each time would cost it half a second."""
        found = self._where.get(where)
        if found is None:
            topic, partition = where
            key = SourceOffsetKey(cluster=self.source_alias, topic=topic, partition=partition)
            found = self._where[where] = key.offsets_partition(count)
        return found

    def _partition_count(self, timeout_s: float = 30.0) -> int:
        if self._count:
            return self._count
        metadata = self._consumer.list_topics(self.topic, timeout=timeout_s).topics.get(self.topic)
        if metadata is None or metadata.error is not None:
            if metadata is not None and metadata.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                return 0  # no progress yet; asked again next time
            raise ProgressReadError(
                f"cannot describe progress topic {self.topic}: {metadata and metadata.error}"
            )
        self._count = len(metadata.partitions)
        return self._count

    def _read_until(self, targets: dict[int, int], timeout_s: float | None = None) -> None:
        self.records_read += read_until(
            self._consumer,
            self.topic,
            self.source_alias,
            targets,
            self._next,
            self._found,
            timeout_s=self.timeout_s if timeout_s is None else timeout_s,
            limit_s=self.timeout_s,
        )
