"""Hanging transactions on the target: open in a partition, unknown to their coordinator, as a
broker that dropped its abort markers after a crash leaves them (issue 21, defect 9).

The state is built deterministically (tests/integration/wire.py): InitProducerId for a
transactional.id, then a transactional batch of that producer id written straight into the
partition, which Kafka before transactions v2 accepts when partition verification is off (as on
brokers before 3.6). Kafka ends whatever a producer id has open in a partition with that id's
next marker, so the copy's next commit there would make the forged records visible, as the
rerun after a crash made the dead copy's records visible twice (tests/reliability/test_target_crash.py
runs the crash itself).
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Producer

from mirrorflow.mm2.connect_offsets import SourceOffsetKey, encode_offset_value
from mirrorflow.replicate import copy
from mirrorflow.replicate.copy import copy_unit, transactional_id
from mirrorflow.replicate.copy.ids import slot_transactional_id
from mirrorflow.replicate.plan import PartitionSpan, writer_slot
from mirrorflow.replicate.progress import read_progress, read_progress_entries

from ..integration.kafkatools import create_topics, kafka_transactions, produce, read_all
from ..integration.test_copy import PROGRESS, SYNCS_ON_SOURCE, make_job
from ..integration.test_replicate_scenarios import mirror_config, run_once
from ..integration.wire import forge_hanging_transaction

pytestmark = pytest.mark.local_kafka

TOTAL = 100


@pytest.fixture
def pair(unverified_clusters):
    src, dst = unverified_clusters
    create_topics(src.bootstrap, ("orders", 1), (SYNCS_ON_SOURCE, 1, {"cleanup.policy": "compact"}))
    create_topics(dst.bootstrap, ("A.orders", 1), (PROGRESS, 25, {"cleanup.policy": "compact"}))
    produce(src.bootstrap, "orders", [{"key": b"k%d" % i, "value": b"v%d" % i} for i in range(TOTAL)])
    return src, dst


def now_ms() -> int:
    return int(time.time() * 1000)


def dead_copy_and_its_hanging_progress(src, dst, dead_end: int, *, committed: bool) -> None:
    """Offsets [TOTAL, dead_end) produced on the source and copied by a dead copy whose
    transaction was committed or aborted on the target, its progress record (naming dead_end - 1)
    left hanging in the progress partition, then TOTAL more records on the source."""
    produce(
        src.bootstrap, "orders", [{"key": b"k%d" % i, "value": b"v%d" % i} for i in range(TOTAL, dead_end)]
    )
    dead = Producer({"bootstrap.servers": dst.bootstrap, "transactional.id": "dead-copy"})
    dead.init_transactions(30)
    dead.begin_transaction()
    for record in read_all(src.bootstrap, "orders")[TOTAL:]:
        dead.produce("A.orders", record.value, record.key, 0, timestamp=record.timestamp)
    if committed:
        dead.commit_transaction(30)
    else:
        dead.abort_transaction(30)
    del dead
    key = SourceOffsetKey("A", "orders", 0)
    forge_hanging_transaction(
        dst.bootstrap,
        slot_transactional_id("A", "B", writer_slot("orders", 0)),
        PROGRESS,
        key.offsets_partition(25),
        [(key.key_bytes(), encode_offset_value(dead_end - 1))],
        now_ms(),
    )
    produce(
        src.bootstrap,
        "orders",
        [{"key": b"k%d" % i, "value": b"v%d" % i} for i in range(dead_end, dead_end + TOTAL)],
    )


def test_a_hanging_transaction_of_the_slot_in_a_remote_partition_is_ended_before_the_copy_writes(
    pair,
) -> None:
    """The dead copy's records (here one forged record) stay invisible: without the sweep, the
    copy's commit in A.orders-0 would commit them along with its own."""
    src, dst = pair
    forged = forge_hanging_transaction(
        dst.bootstrap,
        transactional_id("A", "B", "orders", 0),
        "A.orders",
        0,
        [(b"k0", b"dead copy")],
        now_ms(),
    )
    swept = copy.stats.transactions_swept

    result = copy_unit(make_job(src, dst), PartitionSpan("orders", 0, "A.orders", 0, TOTAL))

    assert result.ok, result.error
    assert [r.value for r in read_all(dst.bootstrap, "A.orders")] == [b"v%d" % i for i in range(TOTAL)]
    assert forged == 0 and copy.stats.transactions_swept > swept


