"""Each row of the decision table for transactions left open after a crash
(docs/concepts/exactly-once.md, "Transactions left open"; replicate/copy/recovery/decision.py), forged on a
real broker as a restarted coordinator leaves them: the commit of one transaction written into
some of its partitions and skipped in others ("Couldn't find leader endpoint ... can be skipped").

The states are built with tests/integration/wire.py (a transactional batch of the slot's producer
id written straight into a partition, which Kafka before transactions v2 accepts when partition
verification is off) and with real transactional producers for the side whose marker was kept.
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer

from mirrorflow.mm2.connect_offsets import SourceOffsetKey, encode_offset_value
from mirrorflow.policy.provenance import stamp_provenance
from mirrorflow.replicate import copy
from mirrorflow.replicate.copy import copy_unit
from mirrorflow.replicate.copy.chunk import PartitionCopy
from mirrorflow.replicate.copy.clients import SharedClients
from mirrorflow.replicate.copy.ids import slot_transactional_id
from mirrorflow.replicate.copy.job import Fenced, UnitResult
from mirrorflow.replicate.copy.writer import SlotWriter
from mirrorflow.replicate.plan import PartitionSpan, writer_slot
from mirrorflow.replicate.progress import read_progress

from ..conftest import Cluster
from ..integration.kafkatools import create_topics, produce, read_all
from ..integration.test_copy import PROGRESS, SYNCS_ON_SOURCE, make_job
from ..integration.test_replicate_scenarios import mirror_config, run_once
from ..integration.wire import forge_hanging_transaction

pytestmark = pytest.mark.local_kafka

TOTAL = 100
STAMP_MS = 1_700_000_000_000
"""Every source record's CreateTime: the forged batch carries one timestamp for all its records."""
SHARED = ("t1", "t69")
"""Two source partitions (partition 0 of each) of one writer slot whose progress keys hash to one
progress partition of 25: one transaction of the slot holds both keys there."""


@pytest.fixture
def pair(unverified_clusters):
    src, dst = unverified_clusters
    create_topics(src.bootstrap, ("orders", 1), (SYNCS_ON_SOURCE, 1, {"cleanup.policy": "compact"}))
    create_topics(dst.bootstrap, ("A.orders", 1), (PROGRESS, 25, {"cleanup.policy": "compact"}))
    produce_range(src, "orders", 0, TOTAL)
    return src, dst


def produce_range(src: Cluster, topic: str, start: int, end: int) -> None:
    records = [{"key": b"k%d" % i, "value": b"v%d" % i, "timestamp": STAMP_MS} for i in range(start, end)]
    produce(src.bootstrap, topic, records)


def values(bootstrap: str, topic: str) -> list[bytes]:
    return [r.value for r in read_all(bootstrap, topic)]


def expected(end: int) -> list[bytes]:
    return [b"v%d" % i for i in range(end)]


def forge_open_copy(src: Cluster, dst: Cluster, start: int, end: int, *, provenance: bool) -> int:
    """Copies of source offsets [start, end) of orders-0, as the slot's writer wrote them, left open
    in A.orders-0 (their commit marker never written there); returns the offset they start at."""
    copied = []
    for record in read_all(src.bootstrap, "orders")[start:end]:
        headers = list(record.headers)
        if provenance:
            headers = stamp_provenance(
                headers, source_alias="A", topic="orders", partition=0, offset=record.offset
            )
        copied.append((record.key, record.value, headers))
    return forge_hanging_transaction(
        dst.bootstrap,
        slot_transactional_id("A", "B", writer_slot("orders", 0)),
        "A.orders",
        0,
        copied,
        STAMP_MS,
    )


def commit_progress(dst: Cluster, progress: dict[tuple[str, int], int]) -> None:
    """Progress as the same transaction committed it in the progress partitions, whose markers
    the coordinator did write."""
    producer = Producer({"bootstrap.servers": dst.bootstrap, "transactional.id": "kept-its-marker"})
    producer.init_transactions(30)
    producer.begin_transaction()
    for (topic, partition), offset in progress.items():
        key = SourceOffsetKey("A", topic, partition)
        producer.produce(PROGRESS, encode_offset_value(offset), key.key_bytes(), key.offsets_partition(25))
    producer.commit_transaction(30)


