"""Source-side offset-syncs, held until the records they point at are visible on the target.

A commit that returned is not yet a commit readers see: the transaction coordinator writes the
commit markers into the partitions after it answers. A target killed in that moment and restarted
can come back with the markers skipped (its coordinator finds no leader for a partition in the
moment after the restart and records the transaction as done): the records and their progress
then hang open, mirrorflow's sweep (recovery/hanging.py) ends them with an abort and copies the records
again. A sync sent to the source right after the commit pointed at the aborted records, and
MM2's checkpoint connector placed groups through it.

So a worker holds each commit's source-side syncs and sends them once the remote partition's last
stable offset (read_committed) has passed the last record they point at: then the commit markers
are written, and those records are committed for good (the coordinator writes no other marker
after a commit it answered). One batched ListOffsets asks for every held partition of the worker:
at most every SYNC_CHECK_S while a copy commits, and at the end of each copy call (a batch run's
share, a micro-batch), where the syncs still held may wait up to SYNC_WAIT_S. What is still held
then, or what a sweep is about to abort (`forget`), is not sent and counts as an offset-sync
error of its partition; so does a sync the source refuses. A sync counts as written
(`offset_syncs`) only once the source acknowledged it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from confluent_kafka import OFFSET_END, Consumer, KafkaException, Producer

from mirrorflow.kafka import ClusterUnreachable, KafkaCallError
from mirrorflow.kafka_offsets import consumer_offsets
from mirrorflow.mm2.formats import OffsetSync
from mirrorflow.replicate.copy.job import UnitResult

log = logging.getLogger("mirrorflow.replicate.copy")

SyncRecords = list[tuple[OffsetSync, list[tuple[str, bytes]]]]
Where = tuple[str, int]

SYNC_CHECK_S = 1.0
"""While a copy commits, how often the worker looks which held syncs can go."""
SYNC_WAIT_S = 5.0
"""At the end of a copy call, how long held syncs may wait for their records to become visible."""
QUERY_TIMEOUT_S = 5.0


@dataclass
class _Held:
    where: Where  # the remote partition
    needed: int  # the last stable offset from which on every record the syncs point at is visible
    records: SyncRecords
    result: UnitResult


class HeldSyncs:
    """The source-side syncs of one worker's commits not yet sent; thread-safe."""

    def __init__(
        self,
        topic: str,
        stable_reader: Callable[[], Consumer],
        producer: Callable[[], Producer | None],
        timeout_s: float,
    ) -> None:
        self.topic = topic
        self._stable_reader, self._producer = stable_reader, producer
        self._timeout_s = min(timeout_s, QUERY_TIMEOUT_S)
        self._held: list[_Held] = []
        self._lock = threading.Lock()
        self._checked = time.monotonic()

    def hold(self, where: Where, records: SyncRecords, result: UnitResult) -> None:
        if not records:
            return
        needed = max(sync.downstream_offset for sync, _ in records) + 1
        with self._lock:
            self._held.append(_Held(where, needed, records, result))

    def __len__(self) -> int:
        with self._lock:
            return sum(len(h.records) for h in self._held)

    def due(self) -> bool:
        with self._lock:
            return bool(self._held) and time.monotonic() - self._checked >= SYNC_CHECK_S

    def release(self, *, wait_s: float = 0.0) -> None:
        """Send the held syncs whose records read_committed readers see; with `wait_s`, look
        again until none is held or `wait_s` has passed. Never raises: a target that does not
        answer leaves them held."""
        deadline = time.monotonic() + wait_s
        pause = 0.01
        while True:
            with self._lock:
                self._checked = time.monotonic()
                wanted = sorted({h.where for h in self._held})
            if not wanted:
                return
            left = deadline - time.monotonic()
            try:
                stable = consumer_offsets(
                    self._stable_reader(),
                    wanted,
                    OFFSET_END,
                    timeout_s=max(0.5, min(self._timeout_s, left)),
                )
            except (KafkaCallError, KafkaException, ClusterUnreachable, RuntimeError) as exc:
                log.debug(
                    "the last stable offsets of %d partition(s) could not be read: %s", len(wanted), exc
                )
                stable = {}
            with self._lock:
                ready = [h for h in self._held if stable.get(h.where, -1) >= h.needed]
                self._held = [h for h in self._held if stable.get(h.where, -1) < h.needed]
                waiting = bool(self._held)
            self._send(ready)
            left = deadline - time.monotonic()
            if not waiting or left <= 0:
                return
            time.sleep(min(pause, left))
            pause = min(0.2, pause * 2)

    def forget(self, stuck: Mapping[Where, int]) -> None:
        """A sweep is about to abort the transaction open at `stuck` (partition: its first offset):
        syncs held for records at or after it point at records that may be its, and never go."""
        with self._lock:
            gone = [h for h in self._held if h.where in stuck and h.needed > stuck[h.where]]
            going = {id(h) for h in gone}
            self._held = [h for h in self._held if id(h) not in going]
        for held in gone:
            held.result.offset_sync_errors += len(held.records)
            log.warning(
                "offset-syncs of %s-%d not sent: the transaction of their records is still open on "
                "the target (its commit markers were lost) and is aborted now; the records are "
                "copied again with syncs of their own",
                *held.where,
            )

    def give_up(self, why: str) -> None:
        """Count what is still held as not sent, with `why`."""
        with self._lock:
            gone, self._held = self._held, []
        for held in gone:
            held.result.offset_sync_errors += len(held.records)
        if gone:
            partitions = sorted({h.where for h in gone})
            log.warning(
                "%d offset-sync(s) of %d partition(s) not sent (%s): %s",
                sum(len(h.records) for h in gone),
                len(partitions),
                why,
                ", ".join(f"{t}-{p}" for t, p in partitions[:5]) + (" ..." if len(partitions) > 5 else ""),
            )

    def _send(self, ready: list[_Held]) -> None:
        if not ready:
            return
        try:
            producer = self._producer()
        except Exception as exc:  # noqa: BLE001 - counted, never raised: the copy is committed
            log.warning("the producer of offset-syncs could not be made: %s", exc)
            producer = None
        for held in ready:
            if producer is None:
                held.result.offset_sync_errors += len(held.records)
                continue
            try:
                produce_syncs(producer, self.topic, held.records, SyncDelivery(held.result))
                producer.poll(0)
            except Exception as exc:  # noqa: BLE001 - counted: the copy is committed
                log.warning("offset-syncs of %s-%d not sent: %s", *held.where, exc)
                held.result.offset_sync_errors += len(held.records)


class SyncDelivery:
    """Delivery callback of source-side offset-syncs: one the source acknowledges counts as
    written (`offset_syncs`), one it refuses (or that is purged unsent) as an error of its
    partition (`offset_sync_errors`)."""

    __slots__ = ("result",)

    def __init__(self, result: UnitResult) -> None:
        self.result = result

    def __call__(self, error, _message) -> None:
        if error is None:
            self.result.offset_syncs += 1
        else:
            self.result.offset_sync_errors += 1


def produce_syncs(producer: Producer, topic: str, records: SyncRecords, on_delivery=None) -> None:
    for sync, headers in records:
        producer.produce(
            topic,
            key=sync.key_bytes(),
            value=sync.value_bytes(),
            partition=0,
            headers=headers,
            on_delivery=on_delivery,
        )
