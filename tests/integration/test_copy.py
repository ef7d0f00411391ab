"""The copy engine against real Kafka: byte-exact, gap-preserving, exactly-once under kills."""

from __future__ import annotations

import dataclasses
import os
import pickle
import signal
import struct
import subprocess
import sys
import threading
import time

import pytest
from confluent_kafka import IsolationLevel, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from localkafka.compaction import compact
from mirrorflow.mm2.formats import OffsetSync
from mirrorflow.policy.provenance import read_provenance
from mirrorflow.replicate import copy
from mirrorflow.replicate.copy import (
    GROUP_PARTITIONS,
    CopyJob,
    SharedClients,
    copy_unit,
    copy_units,
    partition_transactional_id,
    transactional_id,
)
from mirrorflow.replicate.plan import COPY_SLOTS, PartitionSpan, writer_slot
from mirrorflow.replicate.progress import (
    ProgressReader,
    progress_record,
    read_progress,
    read_progress_entries,
)

from .kafkatools import create_topics, produce, produce_keyed, read_all

PROGRESS = "mm2-offsets.A.internal"
SYNCS_ON_SOURCE = "mm2-offset-syncs.B.internal"


def make_job(src, dst, **overrides) -> CopyJob:
    settings = dict(
        run_id="test",
        source="A",
        target="B",
        exactly_once=True,
        max_records=1000,
        max_bytes=8 << 20,
        provenance=True,
        progress_topic=PROGRESS,
        offset_syncs_topic=SYNCS_ON_SOURCE,
        offset_syncs_on_target=False,
        source_consumer={"bootstrap.servers": src.bootstrap},
        target_producer={"bootstrap.servers": dst.bootstrap, "linger.ms": 2},
        target_consumer={"bootstrap.servers": dst.bootstrap},
        source_producer={"bootstrap.servers": src.bootstrap},
    )
    settings.update(overrides)
    return CopyJob(**settings)


def sample_records(n: int) -> list[dict]:
    out = []
    for i in range(n):
        headers = [("trace", f"{i}".encode()), ("dup", b"1"), ("dup", b"2")]
        if i % 7 == 0:
            headers.append(("null-header", None))
        out.append(
            {
                "key": None if i % 11 == 0 else f"k{i % 50}".encode(),
                "value": None if i % 13 == 0 else (b"" if i % 17 == 0 else bytes([i % 256]) * (i % 300)),
                "headers": headers,
                "timestamp": 1_600_000_000_000 + i * 3,
                "partition": i % 2,
            }
        )
    return out


def test_copy_is_byte_exact_with_provenance_and_dense_syncs(clusters) -> None:
    src, dst = clusters
    create_topics(src.bootstrap, ("orders", 2))
    create_topics(dst.bootstrap, ("A.orders", 2))
    produce(src.bootstrap, "orders", sample_records(1200))
    job = make_job(src, dst, max_records=250)
    for partition in (0, 1):
        result = copy_unit(job, PartitionSpan("orders", partition, "A.orders", 0, 600))
        assert result.ok, result.error
        assert result.records == 600 and result.transactions == 3 and result.progress == 599

    for partition in (0, 1):
        source = read_all(src.bootstrap, "orders", partition)
        target = read_all(dst.bootstrap, "A.orders", partition)
        assert [r.content() for r in target] == [r.content() for r in source]
        for s, t in zip(source, target, strict=True):
            prov = read_provenance(t.headers)
            assert (prov.origin, prov.path, prov.source_topic) == ("A", ("A",), "orders")
            assert (prov.source_partition, prov.source_offset) == (partition, s.offset)
    progress = read_progress({"bootstrap.servers": dst.bootstrap}, PROGRESS, "A")
    assert progress == {("orders", 0): 599, ("orders", 1): 599}

    syncs = [OffsetSync.decode(r.key, r.value) for r in read_all(src.bootstrap, SYNCS_ON_SOURCE)]
    target_offsets = {
        (read_provenance(t.headers).source_offset, t.offset) for t in read_all(dst.bootstrap, "A.orders", 0)
    }
    p0 = [(s.upstream_offset, s.downstream_offset) for s in syncs if s.partition == 0]
    # Each transaction is one contiguous run: a sync at both of its ends, all of them true.
    assert p0 == [(0, 0), (249, 249), (250, 251), (499, 500), (500, 502), (599, 601)]
    assert set(p0) <= target_offsets


