"""Which task of a window copies which partitions: a share of the writer slots.

A window's tasks run for the whole window and new topics and partitions join while they run, so
every task must know, without asking anyone, which new partitions are its own. Slots are dealt by
number: task i of n holds the slots s with s % n == i, and a partition goes wherever its slot is
(plan.writer_slot), of the flow's writer slots (plan.flow_writer_slots: tasks.max for a
micro-batch flow, so a task holds one slot and commits one transaction a batch). Whole slots stay
with one task, as the copy engine requires.

A window runs min(tasks.max, slots in use) tasks, at least one: a flow of 3 partitions needs no
more than 3 long-running tasks, and the next window counts again.
"""

from __future__ import annotations

from dataclasses import dataclass

from mirrorflow.replicate.plan import COPY_SLOTS, PartitionSpan, Plan, writer_slot


@dataclass(frozen=True, slots=True)
class Assignment:
    """What one task of a window is given: its share of the plan."""

    flow: str
    run_id: str
    plan_offset: int
    index: int
    tasks: int
    spans: tuple[PartitionSpan, ...]
    writer_slots: int = COPY_SLOTS
    """The flow's writer slots (the plan's): how partitions map to slots and transactional ids."""

    def holds(self, slot: int) -> bool:
        return slot % self.tasks == self.index

    @property
    def slots(self) -> list[int]:
        return [slot for slot in range(self.writer_slots) if self.holds(slot)]


def task_count(plan: Plan, limit: int | None = None) -> int:
    """Tasks for a window of `plan`: tasks.max, no more than the slots in use, at least one, and
    at most `limit` (the task slots the cluster offers, when known)."""
    used = len({writer_slot(s.topic, s.partition, plan.slots) for s in plan.spans})
    count = max(1, min(plan.tasks_max, used))
    return count if limit is None else max(1, min(count, limit))


def assignments(plan: Plan, plan_offset: int, tasks: int) -> list[Assignment]:
    shares: list[list[PartitionSpan]] = [[] for _ in range(tasks)]
    for span in plan.spans:
        shares[writer_slot(span.topic, span.partition, plan.slots) % tasks].append(span)
    return [
        Assignment(plan.flow, plan.run_id, plan_offset, index, tasks, tuple(share), plan.slots)
        for index, share in enumerate(shares)
    ]
