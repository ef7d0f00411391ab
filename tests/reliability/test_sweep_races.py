"""Workers of one flow that meet the same hanging progress transaction (issue 34, item 6).

A progress partition is shared by the flow's writer slots, so several workers can meet one
hanging transaction at their settles at once, and a worker ends it with the id of the slot that
opened it, which may be the id of a writer that is copying right now. The states are forged on a
real broker with tests/integration/wire.py, as in test_hanging_transactions.py.
"""

from __future__ import annotations

import pytest
from confluent_kafka import Producer

from mirrorflow.kafka import ClusterWatch, reader
from mirrorflow.mm2.connect_offsets import SourceOffsetKey, encode_offset_value
from mirrorflow.replicate.copy.clients import SharedClients
from mirrorflow.replicate.copy.ids import slot_transactional_id
from mirrorflow.replicate.copy.recovery.progress_sweep import end_hanging_progress
from mirrorflow.replicate.copy.schedule import copy_units
from mirrorflow.replicate.plan import PartitionSpan, writer_slot
from mirrorflow.replicate.progress import read_progress

from ..integration.kafkatools import create_topics, produce, read_all
from ..integration.test_copy import PROGRESS, SYNCS_ON_SOURCE, make_job
from ..integration.wire import forge_hanging_transaction
from .test_hanging_transactions import now_ms

pytestmark = pytest.mark.local_kafka

TOTAL = 50


def progress_home(topic: str, partition: int) -> int:
    return SourceOffsetKey("A", topic, partition).offsets_partition(25)


def first_named(prefix: str, wanted) -> str:
    return next(name for name in (f"{prefix}{i}" for i in range(100_000)) if wanted(name))


HOME = progress_home("orders", 0)
SLOT_T = writer_slot("orders", 0)
HUNG = first_named("hung", lambda t: progress_home(t, 0) == HOME and writer_slot(t, 0) != SLOT_T)
"""A topic of slot S whose progress shares orders-0's progress partition (slot T's)."""
SLOT_S = writer_slot(HUNG, 0)
COPIED = first_named("copied", lambda t: writer_slot(t, 0) == SLOT_S and progress_home(t, 0) != HOME)
"""A topic of slot S whose progress lies elsewhere: S's writer never settles orders-0's partition."""


@pytest.fixture
def pair(unverified_clusters):
    src, dst = unverified_clusters
    create_topics(
        src.bootstrap,
        ("orders", 1),
        (HUNG, 1),
        (COPIED, 1),
        (SYNCS_ON_SOURCE, 1, {"cleanup.policy": "compact"}),
    )
    create_topics(
        dst.bootstrap,
        ("A.orders", 1),
        (f"A.{HUNG}", 1),
        (f"A.{COPIED}", 1),
        (PROGRESS, 25, {"cleanup.policy": "compact"}),
    )
    produce(src.bootstrap, "orders", [{"key": b"k%d" % i, "value": b"v%d" % i} for i in range(TOTAL)])
    return src, dst


def test_a_worker_that_meets_a_hanging_transaction_another_ended_meanwhile_fences_nobody(pair) -> None:
    """Two workers saw the same transaction hang; the first ended it, and the slot's writer has
    opened since. The second used to open a producer with the slot's id all the same and sweep
    again, fencing that live writer (and, had they overlapped, each other's sweep). It now looks
    again first and leaves an ended transaction alone."""
    src, dst = pair
    slot_id = slot_transactional_id("A", "B", writer_slot("orders", 0))
    home = HOME
    offset = forge_hanging_transaction(
        dst.bootstrap,
        slot_id,
        PROGRESS,
        home,
        [(SourceOffsetKey("A", "orders", 0).key_bytes(), encode_offset_value(7))],
        now_ms(),
    )
    config = {"bootstrap.servers": dst.bootstrap}
    ends = (reader(config), reader(config, isolation="read_uncommitted"))
    sweep = dict(
        source="A",
        target="B",
        target_producer=config,
        target_consumer=config,
        progress_topic=PROGRESS,
        stuck={home: offset},
        ends=ends,
        watch=ClusterWatch("B", dst.bootstrap, 30),
    )
    try:
        end_hanging_progress(**sweep)  # the first worker
        live = Producer({**config, "transactional.id": slot_id})
        live.init_transactions(30)
        live.begin_transaction()
        live.produce("A.orders", b"the slot's live writer", b"k", 0)

        end_hanging_progress(**sweep)  # the second, which saw the transaction open before

        live.commit_transaction(30)  # fenced, without the look before the sweep
    finally:
        for consumer in ends:
            consumer.close()
    assert [r.value for r in read_all(dst.bootstrap, "A.orders")] == [b"the slot's live writer"]
    assert read_progress(config, PROGRESS, "A", timeout_s=10) == {}, "the hanging record became visible"


def test_a_writer_fenced_by_its_own_workers_sweep_opens_again_instead_of_reporting_fenced(pair) -> None:
    """A micro-batch worker keeps a writer per slot from batch to batch. Slot S's writer is open;
    a progress transaction S left hanging (a target crash) holds the settle of another slot T, in
    the progress partition they share; T's writer ends it with S's id, which fences S's live
    writer. S then reported its partitions "fenced: another writer took over" though nobody had,
    and the window took the slot back as if a stranger held it. S now knows that its own worker's
    sweep did it, opens again and copies on from progress."""
    src, dst = pair
    produce(
        src.bootstrap,
        COPIED,
        [{"key": b"e%d" % i, "value": b"e%d" % i} for i in range(2 * TOTAL)],
    )
    forge_hanging_transaction(
        dst.bootstrap,
        slot_transactional_id("A", "B", SLOT_S),
        PROGRESS,
        HOME,
        [(SourceOffsetKey("A", HUNG, 0).key_bytes(), encode_offset_value(-1))],
        now_ms(),
    )
    job = make_job(
        src,
        dst,
        target_producer={"bootstrap.servers": dst.bootstrap, "transaction.timeout.ms": 10000},
        remote_topics={"orders": "A.orders", HUNG: f"A.{HUNG}", COPIED: f"A.{COPIED}"},
    )
    with SharedClients(job, keep_writers=True) as shared:
        first = copy_units(job, [PartitionSpan(COPIED, 0, f"A.{COPIED}", 0, TOTAL)], shared)
        assert first[0].ok, first[0].error
        # T's settle waits out the transaction timeout, finds the transaction hanging, ends it with S's id.
        other = copy_units(job, [PartitionSpan("orders", 0, "A.orders", 0, TOTAL)], shared)
        assert other[0].ok, other[0].error

        again = copy_units(
            job,
            [PartitionSpan(COPIED, 0, f"A.{COPIED}", TOTAL, 2 * TOTAL, progress=TOTAL - 1)],
            shared,
        )

        assert again[0].ok, again[0].error
        assert shared.fenced_slots() == []
    assert [r.value for r in read_all(dst.bootstrap, f"A.{COPIED}")] == [b"e%d" % i for i in range(2 * TOTAL)]