def test_gaps_from_compaction_and_aborted_transactions_are_kept_and_synced(clusters) -> None:
    src, dst = clusters
    create_topics(src.bootstrap, ("ledger", 1, {"cleanup.policy": "compact"}))
    create_topics(dst.bootstrap, ("A.ledger", 1))
    txn = Producer({"bootstrap.servers": src.bootstrap, "transactional.id": "ledger-writer"})
    txn.init_transactions(10)
    for batch in range(6):
        txn.begin_transaction()
        for i in range(20):
            # Even-indexed keys repeat in every batch (compaction keeps only the last one),
            # odd-indexed keys are unique: the compacted log has gaps all along.
            key = f"k{i}" if i % 2 == 0 else f"u{batch}-{i}"
            txn.produce("ledger", key=key.encode(), value=f"{batch}-{i}".encode(), partition=0)
        if batch % 3 == 1:
            # Aborted records reach the log (flushed first), so readers meet real gaps; an abort
            # of records still queued also trips librdkafka issue #4849 (INVALID_TXN_STATE).
            txn.flush(10)
            txn.abort_transaction(10)
        else:
            txn.commit_transaction(10)
    compact(src.kafka, "ledger", {0: (b"roll", b"after the last transaction")})
    source = read_all(src.bootstrap, "ledger")
    gaps = sum(1 for a, b in zip(source, source[1:], strict=False) if b.offset - a.offset != 1)
    assert gaps > 3, "the fixture must leave offset gaps"
    end = source[-1].offset + 1

    result = copy_unit(make_job(src, dst), PartitionSpan("ledger", 0, "A.ledger", 0, end))
    assert result.ok, result.error
    target = read_all(dst.bootstrap, "A.ledger")
    assert [r.content() for r in target] == [r.content() for r in source]
    assert not any(r.value.startswith((b"1-", b"4-")) for r in target), "aborted records are never copied"
    assert result.progress == end - 1

    syncs = [OffsetSync.decode(r.key, r.value) for r in read_all(src.bootstrap, SYNCS_ON_SOURCE)]
    pairs = {(s.upstream_offset, s.downstream_offset) for s in syncs}
    mapping = [(s.offset, t.offset) for s, t in zip(source, target, strict=True)]
    for (u0, d0), (u1, d1) in zip(mapping, mapping[1:], strict=False):
        if u1 - u0 != 1:
            assert (u0, d0) in pairs and (u1, d1) in pairs, "every source gap is bracketed by syncs"


def test_loop_prevention_skips_records_that_came_from_the_target(clusters) -> None:
    src, dst = clusters
    create_topics(src.bootstrap, ("orders", 1))
    create_topics(dst.bootstrap, ("orders", 1))
    produced_on_b = (
        bytes([1]) + struct.pack(">qi", 5, 0) + struct.pack(">h", 6) + b"orders" + struct.pack(">h", 1) + b"B"
    )
    from_b = [("mirrorflow.provenance", produced_on_b)]
    produce(
        src.bootstrap,
        "orders",
        [{"value": b"local-1"}, {"value": b"echo", "headers": from_b}, {"value": b"local-2"}],
    )
    result = copy_unit(make_job(src, dst), PartitionSpan("orders", 0, "orders", 0, 3))
    assert result.ok and result.skipped_loops == 1 and result.progress == 2
    assert [r.value for r in read_all(dst.bootstrap, "orders")] == [b"local-1", b"local-2"]


def test_resume_continues_after_stored_progress(clusters) -> None:
    src, dst = clusters
    create_topics(src.bootstrap, ("events", 1))
    create_topics(dst.bootstrap, ("A.events", 1))
    produce(src.bootstrap, "events", [{"value": f"{i}".encode()} for i in range(500)])
    job = make_job(src, dst, max_records=100)
    assert copy_unit(job, PartitionSpan("events", 0, "A.events", 0, 200)).records == 200
    again = copy_unit(job, PartitionSpan("events", 0, "A.events", 0, 500))
    assert (again.resumed_from, again.records) == (200, 300)
    assert [r.value for r in read_all(dst.bootstrap, "A.events")] == [f"{i}".encode() for i in range(500)]