def test_a_hanging_transaction_of_another_slot_in_a_progress_partition_is_ended_by_that_slot(pair) -> None:
    """A progress partition whose committed view cannot pass a dead transaction held every later
    settle for good ("stayed behind an open transaction for 120s", run after run). Its first record
    names the partition whose progress it is, hence the slot whose id ends it."""
    src, dst = pair
    other = next(p for p in range(1000) if writer_slot("elsewhere", p) != writer_slot("orders", 0))
    home = SourceOffsetKey("A", "orders", 0).offsets_partition(25)
    key = SourceOffsetKey("A", "elsewhere", other).key_bytes()
    forge_hanging_transaction(
        dst.bootstrap,
        transactional_id("A", "B", "elsewhere", other),
        PROGRESS,
        home,
        [(key, encode_offset_value(7))],
        now_ms(),
    )
    # The settle waits for live transactions up to the writers' transaction.timeout.ms plus a
    # margin; 10 s here keeps that wait short (the default is 60 s: the same path, a longer wait).
    job = make_job(
        src, dst, target_producer={"bootstrap.servers": dst.bootstrap, "transaction.timeout.ms": 10000}
    )

    result = copy_unit(job, PartitionSpan("orders", 0, "A.orders", 0, TOTAL))

    assert result.ok, result.error
    assert [r.value for r in read_all(dst.bootstrap, "A.orders")] == [b"v%d" % i for i in range(TOTAL)]
    progress = read_progress({"bootstrap.servers": dst.bootstrap}, PROGRESS, "A", timeout_s=10)
    assert progress == {("orders", 0): TOTAL - 1}, "the dead progress record stayed invisible"


def test_a_hanging_progress_transaction_of_a_micro_batch_flows_writer_is_ended_by_its_slot(pair) -> None:
    """A micro-batch flow's writers have the flow's tasks.max slots (here 2): the dead progress
    record says so, and the sweep ends its transaction with that slot's id, which the 256 slots'
    id of the partition never could (the settle then waited for good)."""
    src, dst = pair
    other = next(p for p in range(1000) if writer_slot("elsewhere", p, 2) != writer_slot("orders", 0, 2))
    home = SourceOffsetKey("A", "orders", 0).offsets_partition(25)
    key = SourceOffsetKey("A", "elsewhere", other).key_bytes()
    forge_hanging_transaction(
        dst.bootstrap,
        slot_transactional_id("A", "B", writer_slot("elsewhere", other, 2), 2),
        PROGRESS,
        home,
        [(key, encode_offset_value(7, "", 2, "dead0c0ffee0"))],
        now_ms(),
    )
    job = make_job(
        src,
        dst,
        target_producer={"bootstrap.servers": dst.bootstrap, "transaction.timeout.ms": 10000},
        slots=2,
    )

    result = copy_unit(job, PartitionSpan("orders", 0, "A.orders", 0, TOTAL))

    assert result.ok, result.error
    assert [r.value for r in read_all(dst.bootstrap, "A.orders")] == [b"v%d" % i for i in range(TOTAL)]
    entries = read_progress_entries({"bootstrap.servers": dst.bootstrap}, PROGRESS, "A", timeout_s=10)
    assert {k: (v.offset, v.slots) for k, v in entries.items()} == {("orders", 0): (TOTAL - 1, 2)}


def test_a_transaction_no_id_of_the_flow_can_end_stops_the_partition_with_kafkas_command(pair) -> None:
    """Another producer's hanging transaction: the copy writes nothing behind it (it would stay
    invisible to read_committed readers) and names the command that ends it; once an operator ran
    that very command, the next copy is exact."""
    src, dst = pair
    offset = forge_hanging_transaction(
        dst.bootstrap, "someone-else", "A.orders", 0, [(b"x", b"not ours")], now_ms()
    )
    job = make_job(src, dst)
    span = PartitionSpan("orders", 0, "A.orders", 0, TOTAL)

    result = copy_unit(job, span)

    assert not result.ok and result.records == 0
    command = f"abort --topic A.orders --partition 0 --start-offset {offset}"
    assert command in result.error and "kafka-transactions.sh" in result.error, result.error
    abort = kafka_transactions(dst.bootstrap, *command.split())
    assert abort.returncode == 0, abort.stdout + abort.stderr

    again = copy_unit(job, span)

    assert again.ok, again.error
    assert [r.value for r in read_all(dst.bootstrap, "A.orders")] == [b"v%d" % i for i in range(TOTAL)]


