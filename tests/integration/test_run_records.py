"""Run records of any size on a real broker (issue 12): no Kafka record over 1 MiB, a record read
back whole from its first offset with other flows' records among its chunks, an incomplete one
reported missing (never half read), records from before chunks still read, and what old readers
look at still decodes."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import time
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Message, Producer
from confluent_kafka.admin import AdminClient

from mirrorflow.kafka import KafkaCallError, read_partition
from mirrorflow.replicate import run_reading, runs
from mirrorflow.replicate.copy import UnitResult
from mirrorflow.replicate.plan import PartitionSpan, Plan
from mirrorflow.replicate.report import RunReport

from .kafkatools import create_topics, produce

MIB = 1024 * 1024


@pytest.fixture
def target(shared_clusters) -> dict[str, str]:
    """Client config for a cluster that has the runs topic (it is shared: every test writes run
    ids of its own)."""
    _, b, _ = shared_clusters
    runs.ensure_runs_topic(AdminClient({"bootstrap.servers": b.bootstrap}), 1)
    return {"bootstrap.servers": b.bootstrap}


def stored_size(message: Message) -> int:
    """Bytes of one Kafka record as a broker limit counts them, before compression."""
    headers = message.headers() or ()
    return len(message.key()) + len(message.value()) + sum(len(k) + len(v or b"") for k, v in headers)


def kafka_records(config: dict[str, str], start: int, run_id: str) -> list[Message]:
    """The topic's Kafka records of `run_id` from `start` on, chunks and all."""
    return [
        m
        for m in read_partition(config, runs.RUNS_TOPIC, 0, start=start)
        if m.key().split(b"|")[1] == run_id.encode()
    ]


def big_plan(run_id: str, topics: int = 10_000, partitions: int = 12) -> Plan:
    incarnation = "Q2FuIHlvdSByZWFkIHRoaXM,IFRvcGljIElEcyBhcmUgdGhpcyBsb25n"
    spans = tuple(
        PartitionSpan(
            f"payments.events.{t:05d}",
            p,
            f"A.payments.events.{t:05d}",
            1_000 * p,
            1_000 * p + 5_000,
            progress=1_000 * p - 1,
            lost=t % 3,
            incarnation=incarnation,
            progress_incarnation=incarnation,
            restarted="the source topic was deleted and created again" if t % 500 == 0 else "",
        )
        for t in range(topics)
        for p in range(partitions)
    )
    return Plan(run_id, "A", "B", "replicate", 1_700_000_000_000, 10_000, 1 << 20, "exactly-once", 16, spans)


