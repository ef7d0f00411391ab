"""Transaction coordinator: transactional ids, epochs, and the state machine of Kafka's
TransactionCoordinator / TransactionMetadata.

This node is coordinator and partition leader at once, so markers are written directly to
the partition logs while EndTxn is handled (Kafka does that asynchronously through
WriteTxnMarkers); a transaction therefore never stays in PrepareCommit/PrepareAbort beyond
one request, except across a crash, which `open` finishes on the next start.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from devbroker.log import now_ms

if TYPE_CHECKING:
    from devbroker.broker import Broker

log = logging.getLogger(__name__)

EMPTY = "Empty"
ONGOING = "Ongoing"
PREPARE_COMMIT = "PrepareCommit"
PREPARE_ABORT = "PrepareAbort"
COMPLETE_COMMIT = "CompleteCommit"
COMPLETE_ABORT = "CompleteAbort"
DEAD = "Dead"
PREPARE_EPOCH_FENCE = "PrepareEpochFence"
STATES = (
    EMPTY,
    ONGOING,
    PREPARE_COMMIT,
    PREPARE_ABORT,
    COMPLETE_COMMIT,
    COMPLETE_ABORT,
    DEAD,
    PREPARE_EPOCH_FENCE,
)

NO_EPOCH = -1
EPOCH_EXHAUSTED = 32767 - 1  # Short.MAX_VALUE - 1: the last epoch before a new producer id is needed


class TxnError(Exception):
    def __init__(self, code: ErrorCode, message: str = "") -> None:
        super().__init__(message or code.name)
        self.code = code


@dataclasses.dataclass
class TxnMetadata:
    transactional_id: str
    producer_id: int
    last_producer_id: int = -1
    epoch: int = NO_EPOCH
    last_epoch: int = NO_EPOCH
    timeout_ms: int = 60000
    state: str = EMPTY
    partitions: set[tuple[str, int]] = dataclasses.field(default_factory=set)
    groups: set[str] = dataclasses.field(default_factory=set)
    start_ms: int = -1
    last_update_ms: int = 0

    def to_fields(self) -> dict[str, Any]:
        return {
            "id": self.transactional_id,
            "pid": self.producer_id,
            "last_pid": self.last_producer_id,
            "epoch": self.epoch,
            "last_epoch": self.last_epoch,
            "timeout": self.timeout_ms,
            "state": self.state,
            "partitions": sorted([t, p] for t, p in self.partitions),
            "groups": sorted(self.groups),
            "start": self.start_ms,
            "updated": self.last_update_ms,
        }

    @classmethod
    def from_fields(cls, f: dict[str, Any]) -> TxnMetadata:
        return cls(
            transactional_id=f["id"],
            producer_id=int(f["pid"]),
            last_producer_id=int(f["last_pid"]),
            epoch=int(f["epoch"]),
            last_epoch=int(f["last_epoch"]),
            timeout_ms=int(f["timeout"]),
            state=f["state"],
            partitions={(t, int(p)) for t, p in f["partitions"]},
            groups=set(f["groups"]),
            start_ms=int(f["start"]),
            last_update_ms=int(f["updated"]),
        )


class TransactionCoordinator:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.txns: dict[str, TxnMetadata] = {}

    # -- journal --------------------------------------------------------------------------
    def apply_journal(self, kind: str, fields: dict[str, Any]) -> None:
        if kind == "txn.state":
            meta = TxnMetadata.from_fields(fields)
            self.txns[meta.transactional_id] = meta
        elif kind == "txn.remove":
            self.txns.pop(fields["id"], None)

    def snapshot(self) -> Iterable[tuple[str, dict[str, Any]]]:
        for meta in self.txns.values():
            yield "txn.state", meta.to_fields()

    def _persist(self, meta: TxnMetadata) -> None:
        meta.last_update_ms = now_ms()
        self.broker.journal.append("txn.state", **meta.to_fields())

    def open(self) -> None:
        """Finish transactions a crash left between prepare and complete."""
        for meta in list(self.txns.values()):
            if meta.state in (PREPARE_COMMIT, PREPARE_ABORT):
                self._complete(meta, meta.state == PREPARE_COMMIT, recovering=True)

    # -- producer ids ---------------------------------------------------------------------
    def init_producer_id(
        self, transactional_id: str | None, timeout_ms: int, producer_id: int, producer_epoch: int
    ) -> tuple[int, int]:
        if transactional_id is None:
            return self.broker.producer_ids.allocate(), 0
        if transactional_id == "":
            raise TxnError(ErrorCode.invalid_request, "transactional id must not be empty")
        max_timeout = int(self.broker.config.values.get("transaction.max.timeout.ms"))
        if timeout_ms <= 0 or timeout_ms > max_timeout:
            raise TxnError(
                ErrorCode.invalid_transaction_timeout,
                f"transaction timeout {timeout_ms} ms is not in (0, transaction.max.timeout.ms={max_timeout}]",
            )
        expected = (producer_id, producer_epoch) if producer_id >= 0 else None
        meta = self.txns.get(transactional_id)
        if meta is None:
            meta = TxnMetadata(transactional_id, self.broker.producer_ids.allocate(), timeout_ms=timeout_ms)
            meta.epoch = 0
            meta.last_epoch = NO_EPOCH
            self.txns[transactional_id] = meta
            self._persist(meta)
            return meta.producer_id, meta.epoch
        if expected is not None and not self._valid_producer(meta, *expected):
            raise TxnError(ErrorCode.producer_fenced, "producer id/epoch in InitProducerId do not match")
        if meta.state in (PREPARE_COMMIT, PREPARE_ABORT):
            raise TxnError(ErrorCode.concurrent_transactions)
        if meta.state == ONGOING:
            # Kafka fences the running producer by bumping the epoch, aborts its transaction and
            # asks the caller to retry, which bumps the epoch once more for the new producer.
            self._fence(meta)
            raise TxnError(ErrorCode.concurrent_transactions)
        if meta.epoch >= EPOCH_EXHAUSTED and (expected is None or expected[1] == meta.epoch):
            meta.last_producer_id = meta.producer_id
            meta.producer_id = self.broker.producer_ids.allocate()
            meta.last_epoch = meta.epoch if expected is not None else NO_EPOCH
            meta.epoch = 0
        elif expected is None:
            meta.last_epoch = NO_EPOCH
            meta.epoch += 1
        elif meta.epoch == NO_EPOCH or expected[1] == meta.epoch:
            meta.last_epoch = meta.epoch
            meta.epoch += 1
        elif expected[1] != meta.last_epoch:
            raise TxnError(ErrorCode.producer_fenced, "producer epoch is fenced")
        meta.timeout_ms = timeout_ms
        meta.state = EMPTY
        meta.partitions.clear()
        meta.groups.clear()
        meta.start_ms = -1
        self._persist(meta)
        return meta.producer_id, meta.epoch

    @staticmethod
    def _valid_producer(meta: TxnMetadata, producer_id: int, epoch: int) -> bool:
        return (
            meta.epoch == NO_EPOCH
            or producer_id == meta.producer_id
            or (producer_id == meta.last_producer_id and epoch >= EPOCH_EXHAUSTED)
        )

    def _fence(self, meta: TxnMetadata) -> None:
        """Bump the epoch of an ongoing transaction and abort it with the new epoch."""
        if meta.epoch < EPOCH_EXHAUSTED:
            meta.epoch += 1
        meta.last_epoch = NO_EPOCH
        self._end(meta, commit=False)

    # -- membership of a transaction ------------------------------------------------------
    def _lookup(self, transactional_id: str, producer_id: int, epoch: int) -> TxnMetadata:
        if not transactional_id:
            raise TxnError(ErrorCode.invalid_request, "transactional id must not be empty")
        meta = self.txns.get(transactional_id)
        if meta is None or meta.producer_id != producer_id:
            raise TxnError(ErrorCode.invalid_producer_id_mapping)
        if meta.epoch != epoch:
            raise TxnError(ErrorCode.producer_fenced)
        if meta.state in (PREPARE_COMMIT, PREPARE_ABORT):
            raise TxnError(ErrorCode.concurrent_transactions)
        return meta

    def add_partitions(
        self, transactional_id: str, producer_id: int, epoch: int, partitions: set[tuple[str, int]]
    ) -> None:
        meta = self._lookup(transactional_id, producer_id, epoch)
        if meta.state == ONGOING and partitions <= meta.partitions:
            return
        self._begin(meta)
        meta.partitions |= partitions
        self._persist(meta)

    def add_group(self, transactional_id: str, producer_id: int, epoch: int, group_id: str) -> None:
        meta = self._lookup(transactional_id, producer_id, epoch)
        if meta.state == ONGOING and group_id in meta.groups:
            return
        self._begin(meta)
        meta.groups.add(group_id)
        self._persist(meta)

    def _begin(self, meta: TxnMetadata) -> None:
        if meta.state != ONGOING:
            meta.state = ONGOING
            meta.start_ms = now_ms()
            meta.partitions.clear()
            meta.groups.clear()

    def verify_partition(
        self, transactional_id: str | None, producer_id: int, epoch: int, topic: str, partition: int
    ) -> ErrorCode:
        """Produce-side check that a transactional batch belongs to a transaction that added it."""
        meta = self.txns.get(transactional_id or "")
        if meta is None or meta.producer_id != producer_id:
            return ErrorCode.invalid_producer_id_mapping
        if epoch < meta.epoch:
            return ErrorCode.invalid_producer_epoch
        if meta.state != ONGOING or (topic, partition) not in meta.partitions:
            return ErrorCode.invalid_txn_state
        return ErrorCode.none

    def check_offsets_commit(
        self, transactional_id: str, producer_id: int, epoch: int, group_id: str
    ) -> ErrorCode:
        meta = self.txns.get(transactional_id)
        if meta is None or meta.producer_id != producer_id:
            return ErrorCode.invalid_producer_id_mapping
        if meta.epoch != epoch:
            return ErrorCode.producer_fenced
        if meta.state != ONGOING or group_id not in meta.groups:
            return ErrorCode.invalid_txn_state
        return ErrorCode.none

    # -- ending ---------------------------------------------------------------------------
    def end_txn(self, transactional_id: str, producer_id: int, epoch: int, commit: bool) -> None:
        if not transactional_id:
            raise TxnError(ErrorCode.invalid_request, "transactional id must not be empty")
        meta = self.txns.get(transactional_id)
        if meta is None or meta.producer_id != producer_id:
            raise TxnError(ErrorCode.invalid_producer_id_mapping)
        if epoch != meta.epoch:
            raise TxnError(ErrorCode.producer_fenced)
        if meta.state == ONGOING:
            self._end(meta, commit)
        elif meta.state == COMPLETE_COMMIT and commit or meta.state == COMPLETE_ABORT and not commit:
            return
        elif meta.state == PREPARE_COMMIT and commit or meta.state == PREPARE_ABORT and not commit:
            raise TxnError(ErrorCode.concurrent_transactions)
        else:
            raise TxnError(
                ErrorCode.invalid_txn_state,
                f"cannot {'commit' if commit else 'abort'} transaction {transactional_id} in state {meta.state}",
            )

    def _end(self, meta: TxnMetadata, commit: bool) -> None:
        meta.state = PREPARE_COMMIT if commit else PREPARE_ABORT
        self._persist(meta)
        self._complete(meta, commit)

    def _complete(self, meta: TxnMetadata, commit: bool, *, recovering: bool = False) -> None:
        now = now_ms()
        for topic, partition in sorted(meta.partitions):
            partition_log = self.broker.topics.get_log(topic, partition)
            if partition_log is None:
                continue
            if recovering:
                entry = partition_log.producers.entries.get(meta.producer_id)
                if entry is None or (entry.txn_first_offset is None and entry.epoch >= meta.epoch):
                    continue  # the marker was written before the crash
            partition_log.append_marker(meta.producer_id, meta.epoch, commit, now)
        for group_id in sorted(meta.groups):
            self.broker.groups.complete_txn(group_id, meta.producer_id, commit)
        meta.state = COMPLETE_COMMIT if commit else COMPLETE_ABORT
        self._persist(meta)
        log.info(
            "transaction %s (producer %d epoch %d) %s",
            meta.transactional_id,
            meta.producer_id,
            meta.epoch,
            "committed" if commit else "aborted",
        )

    def abort_expired(self) -> int:
        """Abort (and fence) transactions open longer than their timeout; returns how many."""
        now = now_ms()
        count = 0
        for meta in list(self.txns.values()):
            if meta.state == ONGOING and meta.start_ms >= 0 and now - meta.start_ms > meta.timeout_ms:
                log.info(
                    "aborting transaction %s: open longer than %d ms", meta.transactional_id, meta.timeout_ms
                )
                self._fence(meta)
                count += 1
        return count

    def expire_idle(self) -> None:
        """Forget transactional ids idle for transactional.id.expiration.ms, as Kafka does."""
        limit = int(self.broker.config.values.get("transactional.id.expiration.ms"))
        now = now_ms()
        for tid, meta in list(self.txns.items()):
            if meta.state in (EMPTY, COMPLETE_COMMIT, COMPLETE_ABORT) and now - meta.last_update_ms > limit:
                del self.txns[tid]
                self.broker.journal.append("txn.remove", id=tid)

    def on_topic_deleted(self, topic: str) -> None:
        for meta in self.txns.values():
            meta.partitions = {tp for tp in meta.partitions if tp[0] != topic}
