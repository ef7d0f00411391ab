"""Idempotent producer state: producer ids, and per partition the epoch and recent sequences.

Per partition state is rebuilt at start by scanning the stored batches (their headers carry
producer id, epoch and sequences), as Kafka rebuilds it from the log; only the producer id
counter lives in the journal. The checks mirror Kafka's ProducerAppendInfo: a stale epoch is
INVALID_PRODUCER_EPOCH, a gap is OUT_OF_ORDER_SEQUENCE_NUMBER, one of the last five batches
sent again is answered with its original offsets, and (as since Kafka 2.5) a producer the
partition has no state for may start at any sequence.
"""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Iterable

from kio.schema.errors import ErrorCode

from devbroker.batches import NO_PRODUCER_ID, NO_SEQUENCE, BatchInfo

RECENT_BATCHES = 5
INT32_MAX = 0x7FFFFFFF


class ProduceError(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclasses.dataclass(slots=True)
class BatchMeta:
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int


@dataclasses.dataclass(slots=True)
class ProducerEntry:
    producer_id: int
    epoch: int = -1
    batches: collections.deque[BatchMeta] = dataclasses.field(
        default_factory=lambda: collections.deque(maxlen=RECENT_BATCHES)
    )
    txn_first_offset: int | None = None
    last_timestamp: int = -1
    coordinator_epoch: int = -1

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE


def in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


class PartitionProducers:
    """Producer entries of one partition."""

    def __init__(self) -> None:
        self.entries: dict[int, ProducerEntry] = {}

    def check(self, info: BatchInfo) -> BatchMeta | None:
        """Validate an incoming batch; returns the stored batch it duplicates, if any."""
        pid = info.producer_id
        if pid == NO_PRODUCER_ID:
            return None
        entry = self.entries.get(pid)
        if entry is None:
            return None
        if info.producer_epoch < entry.epoch:
            raise ProduceError(
                ErrorCode.invalid_producer_epoch,
                f"Epoch of producer {pid} is {info.producer_epoch}, which is smaller than the last seen epoch"
                f" {entry.epoch}",
            )
        if entry.txn_first_offset is not None and not info.is_transactional:
            raise ProduceError(
                ErrorCode.invalid_txn_state,
                f"Expected transactional write from producer {pid} with an ongoing transaction",
            )
        if info.base_sequence == NO_SEQUENCE:
            return None
        if info.producer_epoch == entry.epoch:
            for meta in entry.batches:
                if meta.first_seq == info.base_sequence and meta.last_seq == info.last_sequence:
                    return meta
        if info.producer_epoch != entry.epoch:
            if info.base_sequence != 0 and entry.epoch != -1:
                raise ProduceError(
                    ErrorCode.out_of_order_sequence_number,
                    f"Invalid sequence number for new epoch of producer {pid}: {info.producer_epoch} (request"
                    f" epoch), {info.base_sequence} (seq. number), {entry.epoch} (current producer epoch)",
                )
        elif entry.batches and not in_sequence(entry.last_seq, info.base_sequence):
            raise ProduceError(
                ErrorCode.out_of_order_sequence_number,
                f"Out of order sequence number for producer {pid}: {info.base_sequence} (incoming seq. number),"
                f" {entry.last_seq} (current end sequence number)",
            )
        return None

    def record(self, info: BatchInfo) -> None:
        """Take an appended (or recovered) data batch into the state."""
        pid = info.producer_id
        if pid == NO_PRODUCER_ID:
            return
        entry = self.entries.get(pid)
        if entry is None:
            entry = self.entries[pid] = ProducerEntry(pid)
        if info.producer_epoch != entry.epoch:
            entry.epoch = info.producer_epoch
            entry.batches.clear()
        if info.base_sequence != NO_SEQUENCE:
            entry.batches.append(
                BatchMeta(
                    info.base_sequence,
                    info.last_sequence,
                    info.base_offset,
                    info.last_offset,
                    info.max_timestamp,
                )
            )
        entry.last_timestamp = info.max_timestamp
        if info.is_transactional and entry.txn_first_offset is None:
            entry.txn_first_offset = info.base_offset

    def end_txn(self, producer_id: int, epoch: int, coordinator_epoch: int = 0) -> int | None:
        """A control marker for `producer_id`: returns the first offset of the ended transaction."""
        entry = self.entries.get(producer_id)
        if entry is None:
            entry = self.entries[producer_id] = ProducerEntry(producer_id, epoch)
        if epoch > entry.epoch:
            entry.epoch = epoch
            entry.batches.clear()
        entry.coordinator_epoch = coordinator_epoch
        first = entry.txn_first_offset
        entry.txn_first_offset = None
        return first

    def ongoing(self) -> Iterable[tuple[int, int]]:
        """(producer id, first offset) of open transactions."""
        for entry in self.entries.values():
            if entry.txn_first_offset is not None:
                yield entry.producer_id, entry.txn_first_offset

    def first_unstable_offset(self) -> int | None:
        firsts = [e.txn_first_offset for e in self.entries.values() if e.txn_first_offset is not None]
        return min(firsts) if firsts else None

    def drop_before(self, offset: int) -> None:
        """Forget batches removed by retention or DeleteRecords (open transactions stay)."""
        for pid in list(self.entries):
            entry = self.entries[pid]
            while entry.batches and entry.batches[0].last_offset < offset:
                entry.batches.popleft()
            if not entry.batches and entry.txn_first_offset is None:
                del self.entries[pid]


class ProducerIdAllocator:
    """Hands out producer ids; the high-water mark is journaled so ids are never reused."""

    KIND = "producer.next_id"

    def __init__(self, journal) -> None:
        self.journal = journal
        self.next_id = 1000

    def allocate(self) -> int:
        pid = self.next_id
        self.next_id += 1
        self.journal.append(self.KIND, next_id=self.next_id)
        return pid

    def apply_journal(self, kind: str, fields: dict) -> None:
        if kind == self.KIND:
            self.next_id = max(self.next_id, int(fields["next_id"]))

    def snapshot(self) -> Iterable[tuple[str, dict]]:
        yield self.KIND, {"next_id": self.next_id}