@pytest.mark.parametrize("provenance", [True, False], ids=["provenance", "no-provenance"])
def test_a_copy_committed_everywhere_but_in_its_remote_partition_is_copied_again_or_refused(
    pair, provenance
) -> None:
    """The copy of orders 100-199 committed: its progress (199) kept the commit marker, the remote
    partition lost it. The writer that met the open records there ended them by an abort, the
    copy went on from 200, and the 100 records were lost with the copy reporting ok (a
    read_committed reader and `mirrorflow verify` saw the hole). With provenance the open records
    say which source offsets they hold: their abort moves progress back to 99, and they are
    copied again. Without it, whether they committed cannot be told, and nothing is ended: the
    partition stops with the command that ends the transaction."""
    src, dst = pair
    job = make_job(src, dst, provenance=provenance)
    assert copy_unit(job, PartitionSpan("orders", 0, "A.orders", 0, TOTAL)).ok
    produce_range(src, "orders", TOTAL, 3 * TOTAL)
    opened = forge_open_copy(src, dst, TOTAL, 2 * TOTAL, provenance=provenance)
    commit_progress(dst, {("orders", 0): 2 * TOTAL - 1})
    rewound = copy.stats.transactions_rewound

    # As a plan made after the crash sees it: progress at 199, copy from 200.
    result = copy_unit(
        job, PartitionSpan("orders", 0, "A.orders", 2 * TOTAL, 3 * TOTAL, progress=2 * TOTAL - 1)
    )

    if provenance:
        assert result.ok, result.error
        assert result.records == 2 * TOTAL and result.resumed_from == TOTAL, result
        assert values(dst.bootstrap, "A.orders") == expected(3 * TOTAL), "a record lost or copied twice"
        assert copy.stats.transactions_rewound == rewound + 1
        progress = read_progress({"bootstrap.servers": dst.bootstrap}, PROGRESS, "A", timeout_s=10)
        assert progress == {("orders", 0): 3 * TOTAL - 1}
    else:
        assert not result.ok and result.records == 0, result
        assert "whether they were committed cannot be told" in result.error, result.error
        assert f"--partition 0 --start-offset {opened}" in result.error, result.error
        assert values(dst.bootstrap, "A.orders") == expected(TOTAL), "written behind the open records"


@pytest.mark.parametrize("provenance", [True, False], ids=["provenance", "no-provenance"])
def test_a_copy_that_never_committed_is_ended_and_copied_from_progress(pair, provenance) -> None:
    """The other direction of the table's first rows: the open records are the copy of the source
    records right after committed progress (99), so the transaction never committed; its abort
    loses nothing and the copy goes on from 100, with or without provenance to say so."""
    src, dst = pair
    job = make_job(src, dst, provenance=provenance)
    assert copy_unit(job, PartitionSpan("orders", 0, "A.orders", 0, TOTAL)).ok
    produce_range(src, "orders", TOTAL, 3 * TOTAL)
    forge_open_copy(src, dst, TOTAL, 2 * TOTAL, provenance=provenance)
    rewound = copy.stats.transactions_rewound

    result = copy_unit(job, PartitionSpan("orders", 0, "A.orders", TOTAL, 3 * TOTAL, progress=TOTAL - 1))

    assert result.ok, result.error
    assert result.records == 2 * TOTAL
    assert values(dst.bootstrap, "A.orders") == expected(3 * TOTAL)
    assert copy.stats.transactions_rewound == rewound