def test_a_copy_says_how_long_its_oldest_record_waited(clusters) -> None:
    """UnitResult.waited_ms, the lag a micro-batch window reports in seconds: from the source
    timestamp of the first record a copy moved to the commit that made it visible on the target."""
    src, dst = clusters
    create_topics(src.bootstrap, ("aged", 1))
    create_topics(dst.bootstrap, ("A.aged", 1))
    born = int(time.time() * 1000) - 90_000
    produce(src.bootstrap, "aged", [{"value": b"%d" % i, "timestamp": born + 30_000 * i} for i in range(3)])
    job = make_job(src, dst)
    before = int(time.time() * 1000)
    first = copy_unit(job, PartitionSpan("aged", 0, "A.aged", 0, 2))
    second = copy_unit(job, PartitionSpan("aged", 0, "A.aged", 2, 3))
    after = int(time.time() * 1000)
    assert before - born <= first.waited_ms <= after - born
    assert before - (born + 60_000) <= second.waited_ms <= after - (born + 60_000)
    assert copy_unit(job, PartitionSpan("aged", 0, "A.aged", 3, 3)).waited_ms == -1


def _spawn_copy(job: CopyJob, span: PartitionSpan) -> subprocess.Popen:
    code = "import pickle,sys; from mirrorflow.replicate.copy import copy_unit; copy_unit(*pickle.load(sys.stdin.buffer))"
    proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE)
    proc.stdin.write(pickle.dumps((job, span)))
    proc.stdin.close()
    return proc


def _wait_for_progress(dst, at_least: int, proc: subprocess.Popen, timeout: float = 60) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        progress = read_progress({"bootstrap.servers": dst.bootstrap}, PROGRESS, "A").get(("big", 0), -1)
        if progress >= at_least:
            return progress
        assert proc.poll() is None, "the copy finished before it could be interrupted"
        time.sleep(0.05)
    raise AssertionError("no progress")


@pytest.mark.parametrize("how", ["killed", "zombie"])
def test_exactly_once_when_a_copy_dies_or_turns_zombie_mid_range(clusters, how) -> None:
    src, dst = clusters
    total = 10_000
    create_topics(src.bootstrap, ("big", 1))
    create_topics(dst.bootstrap, ("A.big", 1))
    produce(src.bootstrap, "big", [{"key": f"{i}".encode(), "value": b"x" * 200} for i in range(total)])
    # Small transactions make the copy slow enough to interrupt mid-range.
    job = make_job(src, dst, max_records=20)
    span = PartitionSpan("big", 0, "A.big", 0, total)

    proc = _spawn_copy(job, span)
    _wait_for_progress(dst, 200, proc)
    if how == "killed":
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    else:
        proc.send_signal(signal.SIGSTOP)
    try:
        interrupted_at = read_progress({"bootstrap.servers": dst.bootstrap}, PROGRESS, "A")[("big", 0)]
        assert interrupted_at < total - 1
        result = copy_unit(job, span)
        assert result.ok, result.error
        assert result.resumed_from > 0
    finally:
        if how == "zombie":
            os.kill(proc.pid, signal.SIGCONT)
            proc.wait(60)
    target = read_all(dst.bootstrap, "A.big")
    assert [read_provenance(r.headers).source_offset for r in target] == list(range(total))
    assert [r.key for r in target] == [f"{i}".encode() for i in range(total)]
    assert read_progress({"bootstrap.servers": dst.bootstrap}, PROGRESS, "A")[("big", 0)] == total - 1


SLOT_COPY = """
import pickle, sys
from mirrorflow.replicate.copy import SharedClients, copy_units
job, spans = pickle.load(sys.stdin.buffer)
with SharedClients(job) as shared:
    results = copy_units(job, spans, shared)
sys.stdout.buffer.write(pickle.dumps([(r.partition, r.topic, r.records, r.error) for r in results]))
"""


def _same_slot_topics(prefix: str, count: int) -> list[str]:
    """Topics whose partition 0 share one writer slot."""
    by_slot: dict[int, list[str]] = {}
    n = 0
    while True:
        name = f"{prefix}{n}"
        n += 1
        names = by_slot.setdefault(writer_slot(name, 0), [])
        names.append(name)
        if len(names) == count:
            return names


