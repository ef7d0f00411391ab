from __future__ import annotations

import dataclasses
import json
import socket
import zlib

import pytest
from confluent_kafka.admin import AdminClient

from mirrorflow.kafka import KafkaCallError
from mirrorflow.replicate.plan import COPY_SLOTS, SLICE_UNIT_COST, PartitionSpan, Plan, writer_slot
from mirrorflow.replicate.planner import planned_topic_ids
from mirrorflow.replicate.progress_records import ProgressSnapshot, Stored


def _plan(spans, tasks_max=2, max_records=100):
    return Plan(
        run_id="r1",
        source="A",
        target="B",
        mode="replicate",
        created_ms=1,
        max_records=max_records,
        max_bytes=1 << 20,
        delivery="exactly-once",
        tasks_max=tasks_max,
        spans=tuple(spans),
    )


def test_span_is_cut_into_bounded_contiguous_ranges() -> None:
    span = PartitionSpan("t", 0, "A.t", start=10, end=260, progress=9)
    ranges = span.ranges(100)
    assert [(r.start, r.end) for r in ranges] == [(10, 110), (110, 210), (210, 260)]
    assert sum(r.records for r in ranges) == span.pending == 250


def test_empty_span_has_no_ranges() -> None:
    assert PartitionSpan("t", 0, "A.t", start=5, end=5, progress=4).ranges(10) == []


def test_units_keep_spans_whose_progress_must_move() -> None:
    caught_up = PartitionSpan("t", 0, "A.t", 50, 50, progress=49)
    busy = PartitionSpan("t", 1, "A.t", 0, 10, progress=-1)
    expired = PartitionSpan("t", 2, "A.t", 100, 100, progress=5, lost=94)
    latest_reset = PartitionSpan("t", 3, "A.t", 70, 70, progress=-1)
    plan = _plan([caught_up, busy, expired, latest_reset])
    assert plan.units() == [busy, expired, latest_reset]


def test_slices_keep_each_writer_slot_on_one_worker_and_balance_the_work() -> None:
    spans = [PartitionSpan("t", p, "A.t", 0, 10 * (p % 7)) for p in range(600)]
    slices = _plan(spans, tasks_max=3).slices()
    assert len(slices) == 3
    dealt = [s for sl in slices for s in sl]
    assert sorted(dealt, key=lambda s: s.partition) == [s for s in spans if s.pending > 0]
    # A slot's partitions share a transactional.id: they never go to two workers.
    homes: dict[int, set[int]] = {}
    for worker, sl in enumerate(slices):
        assert sl == sorted(sl, key=lambda s: (s.topic, s.partition))
        for span in sl:
            homes.setdefault(writer_slot(span.topic, span.partition), set()).add(worker)
    assert all(len(workers) == 1 for workers in homes.values())
    assert len(homes) > 200  # 514 busy partitions spread over most of the 256 slots
    loads = [sum(s.pending + SLICE_UNIT_COST for s in sl) for sl in slices]
    biggest_slot = max(
        sum(
            s.pending + SLICE_UNIT_COST
            for s in spans
            if s.pending and writer_slot(s.topic, s.partition) == slot
        )
        for slot in homes
    )
    assert max(loads) - min(loads) <= biggest_slot, loads
    # Never more workers than slots with work, nor than tasks.max.
    assert len(_plan(spans[:5], tasks_max=10).slices()) == len({writer_slot("t", p) for p in range(1, 5)})
    assert len(_plan(spans, tasks_max=1).slices()) == 1


def test_writer_slots_are_a_fixed_hash_of_topic_and_partition() -> None:
    # CRC-32 of "<topic>\0<partition>": every process, run and version agrees (no PYTHONHASHSEED).
    assert [writer_slot("orders", p) for p in range(4)] == [
        zlib.crc32(b"orders\0%d" % p) % COPY_SLOTS for p in range(4)
    ]
    assert all(0 <= writer_slot(f"t{i}", i) < COPY_SLOTS for i in range(1000))


def test_plan_round_trips_through_json() -> None:
    plan = _plan([PartitionSpan("t", 0, "A.t", 3, 9, progress=2, lost=1)])
    assert Plan.from_json(plan.to_json()) == plan


