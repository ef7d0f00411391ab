"""A flow's writer slots: 256 for a batch flow, tasks.max for a micro-batch flow, and how every
piece that names a transactional id or reads one back follows the count."""

from __future__ import annotations

from dataclasses import dataclass

from mirrorflow.mm2.connect_offsets import SourceOffsetKey, encode_offset_value
from mirrorflow.replicate.copy.ids import older_ids, slot_transactional_id, transactional_id
from mirrorflow.replicate.copy.recovery.decision import progress_slot, sweep_key_topic, sweep_slots
from mirrorflow.replicate.copy.recovery.hanging import progress_sweep_records
from mirrorflow.replicate.plan import COPY_SLOTS, PartitionSpan, Plan, flow_writer_slots, writer_slot
from mirrorflow.replicate.window.share import assignments, task_count


def test_a_batch_flow_has_256_slots_and_a_micro_batch_flow_one_per_task() -> None:
    assert flow_writer_slots(False, 4) == COPY_SLOTS
    assert flow_writer_slots(True, 4) == 4
    assert flow_writer_slots(True, 0) == 1


def test_a_micro_batch_flows_slots_take_a_topics_partitions_in_turn() -> None:
    """Round the slots from a point the topic's name picks: 4 partitions over 2 slots are 2 and 2
    (hashed as the 256 slots are, all 4 of `steady` went to one slot, one task held nothing)."""
    for topic in ("steady", "orders", "x"):
        slots = [writer_slot(topic, p, 2) for p in range(4)]
        assert sorted(slots) == [0, 0, 1, 1] and slots[0] != slots[1], (topic, slots)
        assert [writer_slot(topic, p, 3) for p in range(6)].count(writer_slot(topic, 0, 3)) == 2
    # The 256 slots keep their hash: the ids of every progress record written so far hold.
    assert writer_slot("steady", 0) == writer_slot("steady", 0, COPY_SLOTS)


def _plan(spans: list[PartitionSpan], *, tasks_max: int, slots: int) -> Plan:
    return Plan(
        "r", "A", "B", "replicate", 0, 100, 1 << 20, "exactly-once", tasks_max, tuple(spans), (), slots
    )


def test_a_plan_carries_its_slot_count_and_older_plans_read_as_256() -> None:
    spans = [PartitionSpan("t", p, "A.t", 0, 10) for p in range(6)]
    plan = _plan(spans, tasks_max=3, slots=3)
    assert Plan.from_json(plan.to_json()).slots == 3
    old = plan.to_json().replace(',"slots":3', "")
    assert '"slots"' not in old and Plan.from_json(old).slots == COPY_SLOTS
    # Each of the three tasks holds one slot, two partitions of the topic.
    assert task_count(plan) == 3
    shares = assignments(plan, 7, 3)
    assert [len(a.spans) for a in shares] == [2, 2, 2]
    assert [a.slots for a in shares] == [[0], [1], [2]]
    assert all(a.writer_slots == 3 for a in shares)
    # A batch run of the flow deals the same slots to its workers.
    assert sorted(len(s) for s in plan.slices()) == [2, 2, 2]


def test_older_ids_are_those_of_any_other_count_than_the_flows() -> None:
    assert older_ids("A", "B", "t", 0, 3, current=3) == []
    assert older_ids("A", "B", "t", 0, COPY_SLOTS, current=3) == [transactional_id("A", "B", "t", 0)]
    assert older_ids("A", "B", "t", 0, 2, current=COPY_SLOTS) == [transactional_id("A", "B", "t", 0, 2)]
    assert older_ids("A", "B", "t", 0, 2, current=COPY_SLOTS) == [
        slot_transactional_id("A", "B", writer_slot("t", 0, 2), 2)
    ]
    assert older_ids("A", "B", "t", 0, 0, current=2) == ["mirrorflow-A->B-t-0"]


@dataclass
class _Message:
    _key: bytes
    _value: bytes | None

    def key(self) -> bytes:
        return self._key

    def value(self) -> bytes | None:
        return self._value


def test_a_hanging_progress_record_names_the_slot_and_count_of_the_id_that_can_end_it() -> None:
    key = SourceOffsetKey(cluster="A", topic="orders", partition=5).key_bytes()
    under_two = _Message(key, encode_offset_value(9, "", 2, "c0ffee"))
    assert progress_slot(under_two, "A") == ((writer_slot("orders", 5, 2), 2), ("orders", 5))
    under_256 = _Message(key, encode_offset_value(9, "", COPY_SLOTS, "c0ffee"))
    assert progress_slot(under_256, "A") == ((writer_slot("orders", 5), COPY_SLOTS), ("orders", 5))
    # Named by no count (an older writer's): taken for the 256 slots' (the sweep also tries the
    # id a writer per partition had).
    legacy = _Message(key, encode_offset_value(9))
    assert progress_slot(legacy, "A") == ((writer_slot("orders", 5), COPY_SLOTS), ("orders", 5))
    assert progress_slot(under_two, "other") is None


def test_a_sweep_record_says_the_count_of_the_id_that_swept() -> None:
    assert sweep_slots(sweep_key_topic(COPY_SLOTS)) == COPY_SLOTS
    assert sweep_key_topic(COPY_SLOTS) == "mirrorflow.sweep"  # as before: older readers agree
    assert sweep_slots(sweep_key_topic(3)) == 3
    ((key, value),) = progress_sweep_records("A", 1, [("offsets", 4)], 3).values()
    assert value is None
    assert progress_slot(_Message(key, None), "A") == ((1, 3), None)
