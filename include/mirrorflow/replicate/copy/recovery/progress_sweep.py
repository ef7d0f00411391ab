"""Ending a hanging transaction in a progress partition, for whoever's settle it holds.

A settle of progress (replicate/progress.py) waits for the transactions open in the progress
partitions it reads. A live writer of the flow keeps none open past its transaction.timeout.ms
(the broker aborts it then), so one still open after job.settle_timeout_s is hanging (see
hanging.py): a broker dropped its abort marker. Every reader of progress would wait for it for
good. The slot writer that meets one at its settle ends it here, and so does the plan step of a
run, which reads all of the flow's progress before anything copies: the first record of the open
transaction names the source partition whose progress it is, hence the writer slot (or the older
per-partition id) that wrote it, and a transaction of that id that writes a sweep record and
aborts ends it. Every key of that slot in the open range is the same transaction's, and each
whose copy had committed is written again after the abort (decision.py decides which). What no
id of the flow can end stops with Kafka's command (hanging.unresolved).

Several workers may meet one hanging transaction at once (they settle progress partitions that
the slots share). In one process they end it one after the other (a lock per progress
partition), and each looks again right before it opens a producer: one that another worker ended
meanwhile is left alone, so no sweep fences another sweep or a writer for nothing. A sweep
producer fenced by a worker of another process sweeping the same transaction looks again too:
ended by the other, it is done.

Opening a producer with a slot's id fences that slot's live writer, if a run has one. In the
same process the writer learns that its own worker's sweep did it (`swept_since`) and opens
again, copying on from progress; a writer of another process stops and reports the slot's
partitions fenced, losing nothing (a later run or the window's next batch copies on from
progress), as with any writer that takes a slot over.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer

from mirrorflow.kafka import ClusterWatch
from mirrorflow.mm2.connect_offsets import decode_offset_value
from mirrorflow.replicate.copy.calls import (
    drop,
    flush_all,
    init_transactions,
    is_fencing,
    new_client_config,
    retrying,
    topic_metadata,
)
from mirrorflow.replicate.copy.ids import older_ids, slot_transactional_id
from mirrorflow.replicate.copy.recovery import decision, hanging
from mirrorflow.replicate.copy.recovery.landed import Landed

log = logging.getLogger("mirrorflow.replicate.copy")

_lock = threading.Lock()
_sweeping: dict[hanging.Where, threading.Lock] = {}
"""Progress partition -> the lock its sweeps in this process take, one after the other."""
_swept: dict[str, float] = {}
"""transactional.id -> when (monotonic) a sweep of this process last held a producer with it."""


def swept_since(transactional: str, since: float) -> bool:
    """Whether a sweep of this process opened a producer with `transactional` after `since`: a
    writer with that id opened at `since` and fenced now was fenced by its own worker, not by a
    newer writer."""
    with _lock:
        return _swept.get(transactional, -1.0) > since


def _note_sweep(transactional: str) -> None:
    with _lock:
        _swept[transactional] = time.monotonic()


def _partition_lock(where: hanging.Where) -> threading.Lock:
    with _lock:
        return _sweeping.setdefault(where, threading.Lock())


def fenced_producer(
    target_producer: Mapping[str, Any],
    transactional: str,
    progress_topic: str,
    watch: ClusterWatch,
    error_cb: Callable[[KafkaError], None] | None = None,
) -> Producer:
    """A producer with the transactional.id `transactional`, initialised: every older producer
    with that id is fenced (its open transaction aborted)."""
    config = new_client_config(
        {**target_producer, "enable.idempotence": True, "acks": "all", "transactional.id": transactional}
    )
    config["error_cb"] = error_cb or watch.on_error
    producer = Producer(config)
    try:
        # Its first Metadata request brings up the connection, the second waits for a named broker.
        topic_metadata(producer, progress_topic, watch)
        init_transactions(producer, progress_topic, watch)
    except BaseException:
        drop(producer)
        raise
    return producer


def end_hanging_progress(
    *,
    source: str,
    target: str,
    target_producer: Mapping[str, Any],
    target_consumer: Mapping[str, Any],
    progress_topic: str,
    stuck: Mapping[int, int],
    ends: tuple[Any, Any],
    watch: ClusterWatch,
    own: tuple[str, Producer] | None = None,
    landed: Landed | None = None,
) -> None:
    """End the transaction open at `stuck` (progress partition -> first open offset) with the id
    of the writer that opened it; raises hanging.HangingTransaction for those no id of the flow
    ends. `own` is the caller's (transactional.id, producer), used instead of a new producer
    with that id (which would fence the caller).

    The open transaction may hold the progress of several source partitions (a shared
    transaction whose keys hash to one progress partition: decision.held_progress finds them
    all). `landed` (copy/recovery/landed.py) tells, for each, whether its copy had been committed in its
    remote partition (a restarted broker can drop a commit's marker in one partition and keep it
    in another): those records are written again, committed, once the abort has ended the
    transaction; when that cannot be told for any of them the transaction is left open and
    reported, never aborted."""
    left: dict[hanging.Where, int] = {}
    for partition, offset in stuck.items():
        where = (progress_topic, partition)
        with _partition_lock(where):
            if not _end_one(
                where, offset, source, target, target_producer, target_consumer, ends, watch, own, landed
            ):
                left[where] = offset
    if left:
        raise hanging.unresolved(
            left,
            str(target_producer.get("bootstrap.servers", "")),
            hanging.leaders(ends[0], left),
            "no writer of this flow can end (its first record is not this flow's progress, or its "
            "abort markers were lost again), or whether its records were committed on the target cannot "
            "be told (the source record its progress names is gone): ending it by an abort could copy "
            "them twice",
        )


def _end_one(
    where: hanging.Where,
    offset: int,
    source: str,
    target: str,
    target_producer: Mapping[str, Any],
    target_consumer: Mapping[str, Any],
    ends: tuple[Any, Any],
    watch: ClusterWatch,
    own: tuple[str, Producer] | None,
    landed: Landed | None,
) -> bool:
    """End the transaction open in `where` from `offset` (see end_hanging_progress); whether it
    is ended (by this worker or, meanwhile, by another)."""
    progress_topic, partition = where
    stable, high = hanging.end_offsets(ends, [where], watch.limit_s)[where]
    if not stable <= offset < high:
        log.info("%s-%d: the transaction that hung there from offset %d was ended meanwhile", *where, offset)
        return True
    held = decision.held_progress(target_consumer, where, offset, high, source)
    if held is None:
        return False
    restore: list[tuple[bytes | None, bytes | None]] = []
    untold: list[hanging.Where] = []
    if landed is not None:
        copied = {owner: decode_offset_value(record.value()) for owner, record in held.records.items()}
        # Every key the transaction holds, asked at once (landed.py reads them in batches).
        verdicts = landed([(t, p, offset) for (t, p), offset in copied.items() if offset is not None])
        for owner, record in sorted(held.records.items()):
            verdict = verdicts.get(owner)
            if verdict is None:
                untold.append(owner)
            elif verdict:
                restore.append((record.key(), record.value()))
    if untold:
        log.warning(
            "%s-%d: a transaction hangs there from offset %d (progress of %s); whether its "
            "records were committed on the target cannot be told, so it is not ended",
            progress_topic,
            partition,
            offset,
            ", ".join(f"{t}-{p}" for t, p in untold),
        )
        return False
    slot, slots = held.slot, held.slots
    candidates = [slot_transactional_id(source, target, slot, slots)]
    if held.first is not None:
        candidates += older_ids(source, target, held.first[0], held.first[1], 0)
    for transactional in candidates:
        mine = own is not None and own[0] == transactional
        try:
            ended = _sweep_with(
                transactional,
                own[1] if mine and own else None,
                where,
                offset,
                restore,
                source,
                (slot, slots),
                target_producer,
                watch,
                ends,
            )
        except KafkaException as exc:
            if not is_fencing(exc):
                raise
            # A worker of another process sweeps the same transaction with the same id.
            if hanging.await_closed(ends, {where: offset}):
                continue
            log.info(
                "%s-%d: the transaction that hung there from offset %d was ended by another worker "
                "of the flow",
                *where,
                offset,
            )
            return True
        if ended:
            log.warning(
                "%s-%d: ended the transaction hanging there from offset %d (progress of %s, "
                "transactional.id %s)%s",
                progress_topic,
                partition,
                offset,
                ", ".join(f"{t}-{p}" for t, p in sorted(held.records)) or "none",
                transactional,
                f"; the records of {len(restore)} of them were committed on the target (the broker "
                "had dropped the commit marker here), so their progress was written again"
                if restore
                else "",
            )
            return True
    return False


def _sweep_with(
    transactional: str,
    own: Producer | None,
    where: hanging.Where,
    offset: int,
    restore: list[tuple[bytes | None, bytes | None]],
    source: str,
    slot: tuple[int, int],
    target_producer: Mapping[str, Any],
    watch: ClusterWatch,
    ends: tuple[Any, Any],
) -> bool:
    """One sweep of `where` with the id `transactional` (the caller's producer `own` when it has
    that id); whether the transaction open from `offset` ended. The time is noted before the new
    producer fences the id's live writer and again once it has: that writer, if this process
    runs it, then knows the fencing was its own worker's (swept_since)."""
    if own is None:
        _note_sweep(transactional)
        producer = fenced_producer(target_producer, transactional, where[0], watch)
        _note_sweep(transactional)
    else:
        producer = own
    try:
        hanging.sweep(producer, hanging.progress_sweep_records(source, slot[0], [where], slot[1]), watch)
        ended = not hanging.await_closed(ends, {where: offset})
        if ended and restore:
            _write_again(producer, where, restore, watch)
        return ended
    finally:
        if own is None:
            drop(producer)


def _write_again(
    producer: Producer,
    where: hanging.Where,
    records: list[tuple[bytes | None, bytes | None]],
    watch: ClusterWatch,
) -> None:
    """The progress records of a transaction that had committed their copies, committed again."""
    producer.begin_transaction()
    for key, value in records:
        producer.produce(where[0], value, key, where[1])
    flush_all(producer, watch, "progress records")
    retrying(producer.commit_transaction, watch, "commit_transaction")