def test_a_plans_read_of_progress_round_trips_through_json_in_pieces_and_older_plans_have_none() -> None:
    entries = tuple((f"t{i}", i % 3, 100 + i, "sid,rid" if i % 2 else "", 2, f"c{i}") for i in range(2500))
    read = ProgressSnapshot("mm2-offsets.A.internal", "id-1", (5, 0, 17), entries)
    plan = dataclasses.replace(_plan([PartitionSpan("t", 0, "A.t", 3, 9, progress=2)]), progress_read=read)
    pieces = list(plan.json_pieces(rows_per_piece=1000))
    assert max(len(piece) for piece in pieces) < 60_000, "the entries were not cut into pieces"
    again = Plan.from_json("".join(pieces))
    assert again == plan and again.progress_read.stored()[("t7", 1)] == Stored(107, "sid,rid", 2, "c7")
    older = json.loads(_plan([]).to_json())
    assert "progress_read" not in older and Plan.from_json(json.dumps(older)).progress_read is None


def test_summary_counts_per_topic() -> None:
    plan = _plan(
        [PartitionSpan("t", 0, "A.t", 0, 250), PartitionSpan("t", 1, "A.t", 0, 50, lost=3)], max_records=100
    )
    assert plan.summary() == {"t": {"partitions": 2, "pending": 300, "ranges": 4, "lost": 3}}


def test_report_counts_partitions_that_stopped_short_as_failed() -> None:
    from mirrorflow.replicate.copy import UnitResult
    from mirrorflow.replicate.report import RunReport

    plan = _plan([PartitionSpan("t", 0, "A.t", 0, 10), PartitionSpan("t", 1, "A.t", 0, 10)])
    done = UnitResult("t", 0, "A.t", 0, 10, progress=9, records=10)
    short = UnitResult("t", 1, "A.t", 0, 10, progress=4, records=5)
    report = RunReport.from_results(plan, [done, short], 0, 1)
    assert [u["partition"] for u in report.failed] == [1]
    assert "before the planned end 10" in report.failed[0]["error"]
    assert report.per_topic()["t"]["failed"] == 1
    assert report.totals()["failed_partitions"] == 1


def test_losses_are_ranges_so_attempts_that_meet_the_same_gap_count_it_once() -> None:
    from mirrorflow.replicate.copy import UnitResult
    from mirrorflow.replicate.report import RunReport

    plan = _plan(
        [
            PartitionSpan("t", 0, "A.t", 20, 100, progress=9, lost=10),
            PartitionSpan("t", 1, "A.t", 0, 5, lost=4),
        ]
    )
    unit = UnitResult("t", 0, "A.t", 20, 100)
    unit.count_lost(10, 20)  # what the plan found
    unit.count_lost(20, 40)  # retention ran on between plan and copy
    unit.count_lost(25, 40)  # a retried attempt met the same gap
    assert unit.lost == [(10, 40)] and unit.lost_to_retention == 30

    # The copy step ran twice (a Spark retry): the second attempt met part of the gap again.
    first = RunReport.from_results(plan, [unit], 0, 1)
    again = UnitResult("t", 0, "A.t", 20, 100, progress=99)
    again.count_lost(30, 45)
    merged = RunReport.merge([first, RunReport.from_results(plan, [again], 1, 2)])
    # Partition 1 never reported back: the plan's own count of it still shows.
    assert merged.totals()["lost_to_retention"] == 35 + 4
    assert merged.summary()["lost"] == [{"topic": "t", "partition": 0, "offsets": [[10, 45]]}]
    assert merged.per_topic()["t"]["lost_to_retention"] == 35 + 4


def test_topic_ids_a_plan_gets_no_answer_for_fail_the_plan() -> None:
    """Read as "no ID", an unanswered describe would hide a recreated topic: the plan would append
    to a rebuilt remote topic after its hole, or copy a new source topic as the old one."""
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}", "log_level": 0})
    with pytest.raises(KafkaCallError, match="topic IDs of cluster B could not be read"):
        planned_topic_ids(admin, ["orders"], "B", timeout_s=1)
