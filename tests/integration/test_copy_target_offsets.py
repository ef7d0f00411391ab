"""How the copy engine learns target offsets and stamps headers on its cheap path, against real Kafka clusters.

Exactly-once chunks report only a few delivery offsets and prove the rest consecutive; when
another writer's records land among ours the chunk is aborted and copied again reporting every
record. Either way every offset-sync must name a true (upstream, downstream) pair and bracket
every break in the mapping.
"""

from __future__ import annotations

import struct
import threading
from dataclasses import dataclass
from typing import Any

import pytest
from confluent_kafka import Producer

from mirrorflow.mm2.formats import OffsetSync
from mirrorflow.policy.provenance import read_provenance, stamp_provenance
from mirrorflow.replicate.copy import CopyJob, copy_unit
from mirrorflow.replicate.plan import PartitionSpan

from .kafkatools import create_topics, produce, read_all
from .test_copy import make_job


@dataclass
class Setup:
    src: Any
    dst: Any
    topic: str
    progress: str
    syncs: str

    def job(self, **overrides: Any) -> CopyJob:
        return make_job(
            self.src, self.dst, progress_topic=self.progress, offset_syncs_topic=self.syncs, **overrides
        )


@pytest.fixture
def setup(kafka_clusters, unique) -> Setup:
    src, dst = kafka_clusters(2)
    names = Setup(
        src, dst, unique("topic"), unique("mm2-offsets.A.internal"), unique("mm2-offset-syncs.B.internal")
    )
    create_topics(src.bootstrap, (names.syncs, 1, {"cleanup.policy": "compact"}), (names.topic, 1))
    create_topics(dst.bootstrap, (names.progress, 25, {"cleanup.policy": "compact"}))
    return names


def _produce_in_transactions(bootstrap: str, topic: str, total: int, per_transaction: int) -> int:
    """Source records written in transactions, so commit markers leave gaps; returns the end offset."""
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"src-{topic}"})
    producer.init_transactions(10)
    for first in range(0, total, per_transaction):
        producer.begin_transaction()
        for i in range(first, min(total, first + per_transaction)):
            producer.produce(topic, key=f"k{i}".encode(), value=f"v{i}".encode(), partition=0)
        producer.commit_transaction(10)
    return total + (total + per_transaction - 1) // per_transaction  # one marker per transaction


class _OtherWriter:
    """A local client writing into the remote partition while the copy runs (identity topics)."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
        self.topic = topic
        self.written = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self.stop.is_set():
            self.producer.produce(self.topic, value=b"local", partition=0)
            self.producer.flush(10)
            self.written += 1

    def __enter__(self) -> _OtherWriter:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(30)


def _assert_syncs_exact_and_dense(setup: Setup, remote: str) -> None:
    ours = [
        (read_provenance(r.headers).source_offset, r.offset)
        for r in read_all(setup.dst.bootstrap, remote)
        if r.headers
    ]
    syncs = {
        (s.upstream_offset, s.downstream_offset)
        for r in read_all(setup.src.bootstrap, setup.syncs)
        for s in [OffsetSync.decode(r.key, r.value)]
    }
    assert syncs <= set(ours), "every offset-sync names a record's true place on the target"
    for (u0, d0), (u1, d1) in zip(ours, ours[1:], strict=False):
        if u1 - u0 != 1 or d1 - d0 != 1:
            assert (u0, d0) in syncs and (u1, d1) in syncs, f"break between {u0}->{d0} and {u1}->{d1}"


@pytest.mark.parametrize("exactly_once", [True, False], ids=["exactly-once", "at-least-once"])
def test_records_of_another_writer_among_ours_keep_offsets_exact(setup, exactly_once) -> None:
    topic = setup.topic  # identity names: local clients on the target write the same topic
    create_topics(setup.dst.bootstrap, (topic, 1))
    end = _produce_in_transactions(setup.src.bootstrap, topic, 3000, per_transaction=700)
    # One record per produce request, so the other writer's records can land inside a chunk.
    job = setup.job(
        exactly_once=exactly_once,
        max_records=500,
        target_producer={"bootstrap.servers": setup.dst.bootstrap, "linger.ms": 0, "batch.num.messages": 1},
    )
    with _OtherWriter(setup.dst.bootstrap, topic) as writer:
        result = copy_unit(job, PartitionSpan(topic, 0, topic, 0, end))
    assert result.ok, result.error
    assert writer.written > 0 and result.records == 3000 and result.progress == end - 1

    target = read_all(setup.dst.bootstrap, topic)
    copied = [r for r in target if r.headers]
    assert [r.value for r in copied] == [f"v{i}".encode() for i in range(3000)], "each record once, in order"
    assert len(target) - len(copied) == writer.written
    if exactly_once:
        assert result.interleaved_chunks >= 1, "the other writer never got between our records"
    else:
        assert result.interleaved_chunks == 0, "at-least-once never copies a chunk twice"
    _assert_syncs_exact_and_dense(setup, topic)


def test_chunks_alone_on_the_target_are_copied_once(setup) -> None:
    remote = f"A.{setup.topic}"
    create_topics(setup.dst.bootstrap, (remote, 1))
    end = _produce_in_transactions(setup.src.bootstrap, setup.topic, 2500, per_transaction=300)
    result = copy_unit(setup.job(max_records=1000), PartitionSpan(setup.topic, 0, remote, 0, end))
    assert result.ok, result.error
    assert (result.records, result.interleaved_chunks, result.transactions) == (2500, 0, 3)
    assert 0 < result.copy_seconds <= result.seconds
    _assert_syncs_exact_and_dense(setup, remote)


def test_headers_are_exactly_what_stamp_provenance_writes(setup) -> None:
    remote = f"A.{setup.topic}"
    create_topics(setup.dst.bootstrap, (remote, 1))
    # A record that went X -> Y before reaching A: its header as the documented bytes.
    value = (
        bytes([1])
        + struct.pack(">qi", 42, 3)
        + struct.pack(">h", 6)
        + b"orders"
        + struct.pack(">h", 3)
        + b"X,Y"
    )
    from_x = [("trace", b"t1"), ("mirrorflow.provenance", value)]
    records = [
        {"value": b"plain"},
        {"value": b"user", "headers": [("trace", b"t0"), ("empty", None), ("trace", b"again")]},
        {"value": b"two-hops", "headers": from_x},
        {"value": b"plain-again"},
    ]
    produce(setup.src.bootstrap, setup.topic, records)
    assert copy_unit(setup.job(), PartitionSpan(setup.topic, 0, remote, 0, 4)).ok
    copied = read_all(setup.dst.bootstrap, remote)
    for source, target in zip(read_all(setup.src.bootstrap, setup.topic), copied, strict=True):
        expected = stamp_provenance(
            list(source.headers) or None,
            source_alias="A",
            topic=setup.topic,
            partition=0,
            offset=source.offset,
        )
        assert list(target.headers) == expected
    assert read_provenance(copied[2].headers).path == ("X", "Y", "A")


def test_without_provenance_headers_pass_through_unchanged(setup) -> None:
    remote = f"A.{setup.topic}"
    create_topics(setup.dst.bootstrap, (remote, 1))
    produce(
        setup.src.bootstrap,
        setup.topic,
        [{"value": b"a"}, {"value": b"b", "headers": [("h", b"1"), ("h", None)]}],
    )
    assert copy_unit(setup.job(provenance=False), PartitionSpan(setup.topic, 0, remote, 0, 2)).ok
    copied = read_all(setup.dst.bootstrap, remote)
    assert [(r.value, r.headers) for r in copied] == [(b"a", ()), (b"b", (("h", b"1"), ("h", None)))]