def test_every_key_a_hanging_progress_transaction_holds_is_written_again_when_its_copy_committed(
    pair,
) -> None:
    """A shared transaction of one slot copied t1-0 and t69-0, whose progress keys hash to the same
    progress partition; its marker was kept in both remote partitions and lost in the progress
    partition. The plan ended the open progress by an abort and wrote again only the first
    record's progress: t69-0 went back and its 100 committed records were copied twice."""
    src, dst = pair
    create_topics(src.bootstrap, *[(t, 1) for t in SHARED])
    home = {SourceOffsetKey("A", t, 0).offsets_partition(25) for t in SHARED}
    assert len({writer_slot(t, 0) for t in SHARED}) == 1 and len(home) == 1
    for topic in SHARED:
        produce_range(src, topic, 0, TOTAL)
    config = mirror_config(
        [src, dst], ["A->B"], {"topics": ",".join(SHARED), "B.producer.transaction.timeout.ms": "10000"}
    )
    assert run_once(config, "A", "B").records == 2 * TOTAL
    # The dead copy: committed in both remote partitions ...
    dead = Producer({"bootstrap.servers": dst.bootstrap, "transactional.id": "dead-copy"})
    dead.init_transactions(30)
    dead.begin_transaction()
    for topic in SHARED:
        produce_range(src, topic, TOTAL, 2 * TOTAL)
        for record in read_all(src.bootstrap, topic)[TOTAL:]:
            dead.produce(f"A.{topic}", record.value, record.key, 0, timestamp=STAMP_MS)
    dead.commit_transaction(30)
    # ... its progress records of both keys open in their one progress partition.
    keys = [SourceOffsetKey("A", t, 0).key_bytes() for t in SHARED]
    forge_hanging_transaction(
        dst.bootstrap,
        slot_transactional_id("A", "B", writer_slot(SHARED[0], 0)),
        PROGRESS,
        home.pop(),
        [(key, encode_offset_value(2 * TOTAL - 1)) for key in keys],
        STAMP_MS,
    )
    for topic in SHARED:
        produce_range(src, topic, 2 * TOTAL, 3 * TOTAL)

    again = run_once(config, "A", "B")

    assert again.spans() == {(t, 0): (2 * TOTAL, 3 * TOTAL) for t in SHARED}, (
        "planned from progress gone back"
    )
    for topic in SHARED:
        assert values(dst.bootstrap, f"A.{topic}") == expected(3 * TOTAL), topic
    progress = read_progress({"bootstrap.servers": dst.bootstrap}, PROGRESS, "A", timeout_s=10)
    assert progress == {(t, 0): 3 * TOTAL - 1 for t in SHARED}


def test_a_writer_that_learned_it_was_fenced_never_opens_again_whatever_its_last_failure_said(pair) -> None:
    """A commit that timed out while librdkafka learned that the writer had been fenced was taken
    for a transient failure: the writer opened again and fenced the newer writer back. Fencing is
    now decided in one place (SlotWriter.is_fenced) from whatever route told it."""
    src, dst = pair
    job = make_job(src, dst)
    span = PartitionSpan("orders", 0, "A.orders", 0, TOTAL)
    slot = writer_slot("orders", 0)
    with SharedClients(job) as shared:
        writer = shared.writer(slot, SlotWriter)
        try:
            watch = shared.watches[1]
            copies = [PartitionCopy(job, span, UnitResult.for_span(span))]
            producer = writer.open(copies, watch)
            newer = Producer(
                {"bootstrap.servers": dst.bootstrap, "transactional.id": writer.transactional_id}
            )
            newer.init_transactions(30)
            producer.begin_transaction()
            producer.produce("A.orders", b"late", b"late", 0)
            # librdkafka learns of the fencing in the background (AddPartitionsToTxn answered
            # PRODUCER_FENCED) while the writer's own call reports something else: a timeout.
            timed_out = KafkaException(KafkaError(KafkaError._TIMED_OUT, "commit timed out"))
            deadline = time.monotonic() + 15
            while not writer.is_fenced(timed_out) and time.monotonic() < deadline:
                time.sleep(0.1)

            assert writer.is_fenced(timed_out), "a fencing learned meanwhile was taken for a timeout"
            assert writer.fatal is not None and writer.fatal.code() == KafkaError._FENCED
            writer.discard(reachable=True)
            with pytest.raises(Fenced):
                writer.open(copies, watch)
        finally:
            shared.release(slot)
    newer.begin_transaction()
    newer.produce("A.orders", b"newer", b"newer", 0)
    newer.commit_transaction(30)  # not fenced back
    # The coordinator writes the commit marker after it answered: read once it shows.
    deadline = time.monotonic() + 30
    while not values(dst.bootstrap, "A.orders") and time.monotonic() < deadline:
        time.sleep(0.2)
    assert values(dst.bootstrap, "A.orders") == [b"newer"]