def test_a_plan_of_120000_partitions_is_stored_in_chunks_under_1_mib_and_read_back_identical(target) -> None:
    run_id = f"big-plan-{uuid.uuid4().hex}"
    plan = big_plan(run_id)

    offset = runs.write_run_record(target, plan.flow, run_id, "plan", plan.json_pieces())
    flow, read_run_id, kind, body = run_reading.read_run_record(target, offset)

    assert (flow, read_run_id, kind) == ("A->B", run_id, "plan")
    assert Plan.from_json(body) == plan
    stored = kafka_records(target, offset, run_id)
    sizes = [stored_size(m) for m in stored]
    assert len(stored) == -(-len(plan.to_json()) // runs.CHUNK_BYTES) > 10
    assert max(sizes) <= runs.RECORD_LIMIT
    assert stored[0].offset() == offset


def big_report(run_id: str) -> RunReport:
    """~20,000 busy partitions: 2,000 topics of 10, each with figures, a few failed or lossy."""
    plan = big_plan(run_id, topics=2_000, partitions=10)
    results = []
    for i, span in enumerate(plan.spans):
        unit = UnitResult(
            span.topic,
            span.partition,
            span.remote_topic,
            span.start,
            span.end,
            resumed_from=span.start,
            progress=span.end - 1 if i % 97 else span.start + 10,
            records=span.pending,
            bytes=span.pending * 812,
            transactions=5,
            offset_syncs=3,
            attempts=1,
            seconds=1.25,
            copy_seconds=1.0,
            error=None if i % 97 else "the producer was fenced by a newer writer of A.payments (zombie)",
        )
        if span.lost:
            unit.count_lost(span.start - span.lost, span.start)
        results.append(unit)
    return RunReport.from_results(plan, results, 1_700_000_000_000, 1_700_000_090_000)


def test_a_report_of_20000_partitions_is_stored_in_chunks_and_read_back_identical(target) -> None:
    run_id = f"big-report-{uuid.uuid4().hex}"
    report = big_report(run_id)

    offset = runs.write_run_record(target, report.flow, run_id, "report", report.json_pieces())
    (body,) = run_reading.wait_for_run_records(target, "A->B", run_id, "report", start=offset)

    assert RunReport.from_json(body).to_json() == report.to_json()
    assert len(RunReport.from_json(body).units) == 20_000
    sizes = [stored_size(m) for m in kafka_records(target, offset, run_id)]
    assert len(sizes) > 1 and max(sizes) <= runs.RECORD_LIMIT
    # Its summary is one plain record, as every reader expects a summary to be.
    summary = json.dumps(report.summary())
    summary_offset = runs.write_run_record(target, report.flow, run_id, "summary", summary)
    (only,) = [m for m in kafka_records(target, summary_offset, run_id) if m.key().endswith(b"summary")]
    assert only.headers() is None and only.value().decode() == summary


def test_chunks_of_two_flows_interleaved_are_each_read_whole(target) -> None:
    """While A->B's plan is being written, C->D writes a plan and a summary: their records land
    between A->B's chunks, and every record still reads back whole from its first offset."""
    run_id = f"interleaved-{uuid.uuid4().hex}"
    first = big_plan(run_id, topics=3_000)
    other = dataclasses.replace(first, source="C", target="D")
    written: dict[str, int] = {}

    def first_while_other_writes() -> Iterator[str]:
        sent = 0
        for piece in first.json_pieces():
            yield piece
            sent += len(piece)
            if "other" not in written and sent > 3 * runs.CHUNK_BYTES:
                time.sleep(1.0)  # the first chunks of A->B reach the broker
                written["other"] = runs.write_run_record(
                    target, other.flow, run_id, "plan", other.json_pieces()
                )
                written["small"] = runs.write_run_record(
                    target, other.flow, run_id, "summary", '{"run_id": 1}'
                )

    written["first"] = runs.write_run_record(target, first.flow, run_id, "plan", first_while_other_writes())

    stored = kafka_records(target, written["first"], run_id)
    flows = [m.key().split(b"|")[0].decode() for m in stored]
    assert flows[0] == "A->B" and "C->D" in flows and flows[-1] == "A->B", "the writes interleaved"
    assert Plan.from_json(run_reading.read_run_record(target, written["first"])[3]) == first
    assert Plan.from_json(run_reading.read_run_record(target, written["other"])[3]) == other
    assert run_reading.read_run_record(target, written["small"]) == (
        "C->D",
        run_id,
        "summary",
        '{"run_id": 1}',
    )
    found = [
        (f, k)
        for _, f, r, k, _ in run_reading.iter_run_records(target, start=written["first"])
        if r == run_id
    ]
    assert sorted(found) == [("A->B", "plan"), ("C->D", "plan"), ("C->D", "summary")]
    # The offset of a chunk that is not a record's first is refused, not read from the middle.
    with pytest.raises(runs.RunRecordMissing, match="holds chunk 1 of the plan of run"):
        run_reading.read_run_record(target, stored[1].offset())


def write_chunks(
    config: dict[str, str],
    flow: str,
    run_id: str,
    kind: str,
    chunks: list[tuple[int, bytes, bool]],
    body: bytes,
) -> int:
    """Chunk records as a writer that stopped or went wrong left them: (index, value, is last)."""
    producer = Producer({**config, "message.max.bytes": runs.MAX_RECORD_BYTES})
    record_id = uuid.uuid4().hex.encode()
    offsets: list[int] = []
    for index, value, last in chunks:
        headers = [(runs.RECORD_HEADER, record_id), (runs.CHUNK_HEADER, str(index).encode())]
        if last:
            headers += [
                (runs.COUNT_HEADER, str(index + 1).encode()),
                (runs.SHA256_HEADER, hashlib.sha256(body).hexdigest().encode()),
            ]
        producer.produce(
            runs.RUNS_TOPIC,
            key=runs.run_key(flow, run_id, kind + runs.CHUNK_SUFFIX),
            value=value,
            headers=headers,
            partition=0,
            on_delivery=lambda err, msg: offsets.append(msg.offset()),
        )
        producer.flush(30)
    return offsets[0]


def test_an_incomplete_record_reads_as_missing_never_half_read(target, caplog) -> None:
    run_id = f"truncated-{uuid.uuid4().hex}"
    body = big_plan(run_id, topics=2_000).to_json().encode()
    parts = [body[i : i + runs.CHUNK_BYTES] for i in range(0, len(body), runs.CHUNK_BYTES)]
    assert len(parts) >= 4
    # A writer that died after two chunks; one whose third chunk never arrived; one whose chunks
    # are not the body its digest names.
    died = write_chunks(target, "A->B", run_id, "plan", [(0, parts[0], False), (1, parts[1], False)], body)
    gap = write_chunks(
        target,
        "A->B",
        run_id,
        "report",
        [(0, parts[0], False), (1, parts[1], False), (3, parts[3], True)],
        body,
    )
    damaged = write_chunks(
        target, "A->B", run_id, "summary", [(0, parts[1], False), (1, parts[0], True)], body
    )
    # A whole record written after them reads as usual.
    whole = runs.write_run_record(target, "A->B", run_id, "plan", body.decode())

    with pytest.raises(
        runs.RunRecordMissing, match=r"is incomplete \(2 chunk\(s\) read\): its last chunk was never written"
    ):
        run_reading.read_run_record(target, died)
    with pytest.raises(runs.RunRecordMissing, match="chunk 2 is missing"):
        run_reading.read_run_record(target, gap)
    with pytest.raises(runs.RunRecordMissing, match="do not match its SHA-256 digest"):
        run_reading.read_run_record(target, damaged)
    assert run_reading.read_run_record(target, whole)[3] == body.decode()

    with pytest.raises(
        runs.RunRecordMissing, match=f"wrote no report .*the report of run {run_id} of A->B at offset {gap}"
    ):
        run_reading.wait_for_run_records(target, "A->B", run_id, "report", start=died)
    with caplog.at_level(logging.WARNING, logger="mirrorflow.replicate.runs"):
        found = [(o, k) for o, _, r, k, _ in run_reading.iter_run_records(target, start=died) if r == run_id]
    assert found == [(whole, "plan")]
    assert (
        f"the plan of run {run_id} of A->B at offset {died} of {runs.RUNS_TOPIC} is incomplete" in caplog.text
    )


def test_records_from_before_chunks_still_read_and_chunks_do_not_trip_old_readers(target) -> None:
    """A plan of 3 MiB stored as one record (as before chunks, up to the topic's 8 MiB) is read as
    it was; the chunks written now decode as UTF-8 under a `flow|run|kind` key of a kind old
    readers never ask for, even when a cut falls inside a character."""
    run_id = f"old-format-{uuid.uuid4().hex}"
    old_body = big_plan(run_id, topics=2_500).to_json()
    assert 2 * MIB < len(old_body) < runs.MAX_RECORD_BYTES
    producer = Producer({**target, "message.max.bytes": runs.MAX_RECORD_BYTES, "compression.type": "zstd"})
    offsets: list[int] = []
    producer.produce(
        runs.RUNS_TOPIC,
        key=runs.run_key("A->B", run_id, "plan"),
        value=old_body.encode(),
        partition=0,
        on_delivery=lambda err, msg: offsets.append(msg.offset()),
    )
    assert producer.flush(30) == 0
    (old,) = offsets

    assert run_reading.read_run_record(target, old) == ("A->B", run_id, "plan", old_body)
    assert [k for _, _, r, k, _ in run_reading.iter_run_records(target, start=old) if r == run_id] == ["plan"]

    # `{"notes": "` is 11 bytes, so byte CHUNK_BYTES falls inside a two-byte "é".
    text = json.dumps({"notes": "é" * runs.CHUNK_BYTES}, ensure_ascii=False)
    new = runs.write_run_record(target, "A->B", run_id, "summary", text)
    assert run_reading.read_run_record(target, new)[3] == text
    chunks = kafka_records(target, new, run_id)
    assert len(chunks) == 3 and len(chunks[0].value()) == runs.CHUNK_BYTES - 1
    for message in chunks:
        flow, read_run_id, kind = message.key().decode().split("|", 2)  # as readers before chunks did
        assert (flow, read_run_id, kind) == ("A->B", run_id, "summary/chunk")
        message.value().decode()


def test_a_read_that_gets_nothing_says_where_it_stopped_and_what_it_waited_for(target) -> None:
    """A CLI window whose target stalled ended with `mirrorflow-runs.internal-0 stopped before
    offset None` (issue 36), which names neither the cluster nor what was missing. A read that
    gets nothing in time says the cluster, the offset it reached and what it waited for."""
    topic = f"stalled-read-{uuid.uuid4().hex[:8]}"
    bootstrap = target["bootstrap.servers"]
    create_topics(bootstrap, (topic, 1))
    produce(bootstrap, topic, [{"value": b"a"}, {"value": b"b"}])
    with pytest.raises(KafkaCallError) as raised:
        list(read_partition(target, topic, 0, end=10, idle_timeout_s=1))
    assert str(raised.value) == (
        f"reading {topic}-0 at {bootstrap}: nothing came for 1s from offset 2 on, neither a record nor "
        "offset 10 (the cluster, or the partition's leader, did not answer in time, or the records "
        "up to there do not exist)"
    )