def test_a_zombie_worker_is_fenced_for_every_partition_of_its_slot(clusters) -> None:
    """A worker copies a slot's partitions one after another with one producer. Paused (a
    zombie: a stalled executor, a long GC) while a newer writer copies the same partitions, it
    wakes fenced: it aborts, and copies nothing more, neither of the partition it was in nor
    of the slot's partitions still to come."""
    src, dst = clusters
    total = 2000
    topics = _same_slot_topics("slotted", 4)
    create_topics(src.bootstrap, *((t, 1) for t in topics))
    create_topics(dst.bootstrap, *((f"A.{t}", 1) for t in topics))
    for topic in topics:
        produce(src.bootstrap, topic, [{"key": f"{i}".encode(), "value": b"x" * 100} for i in range(total)])
    job = make_job(src, dst, max_records=20)
    spans = [PartitionSpan(t, 0, f"A.{t}", 0, total) for t in topics]

    zombie = subprocess.Popen(
        [sys.executable, "-c", SLOT_COPY], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    zombie.stdin.write(pickle.dumps((job, spans)))
    zombie.stdin.close()
    deadline = time.monotonic() + 60
    # One reader kept up to date: a new one per look took long enough on a loaded machine for
    # the zombie to finish the whole first partition in between.
    with ProgressReader({"bootstrap.servers": dst.bootstrap}, PROGRESS, "A") as progress:
        while True:
            progress.settle([(topics[0], 0)])
            stored = progress.get(topics[0], 0)
            if stored is not None and stored.offset >= 200:
                break
            assert zombie.poll() is None and time.monotonic() < deadline, "the copy did not get going"
            time.sleep(0.01)
    zombie.send_signal(signal.SIGSTOP)
    try:
        with SharedClients(job) as shared:
            results = copy_units(job, spans, shared)
        assert [(r.topic, r.error) for r in results] == [(t, None) for t in topics]
    finally:
        os.kill(zombie.pid, signal.SIGCONT)
    assert zombie.wait(120) == 0
    woke = pickle.loads(zombie.stdout.read())
    # Partitions the zombie finished before it froze are whole; the one it was in ends fenced;
    # the rest of its slot is not tried.
    frozen_in = next(i for i, (*_, error) in enumerate(woke) if error is not None)
    assert frozen_in < len(topics) - 1, woke
    assert all((records, error) == (total, None) for _, _, records, error in woke[:frozen_in]), woke
    assert woke[frozen_in][3].startswith("fenced: another writer took over"), woke
    later = woke[frozen_in + 1 :]
    assert all(error.startswith("fenced:") and records == 0 for _, _, records, error in later), woke
    assert results[0].resumed_from >= 200
    for topic in topics:
        target = read_all(dst.bootstrap, f"A.{topic}")
        assert [r.key for r in target] == [f"{i}".encode() for i in range(total)], topic
    stored_now = read_progress({"bootstrap.servers": dst.bootstrap}, PROGRESS, "A")
    assert {t: stored_now[(t, 0)] for t in topics} == {t: total - 1 for t in topics}


def test_a_writer_fenced_while_producing_stops_and_never_fences_the_newer_one_back(clusters) -> None:
    """A writer fenced mid-transaction gets _FATAL ("Local: Fatal error") from its next produce();
    librdkafka says why (fenced) only when the producer is polled. Taken for a passing failure, the
    old writer was retried, and its retry fenced the newer writer back (two micro-batch windows at
    a handover took turns at the slot). The newer writer's copy must go through untouched."""
    src, dst = clusters
    total = 200_000
    create_topics(src.bootstrap, ("busy", 1))
    create_topics(dst.bootstrap, ("A.busy", 1))
    produce_keyed(src.bootstrap, "busy", total, 1, b"v" * 50)
    job = make_job(src, dst, max_records=100_000)
    span = PartitionSpan("busy", 0, "A.busy", 0, total)
    older: list[copy.UnitResult] = []
    # The older copy is held to 500 kB/s (its first transaction takes ~11 s), so the newer one
    # fences it mid-transaction however long the newer takes to start on a loaded machine;
    # unthrottled, the older once finished both its transactions first (1.3 s) and was never fenced.
    slow = dataclasses.replace(job, max_bytes_per_second=500_000)
    thread = threading.Thread(target=lambda: older.append(copy_unit(slow, span)))
    thread.start()
    admin = AdminClient({"bootstrap.servers": dst.bootstrap})
    deadline = time.monotonic() + 60
    while True:  # the older writer is producing its first transaction's records
        written = admin.list_offsets(
            {TopicPartition("A.busy", 0): OffsetSpec.latest()},
            isolation_level=IsolationLevel.READ_UNCOMMITTED,
        )
        if next(iter(written.values())).result().offset >= 5_000:
            break
        assert thread.is_alive() and time.monotonic() < deadline, "the older copy did not get going"
        time.sleep(0.01)
    newer = copy_unit(job, span)
    thread.join(120)
    assert newer.error is None, newer.error
    assert older[0].error is not None and older[0].error.startswith("fenced:"), older[0].error
    assert [r.key for r in read_all(dst.bootstrap, "A.busy")] == [b"%d" % i for i in range(total)]


def test_small_spans_of_one_slot_share_transactions_and_keep_each_partition_exact(clusters) -> None:
    """A worker copies the small spans of a slot up to GROUP_PARTITIONS at a time in one
    transaction: 35 partitions cost 2 transactions, and each partition still gets exactly its
    records, its progress and its offset-syncs."""
    src, dst = clusters
    topics = _same_slot_topics("grouped", GROUP_PARTITIONS + 3)
    create_topics(src.bootstrap, *((t, 1) for t in topics))
    create_topics(dst.bootstrap, *((f"A.{t}", 1) for t in topics))
    for i, topic in enumerate(topics):
        produce(
            src.bootstrap,
            topic,
            [
                {"key": b"k%d" % n, "value": None if n == 2 else b"%s/%d" % (topic.encode(), n)}
                for n in range(3 + i)
            ],
        )
    job = make_job(src, dst)
    spans = [PartitionSpan(t, 0, f"A.{t}", 0, 3 + i) for i, t in enumerate(topics)]
    opened = copy.stats.writers_opened
    with SharedClients(job) as shared:
        results = copy_units(job, spans, shared)

    assert [(r.topic, r.error, r.records, r.progress) for r in results] == [
        (t, None, 3 + i, 2 + i) for i, t in enumerate(topics)
    ]
    assert sum(r.transactions for r in results) == 2
    assert copy.stats.writers_opened == opened + 1
    for i, topic in enumerate(topics):
        source = read_all(src.bootstrap, topic)
        target = read_all(dst.bootstrap, f"A.{topic}")
        assert [(r.key, r.value) for r in target] == [(r.key, r.value) for r in source], topic
        assert [read_provenance(r.headers).source_offset for r in target] == list(range(3 + i))
    stored = read_progress({"bootstrap.servers": dst.bootstrap}, PROGRESS, "A")
    assert {t: stored[(t, 0)] for t in topics} == {t: 2 + i for i, t in enumerate(topics)}
    syncs = [OffsetSync.decode(r.key, r.value) for r in read_all(src.bootstrap, SYNCS_ON_SOURCE)]
    assert {s.topic for s in syncs} == set(topics)
    assert all(s.upstream_offset == s.downstream_offset for s in syncs)


def test_a_group_cut_short_by_its_byte_bound_leaves_the_rest_to_go_on_one_by_one(clusters) -> None:
    """A group reads its partitions with one assignment until it has read max_bytes; the spans
    it did not finish go on by themselves from what the group committed, and every partition
    still ends exact."""
    src, dst = clusters
    topics = _same_slot_topics("bounded", 6)
    create_topics(src.bootstrap, *((t, 1) for t in topics))
    create_topics(dst.bootstrap, *((f"A.{t}", 1) for t in topics))
    for topic in topics:
        produce(src.bootstrap, topic, [{"key": b"k%d" % n, "value": b"v" * 100} for n in range(40)])
    job = make_job(src, dst, max_bytes=1500)
    with SharedClients(job) as shared:
        results = copy_units(job, [PartitionSpan(t, 0, f"A.{t}", 0, 40) for t in topics], shared)

    assert [(r.error, r.records, r.progress, r.resumed_from) for r in results] == [(None, 40, 39, 0)] * 6
    # The group stops after the first partition's 4,000 bytes: the other five go on alone.
    assert sum(r.transactions for r in results) >= 6
    for topic in topics:
        target = read_all(dst.bootstrap, f"A.{topic}")
        assert [read_provenance(r.headers).source_offset for r in target] == list(range(40)), topic
    stored = read_progress({"bootstrap.servers": dst.bootstrap}, PROGRESS, "A")
    assert {t: stored[(t, 0)] for t in topics} == {t: 39 for t in topics}


def test_a_poison_record_in_a_group_fails_its_partition_and_the_others_are_copied(clusters) -> None:
    """The group's transaction is aborted and its spans copied one by one: the partition with
    the record this mirrorflow cannot read fails by name, the others are copied exactly, and
    no transaction is left open."""
    src, dst = clusters
    topics = _same_slot_topics("poisoned", 3)
    create_topics(src.bootstrap, *((t, 1) for t in topics))
    create_topics(dst.bootstrap, *((f"A.{t}", 1) for t in topics))
    future_version = bytes([9]) + b"not a header this version can read"
    for i, topic in enumerate(topics):
        records = [{"value": b"r%d" % n} for n in range(5)]
        if i == 1:
            records[2]["headers"] = [("mirrorflow.provenance", future_version)]
        produce(src.bootstrap, topic, records)
    job = make_job(src, dst)
    with SharedClients(job) as shared:
        results = copy_units(job, [PartitionSpan(t, 0, f"A.{t}", 0, 5) for t in topics], shared)

    assert [r.ok for r in results] == [True, False, True]
    assert f"{topics[1]}-0 offset 2" in results[1].error
    for i, topic in enumerate(topics):
        deadline = time.monotonic() + 10
        while _open_transaction_on(dst.bootstrap, f"A.{topic}"):
            assert time.monotonic() < deadline, "a transaction was left open"
            time.sleep(0.1)
        copied = [r.value for r in read_all(dst.bootstrap, f"A.{topic}")]
        assert copied == ([] if i == 1 else [b"r%d" % n for n in range(5)]), topic


@pytest.mark.parametrize("older", ["transactional id per partition", "another slot count"])
def test_a_writer_of_an_older_mirrorflow_is_fenced_before_the_copy(clusters, older) -> None:
    """A partition whose progress was not written under this mirrorflow's writer slots may still
    have a writer of an older mirrorflow (a transactional.id per partition, or a slot of another
    slot count) with a transaction open. The copy fences that id too before it settles progress:
    the old writer's commit then fails instead of landing its chunk a second time."""
    src, dst = clusters
    total = 100
    topic = f"older-{older.split()[0]}"
    create_topics(src.bootstrap, (topic, 1))
    create_topics(dst.bootstrap, (f"A.{topic}", 1))
    produce(src.bootstrap, topic, [{"key": f"{i}".encode(), "value": b"v%d" % i} for i in range(total)])
    if older == "another slot count":
        slots, old_id = 16, transactional_id("A", "B", topic, 0, 16)
    else:
        slots, old_id = 0, partition_transactional_id("A", "B", topic, 0)
    writer = Producer({"bootstrap.servers": dst.bootstrap, "transactional.id": old_id})
    writer.init_transactions(30)
    if slots:
        # An earlier chunk committed, its progress naming the writer's slot count.
        writer.begin_transaction()
        for i in range(10):
            writer.produce(f"A.{topic}", b"v%d" % i, f"{i}".encode(), 0)
        key, value, home = progress_record("A", topic, 0, 9, 25, "", slots)
        writer.produce(PROGRESS, value, key, home)
        writer.commit_transaction(30)
    first = 10 if slots else 0
    writer.begin_transaction()
    for i in range(first, first + 10):
        writer.produce(f"A.{topic}", b"v%d" % i, f"{i}".encode(), 0)
    assert writer.flush(30) == 0

    fenced = copy.stats.older_writers_fenced
    # Planned as the plan step would: it saw the progress of the first chunk, if any.
    span = PartitionSpan(topic, 0, f"A.{topic}", first, total, progress=first - 1, progress_slots=slots)
    result = copy_unit(make_job(src, dst), span)
    assert result.ok and result.resumed_from == first, result.error
    assert copy.stats.older_writers_fenced == fenced + 1
    with pytest.raises(KafkaException) as caught:
        writer.commit_transaction(30)
    assert caught.value.args[0].code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED)
    assert [r.value for r in read_all(dst.bootstrap, f"A.{topic}")] == [b"v%d" % i for i in range(total)]
    stored = read_progress_entries({"bootstrap.servers": dst.bootstrap}, PROGRESS, "A")[(topic, 0)]
    assert (stored.offset, stored.slots) == (total - 1, COPY_SLOTS)


