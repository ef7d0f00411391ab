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
whose copy had committed is written again after the abort (recovery.py decides which). What no
id of the flow can end stops with Kafka's command (hanging.unresolved).

Opening a producer with a slot's id fences that slot's live writer, if a run has one: the
writer stops and the run that opened it reports the slot's partitions fenced, losing nothing
(a later run copies on from progress), as with any writer that takes a slot over.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from confluent_kafka import KafkaError, Producer

from mirrorflow.kafka import ClusterWatch
from mirrorflow.mm2.connect_offsets import decode_offset_value
from mirrorflow.replicate.copy import hanging, recovery
from mirrorflow.replicate.copy.calls import (
    drop,
    flush_all,
    init_transactions,
    new_client_config,
    retrying,
    topic_metadata,
)
from mirrorflow.replicate.copy.ids import older_ids, slot_transactional_id
from mirrorflow.replicate.copy.landed import Landed

log = logging.getLogger("mirrorflow.replicate.copy")


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
    transaction whose keys hash to one progress partition: recovery.held_progress finds them
    all). `landed` (copy/landed.py) tells, for each, whether its copy had been committed in its
    remote partition (a restarted broker can drop a commit's marker in one partition and keep it
    in another): those records are written again, committed, once the abort has ended the
    transaction; when that cannot be told for any of them the transaction is left open and
    reported, never aborted."""
    left: dict[hanging.Where, int] = {}
    highs = hanging.end_offsets(ends, [(progress_topic, p) for p in stuck], watch.limit_s)
    for partition, offset in stuck.items():
        where = (progress_topic, partition)
        held = recovery.held_progress(target_consumer, where, offset, highs[where][1], source)
        if held is None:
            left[where] = offset
            continue
        restore: list[tuple[bytes | None, bytes | None]] = []
        untold: list[hanging.Where] = []
        for owner, record in sorted(held.records.items()):
            if landed is None:
                continue
            copied = decode_offset_value(record.value())
            verdict = None if copied is None else landed(owner[0], owner[1], copied)
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
            left[where] = offset
            continue
        slot = held.slot
        candidates = [slot_transactional_id(source, target, slot)]
        if held.first is not None:
            candidates += older_ids(source, target, held.first[0], held.first[1], 0)
        for transactional in candidates:
            mine = own is not None and own[0] == transactional
            producer = (
                own[1] if mine else fenced_producer(target_producer, transactional, progress_topic, watch)
            )
            try:
                hanging.sweep(producer, hanging.progress_sweep_records(source, slot, [where]), watch)
                ended = not hanging.await_closed(ends, {where: offset})
                if ended and restore:
                    _write_again(producer, where, restore, watch)
            finally:
                if not mine:
                    drop(producer)
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
                break
        else:
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