def test_a_hanging_progress_record_that_names_a_commit_marker_of_a_transactional_source_is_restored(
    pair,
) -> None:
    """Progress names the last offset a copy processed, which on a transactional source is often
    a commit marker. The landed check read the source record at exactly that offset, found none,
    and answered "cannot be told": the plan stopped until an operator aborted the transaction by
    hand, which then copied the committed records twice. The remote partition's last committed
    record says by its provenance which source offset it copies, and between that one and the
    marker the source holds nothing a copy writes: the copy had landed, and its progress is
    written again."""
    src, dst = pair
    config = mirror_config(
        [src, dst], ["A->B"], {"topics": "orders", "B.producer.transaction.timeout.ms": "10000"}
    )
    assert run_once(config, "A", "B").records == TOTAL
    writer = Producer({"bootstrap.servers": src.bootstrap, "transactional.id": "source-writer"})
    writer.init_transactions(30)
    writer.begin_transaction()
    for i in range(TOTAL, 2 * TOTAL):
        writer.produce("orders", b"v%d" % i, b"k%d" % i, 0, timestamp=STAMP_MS)
    writer.commit_transaction(30)  # its marker is offset 2 * TOTAL
    marker = 2 * TOTAL
    dead = Producer({"bootstrap.servers": dst.bootstrap, "transactional.id": "dead-copy"})
    dead.init_transactions(30)
    dead.begin_transaction()
    for record in read_all(src.bootstrap, "orders")[TOTAL:]:
        headers = stamp_provenance(
            record.headers, source_alias="A", topic="orders", partition=0, offset=record.offset
        )
        dead.produce("A.orders", record.value, record.key, 0, timestamp=STAMP_MS, headers=headers)
    dead.commit_transaction(30)
    key = SourceOffsetKey("A", "orders", 0)
    forge_hanging_transaction(
        dst.bootstrap,
        slot_transactional_id("A", "B", writer_slot("orders", 0)),
        PROGRESS,
        key.offsets_partition(25),
        [(key.key_bytes(), encode_offset_value(marker))],
        STAMP_MS,
    )
    produce_range(src, "orders", 2 * TOTAL, 3 * TOTAL)

    again = run_once(config, "A", "B")

    assert again.spans() == {("orders", 0): (marker + 1, 3 * TOTAL + 1)}, "planned from the wrong progress"
    assert values(dst.bootstrap, "A.orders") == expected(3 * TOTAL)


def test_a_quiet_partition_whose_committed_copy_lost_its_marker_is_copied_again_by_the_next_run(pair) -> None:
    """The same lost commit marker in a partition the source then wrote nothing more to: the plan
    saw nothing to copy, no writer looked at the remote partition, and the copy's 100 committed
    records stayed invisible (every read_committed reader of the target waiting in front of
    them) until the source wrote there again, which on a quiet partition may be never. The plan
    now marks where a transaction is open in the remote partitions of spans with nothing to do,
    and their writer decides it as every other (here: committed, so copied again)."""
    src, dst = pair
    config = mirror_config([src, dst], ["A->B"], {"topics": "orders"})
    assert run_once(config, "A", "B").records == TOTAL
    produce_range(src, "orders", TOTAL, 2 * TOTAL)
    forge_open_copy(src, dst, TOTAL, 2 * TOTAL, provenance=True)
    commit_progress(dst, {("orders", 0): 2 * TOTAL - 1})

    again = run_once(config, "A", "B")

    assert again.records == TOTAL, again.spans()
    assert values(dst.bootstrap, "A.orders") == expected(2 * TOTAL)
    progress = read_progress({"bootstrap.servers": dst.bootstrap}, PROGRESS, "A", timeout_s=10)
    assert progress == {("orders", 0): 2 * TOTAL - 1}
    assert run_once(config, "A", "B").records == 0, "a clean partition is copied once"