def test_at_least_once_duplicates_are_bounded_by_one_chunk(clusters) -> None:
    src, dst = clusters
    total, chunk = 10_000, 500
    create_topics(src.bootstrap, ("big", 1))
    create_topics(dst.bootstrap, ("A.big", 1))
    produce(src.bootstrap, "big", [{"value": f"{i}".encode()} for i in range(total)])
    job = make_job(src, dst, exactly_once=False, max_records=chunk)
    span = PartitionSpan("big", 0, "A.big", 0, total)
    proc = _spawn_copy(job, span)
    _wait_for_progress(dst, 1000, proc)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert copy_unit(job, span).ok
    copied = [read_provenance(r.headers).source_offset for r in read_all(dst.bootstrap, "A.big")]
    assert set(copied) == set(range(total)), "nothing is lost"
    assert len(copied) - total <= chunk, "at most one chunk is copied twice"


def _open_transaction_on(bootstrap: str, topic: str) -> bool:
    """True while an open transaction holds the partition's last stable offset below its end."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    tp = TopicPartition(topic, 0)
    committed = admin.list_offsets({tp: OffsetSpec.latest()}, isolation_level=IsolationLevel.READ_COMMITTED)
    everything = admin.list_offsets(
        {tp: OffsetSpec.latest()}, isolation_level=IsolationLevel.READ_UNCOMMITTED
    )
    return committed[tp].result(10).offset < everything[tp].result(10).offset


def test_a_poison_record_fails_its_partition_by_name_and_leaves_no_open_transaction(clusters) -> None:
    src, dst = clusters
    create_topics(src.bootstrap, ("orders", 1))
    create_topics(dst.bootstrap, ("A.orders", 1))
    future_version = bytes([9]) + b"not a header this version can read"
    produce(
        src.bootstrap,
        "orders",
        [{"value": b"good-%d" % i} for i in range(30)]
        + [{"value": b"poison", "headers": [("mirrorflow.provenance", future_version)]}]
        + [{"value": b"after-%d" % i} for i in range(10)],
    )
    result = copy_unit(make_job(src, dst), PartitionSpan("orders", 0, "A.orders", 0, 41))

    assert not result.ok and "orders-0 offset 30" in result.error and "mirrorflow.provenance" in result.error
    assert result.attempts == 1, "a poison record is not retried"
    # The chunk holding records 0-29 was aborted at once, not left to transaction.timeout.ms (60 s).
    deadline = time.monotonic() + 10
    while _open_transaction_on(dst.bootstrap, "A.orders"):
        assert time.monotonic() < deadline, "the failed attempt left its transaction open"
        time.sleep(0.1)
    assert read_all(dst.bootstrap, "A.orders") == []
    assert read_progress({"bootstrap.servers": dst.bootstrap}, PROGRESS, "A").get(("orders", 0)) is None


def test_a_chunk_is_cut_by_time_before_its_transaction_can_time_out(clusters) -> None:
    src, dst = clusters
    total = 500_000
    create_topics(src.bootstrap, ("wide", 1))
    create_topics(dst.bootstrap, ("A.wide", 1))
    producer = Producer({"bootstrap.servers": src.bootstrap, "linger.ms": 20, "batch.size": 1 << 20})
    for i in range(total):
        producer.produce("wide", value=b"%020d" % i)
        if i % 100_000 == 0:
            producer.flush(30)
    assert producer.flush(30) == 0
    # A three-second transaction timeout (the broker aborts older ones within a second: see
    # QUICK_CLUSTER), and chunks bounded by records and bytes far above the several seconds this
    # copy takes: only the time bound (a quarter of the timeout) cuts it into transactions. With a
    # one-second timeout, the flush and commit of a quarter second's reading outlived the other
    # three quarters on a loaded machine (CI, 2026-11-30) and the broker aborted the transaction.
    job = make_job(
        src,
        dst,
        max_records=10_000_000,
        max_bytes=1 << 40,
        target_producer={"bootstrap.servers": dst.bootstrap, "linger.ms": 2, "transaction.timeout.ms": 3000},
    )
    result = copy_unit(job, PartitionSpan("wide", 0, "A.wide", 0, total))
    assert result.ok, result.error
    assert result.records == total and result.transactions > 1
    copied = read_all(dst.bootstrap, "A.wide")
    assert len(copied) == total and copied[-1].value == b"%020d" % (total - 1)