def test_a_hanging_transaction_in_a_progress_partition_is_ended_by_the_next_plan(pair) -> None:
    """After a target crash the plan's read of progress met a transaction its broker had lost the
    abort marker of; it waited 120 s and failed, run after run, before any copy could end it (the
    suite's single-node target-crash run). The plan now ends it with the id that opened it (the
    slot of the partition its first record is the progress of) and plans from the true progress:
    the dead record, which would move orders-0 back to offset 7, stays invisible, and the next
    run copies exactly the new records."""
    src, dst = pair
    config = mirror_config(
        [src, dst], ["A->B"], {"topics": "orders", "B.producer.transaction.timeout.ms": "10000"}
    )
    assert run_once(config, "A", "B").records == TOTAL
    home = SourceOffsetKey("A", "orders", 0).offsets_partition(25)
    forge_hanging_transaction(
        dst.bootstrap,
        slot_transactional_id("A", "B", writer_slot("orders", 0)),
        PROGRESS,
        home,
        [(SourceOffsetKey("A", "orders", 0).key_bytes(), encode_offset_value(7))],
        now_ms(),
    )
    produce(
        src.bootstrap, "orders", [{"key": b"k%d" % i, "value": b"v%d" % i} for i in range(TOTAL, 2 * TOTAL)]
    )

    again = run_once(config, "A", "B")

    assert again.spans() == {("orders", 0): (TOTAL, 2 * TOTAL)}
    assert again.records == TOTAL
    assert [r.value for r in read_all(dst.bootstrap, "A.orders")] == [b"v%d" % i for i in range(2 * TOTAL)]
    progress = read_progress({"bootstrap.servers": dst.bootstrap}, PROGRESS, "A", timeout_s=10)
    assert progress == {("orders", 0): 2 * TOTAL - 1}, "the dead progress record stayed invisible"


@pytest.mark.parametrize("dead_copy", ["committed", "aborted"])
def test_a_hanging_progress_record_is_written_again_when_its_copy_committed_and_ended_when_not(
    pair, dead_copy
) -> None:
    """A single-node target killed right after a copy's commit came back with the copy's records
    committed in the remote partition and its progress record open: restarted, the broker dropped
    the commit's marker in the progress partition ("likely deleted already"). The plan ended that
    transaction by an abort, progress went back, and the next run copied the same records again
    (2,000 twice in the suite's crash test). The remote partition ends with the very record the
    open progress names, so the plan now writes that progress again after the abort. When the
    copy was aborted instead (its records lie aborted at the end of the remote partition, more of
    them than the first window the check reads), the transaction is ended and the range copied."""
    src, dst = pair
    config = mirror_config(
        [src, dst], ["A->B"], {"topics": "orders", "B.producer.transaction.timeout.ms": "10000"}
    )
    assert run_once(config, "A", "B").records == TOTAL
    dead_end = 4 * TOTAL  # more records than the first windows the check reads back (tails.FIRST_WINDOW, x10)
    dead_copy_and_its_hanging_progress(src, dst, dead_end, committed=dead_copy == "committed")

    again = run_once(config, "A", "B")

    start = dead_end if dead_copy == "committed" else TOTAL
    assert again.spans() == {("orders", 0): (start, dead_end + TOTAL)}, "planned from the wrong progress"
    assert [r.value for r in read_all(dst.bootstrap, "A.orders")] == [
        b"v%d" % i for i in range(dead_end + TOTAL)
    ]
    progress = read_progress({"bootstrap.servers": dst.bootstrap}, PROGRESS, "A", timeout_s=10)
    assert progress == {("orders", 0): dead_end + TOTAL - 1}


def test_a_slot_writer_that_meets_a_hanging_progress_record_whose_copy_committed_writes_it_again(
    pair,
) -> None:
    """The same loss at a slot writer's settle, for a transaction left hanging after the plan was
    made (a target that crashed while a run copied): the writer ended it by an abort without
    asking whether its copy had committed, its progress went back, and it copied the dead copy's
    committed records again in the same run. It now writes that progress again after the abort
    and resumes right after it."""
    src, dst = pair
    job = make_job(
        src, dst, target_producer={"bootstrap.servers": dst.bootstrap, "transaction.timeout.ms": 10000}
    )
    assert copy_unit(job, PartitionSpan("orders", 0, "A.orders", 0, TOTAL)).ok
    dead_end = 3 * TOTAL
    dead_copy_and_its_hanging_progress(src, dst, dead_end, committed=True)
    planned_before = PartitionSpan("orders", 0, "A.orders", TOTAL, dead_end + TOTAL, progress=TOTAL - 1)

    result = copy_unit(job, planned_before)

    assert result.ok, result.error
    assert result.records == TOTAL, "the dead copy's committed records were copied again"
    assert [r.value for r in read_all(dst.bootstrap, "A.orders")] == [
        b"v%d" % i for i in range(dead_end + TOTAL)
    ]
    progress = read_progress({"bootstrap.servers": dst.bootstrap}, PROGRESS, "A", timeout_s=10)
    assert progress == {("orders", 0): dead_end + TOTAL - 1}
