"""Before a slot writer writes a remote partition: nothing may be left open there.

A transaction open in a remote partition after the slot's writer opened is no live writer's of
this slot (init_transactions ended the slot's own), so whatever holds it open will never end it:
a crash, and a restarted broker that dropped the transaction's marker in this partition. What it
is decides what ending it costs (decision.py): one that never committed is aborted by a sweep
(hanging.py); one that committed (its progress, in another partition, kept its marker) is
aborted too, and its partition's progress goes back to just before its records, which are copied
again; one that cannot be told stops the partition with Kafka's command, and nothing is ended.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING

from confluent_kafka import Message, Producer

from mirrorflow.kafka import ClusterWatch
from mirrorflow.replicate.copy.calls import flush_all, retrying
from mirrorflow.replicate.copy.chunk import PartitionCopy
from mirrorflow.replicate.copy.counters import stats
from mirrorflow.replicate.copy.recovery import decision, hanging
from mirrorflow.replicate.progress import Stored, progress_record

if TYPE_CHECKING:
    from mirrorflow.replicate.copy.writer import SlotWriter

log = logging.getLogger("mirrorflow.replicate.copy")

Where = tuple[str, int]


def ensure_clear(
    writer: SlotWriter, copies: Sequence[PartitionCopy], watch: ClusterWatch
) -> dict[Where, hanging.HangingTransaction]:
    """Check the remote partitions of `copies` not checked since the producer opened: an open
    transaction there is swept (see hanging.py). Returns the partitions that must not be
    written, with the reason; notes where this writer's records land in the others."""
    wanted = sorted({(c.span.remote_topic, c.span.partition) for c in copies} - writer.checked)
    if not wanted:
        return {}
    job = writer.job
    ends = writer.shared.end_readers()
    state = hanging.end_offsets(ends, wanted, job.unreachable_timeout_s)
    stuck = {where: stable for where, (stable, high) in state.items() if stable < high}
    for where, (stable, high) in state.items():
        if stable == high:
            writer.landing[where] = high
    if not stuck:
        writer.checked.update(wanted)
        return {}
    sweeper = writer.producer if job.exactly_once else writer.fence
    assert sweeper is not None
    by_remote = {(c.span.remote_topic, c.span.partition): c for c in copies}
    bootstrap = str(job.target_producer.get("bootstrap.servers", ""))
    refused: dict[Where, hanging.HangingTransaction] = {}
    committed: dict[Where, decision.OpenData] = {}
    for where, stable in sorted(stuck.items()):
        found = _classify(writer, by_remote[where], where, stable)
        if found.verdict is decision.Verdict.UNTOLD:
            refused[where] = hanging.unresolved(
                {where: stable},
                bootstrap,
                hanging.leaders(ends[0], [where]),
                f"may hold records that were committed ({found.why}): an abort could lose them and a "
                "commit could put them there twice",
            )
        elif found.verdict is decision.Verdict.COMMITTED:
            committed[where] = found
    stuck = {where: stable for where, stable in stuck.items() if where not in refused}
    if stuck:
        # Before the sweep's abort moves the last stable offset past them: offset-syncs this
        # worker holds for records of the open transaction must never go out (held_syncs.py).
        writer.shared.syncs.forget(stuck)
    for _ in range(2):
        if not stuck:
            break
        hanging.sweep(sweeper, hanging.data_sweep_records(stuck), watch)
        stuck = hanging.await_closed(ends, stuck)
    if stuck:
        # A writer of an older kind still running has its transaction open there: fencing its
        # id aborts it.
        for where in stuck:
            writer.fence_older_now(by_remote[where], watch)
        stuck = hanging.await_closed(ends, stuck)
    if stuck:
        # Whoever's it is, this flow cannot end it, and records written behind it stay
        # invisible to read_committed readers until someone does.
        error = hanging.unresolved(
            stuck,
            bootstrap,
            hanging.leaders(ends[0], stuck),
            "no writer of this flow can end (another producer's, or its abort markers were lost)",
        )
        refused.update((where, error) for where in stuck)
    rewind = [(by_remote[where], found) for where, found in sorted(committed.items()) if where not in refused]
    if rewind:
        _rewind(writer, rewind, sweeper, watch)
    clear = [where for where in wanted if where not in refused]
    writer.checked.update(clear)
    return refused


def _classify(writer: SlotWriter, copy: PartitionCopy, where: Where, stable: int) -> decision.OpenData:
    """What the transaction open at `stable` in a remote partition of `copy` is (decision.py)."""
    job, span = writer.job, copy.span

    def next_source_record(offset: int) -> Message | None:
        return decision.first_record_at(
            job.source_consumer, (span.topic, span.partition), offset, committed=True
        )

    first = decision.first_record_at(job.target_consumer, where, stable, committed=False)
    stored = writer.stored(span.topic, span.partition)
    found = decision.classify_open_data(
        first, stored, job.source, span.topic, span.partition, next_source_record
    )
    log.warning(
        "%s-%d: a transaction is open there from offset %d that no live writer will end; %s: %s",
        where[0],
        where[1],
        stable,
        found.verdict.value,
        found.why,
    )
    return found


def _rewind(
    writer: SlotWriter,
    found: list[tuple[PartitionCopy, decision.OpenData]],
    producer: Producer,
    watch: ClusterWatch,
) -> None:
    """After the abort of transactions that had committed (their markers lost in the remote
    partitions), progress goes back to just before their records, committed, and the copies
    start there: the aborted records are copied again."""
    job = writer.job
    commit = os.urandom(6).hex()
    before = {id(copy): writer.stored(copy.span.topic, copy.span.partition) for copy, _ in found}
    producer.begin_transaction()
    for copy, open_data in found:
        span, stored = copy.span, before[id(copy)]
        incarnation = span.incarnation if stored is None else stored.incarnation
        key, value, partition = progress_record(
            job.source,
            span.topic,
            span.partition,
            open_data.rewind_to,
            writer.shared.progress_partitions or 0,
            incarnation,
            job.slots,
            commit,
        )
        producer.produce(job.progress_topic, key=key, value=value, partition=partition)
    flush_all(producer, watch, "progress records")
    retrying(producer.commit_transaction, watch, "commit_transaction")
    for copy, open_data in found:
        span, stored = copy.span, before[id(copy)]
        incarnation = span.incarnation if stored is None else stored.incarnation
        writer.committed[(span.topic, span.partition)] = Stored(
            open_data.rewind_to, incarnation, job.slots, commit
        )
        writer.rewound[(span.topic, span.partition)] = open_data.first_source_offset
        log.warning(
            "%s-%d: progress went back from %s to %d: the records of the transaction open in %s-%d "
            "had committed (the broker skipped its commit marker there) and its abort took them "
            "back, so they are copied again",
            span.topic,
            span.partition,
            "none" if stored is None else stored.offset,
            open_data.rewind_to,
            span.remote_topic,
            span.partition,
        )
    stats.add("transactions_rewound", len(found))
