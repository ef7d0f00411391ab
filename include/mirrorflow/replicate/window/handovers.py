"""How a window's tasks hand writer slots over to the next window's, and what they say of it.

Before it opens any writer a task stores a takeover of its slots (channel.py); its first batch
then opens every slot it holds, which fences the previous window's writers of them (and, under
another writer-slot count, the ids the previous count wrote its partitions under). A task of the
previous window that reads a newer takeover of a slot keeps copying it until its writer is
fenced, or lets it go at once when it has nothing to copy; a takeover under another slot count
takes every slot at once. When all its slots are gone the task ends. A task fenced on a slot that
nobody newer announced (an older window's late retry, a transaction the broker timed out) takes
the slot back with a new worker, at most task.MAX_RETAKES times. So the next window takes over
slot by slot, one writer per partition at any moment, and a record waits at most a batch or two
longer at a handover.

Whose a slot is, is read twice around a writer's opening: before it (a task opens no writer for a
slot a newer window announced) and again once its producer is initialised, before it writes
(`taken_by`). The second look closes the gap between the first and the opening: a newer window
under another slot count fences the old ids and settles progress in that gap, and its fencing is
of ids the late writer then takes up again, so without it both copied the same records. Its
announcement was stored before its fencing, so a look after the opening always finds it.

What a task says: one INFO line per set of writer slots it hands over, and librdkafka's lines of
the writers the handover fenced at DEBUG, not as the FATAL / TXNERR errors librdkafka makes of
them.

At a handover the next window's writers fence this window's, slot by slot, by design (task.py).
librdkafka logs each fenced writer as a fatal error, before the task can know why it was fenced:
the task's slots are watched (copy/fencing_log.py), so those lines wait until the task has read the
run-records topic. A slot a newer window announced is a handover (`released`); a slot fenced by
anyone else is not (`taken_back`), and its lines are logged at their own levels beside the task's
warning, as the sign of another copy of the flow running that they are.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Collection, Iterable
from typing import Any

from mirrorflow.replicate.copy.fencing_log import FENCINGS
from mirrorflow.replicate.copy.ids import slot_transactional_id
from mirrorflow.replicate.copy.job import CopyJob
from mirrorflow.replicate.plan import COPY_SLOTS
from mirrorflow.replicate.runs import RunRecord
from mirrorflow.replicate.window.channel import TAKEOVER
from mirrorflow.replicate.window.settings import WindowSettings, clock
from mirrorflow.replicate.window.share import Assignment

NAMED_SLOTS = 8  # slots a line names; the rest are counted

log = logging.getLogger("mirrorflow.window")


def slot_list(slots: Iterable[int]) -> str:
    """ "slot 3", "slots 0, 2 and 4", "slots 0, 2, ... 14 and 120 more"."""
    ordered = sorted(slots)
    if len(ordered) == 1:
        return f"slot {ordered[0]}"
    named = ", ".join(map(str, ordered[:NAMED_SLOTS]))
    rest = len(ordered) - NAMED_SLOTS
    if rest > 0:
        return f"slots {named} and {rest:,} more"
    return f"slots {', '.join(map(str, ordered[:-1]))} and {ordered[-1]}"


def slots_taken(
    record: RunRecord,
    body: dict[str, Any],
    *,
    assignment: Assignment,
    attempt: str,
    own_offset: int | None,
    held: Collection[int],
) -> tuple[set[int], bool]:
    """The slots of `held` that a takeover record (`body` its JSON) takes from this task, and
    whether they go at once. Only a newer window's takeover takes any: a later plan, or the same
    plan's record after this task's own. One under another slot count (tasks.max changed) takes
    every slot at once, after the batch in flight: its slots are other partitions, its tasks
    together take the whole flow, and a writer of this task opened again would fence the newer
    window's ids in turn. Otherwise a slot this task has not opened yet (`own_offset` None) goes
    at once, and one it has goes once its writer is fenced or it has nothing to copy."""
    mine = assignment.plan_offset
    if body["attempt"] == attempt:
        return set(), False
    newer = body["plan_offset"] > mine or (
        body["plan_offset"] == mine and own_offset is not None and record.offset > own_offset
    )
    if not newer:
        return set(), False
    if body.get("writer_slots", COPY_SLOTS) != assignment.writer_slots:
        return set(held), True
    return set(body["slots"]) & set(held), own_offset is None


def taken_by(
    records: Iterable[RunRecord], slot: int, *, assignment: Assignment, attempt: str, own_offset: int | None
) -> str:
    """Why `slot` is no longer this task's to write, as the run records read so far say (a newer
    window's takeover that names it, or takes the whole flow under another slot count); "" while
    it is."""
    for record in records:
        if record.kind != TAKEOVER:
            continue
        taken, _ = slots_taken(
            record,
            json.loads(record.body),
            assignment=assignment,
            attempt=attempt,
            own_offset=own_offset,
            held={slot},
        )
        if taken:
            return (
                f"window {record.run_id} announced that it takes writer slot {slot} of {assignment.flow} over "
                "(and may have fenced its writer already); this task writes no more of it"
            )
    return ""


def retakes_error(slots: Collection[int], flow: str, times: int) -> str:
    """The window's failure when a task's slots were fenced `times` times by writers that are not
    a newer window of the flow."""
    return (
        f"writer {slot_list(slots)} of {flow} fenced {times} times by writers that are not a newer "
        "window of this flow: another copy of the flow is running (`mirrorflow replicate` in batch "
        "mode, an older window retried by hand, MirrorMaker 2); stop it"
    )


def late_start_error(
    settings: WindowSettings, *, task: int, flow: str, held: Collection[int], successor: bool
) -> str:
    """The window's failure when `task` starts holding `held` after the window and its wait for
    the next window are over (WindowSettings.started_late); "" when it does not."""
    if not held or not settings.started_late(successor=successor):
        return ""
    over_at = settings.ends_ms + int(settings.wait_s(successor=successor) * 1000)
    return (
        f"task {task} of the window of {flow} started at {clock(int(time.time() * 1000))}, after the "
        f"window and its wait for the next window were over ({clock(over_at)}), and no newer window "
        f"has taken its writer slots ({slot_list(held)}): their partitions are not being copied. The "
        "next window copies them from their committed progress; if none is running, unpause or "
        "trigger the flow's replicate DAG"
    )


class HandoverLog:
    def __init__(self, job: CopyJob, assignment: Assignment) -> None:
        self.source, self.target, self.slots = job.source, job.target, job.slots
        self.flow, self.index, self.run_id = assignment.flow, assignment.index, assignment.run_id
        self.watched: set[int] = set()
        self.handed: list[int] = []
        """Slots handed over since the last line."""
        self.fenced = 0
        """Of those, how many had a writer the next window fenced."""
        self.successor: str | None = None
        """The run id of the window that announced it takes slots over."""

    def _ids(self, slots: Iterable[int]) -> list[str]:
        return [slot_transactional_id(self.source, self.target, slot, self.slots) for slot in slots]

    def watch(self, slots: Iterable[int]) -> None:
        """Hold librdkafka's fencing lines of these slots' writers until the task decides."""
        slots = set(slots)
        self.watched |= slots
        FENCINGS.watch(self._ids(slots))

    def released(self, slot: int, *, fenced: bool) -> None:
        """The slot went to a newer window (its writer fenced by it, or idle and let go)."""
        self.handed.append(slot)
        self.fenced += fenced
        FENCINGS.expected(self._ids([slot]))

    def taken_back(self, slots: Iterable[int]) -> None:
        """Slots fenced by a writer that is no newer window: their lines at their own levels."""
        FENCINGS.unexpected(self._ids(slots))

    def retaking(self, slots: Collection[int]) -> None:
        """The task's warning that it takes such slots back with a new worker."""
        log.warning(
            "a writer that is not a newer window fenced this task's writer %s; taking %s back",
            slot_list(slots),
            "it" if len(slots) == 1 else "them",
        )

    def tell(self) -> None:
        """The INFO line of the slots handed over since the last one; held lines no one decided on
        for fencing_log.HOLD_S at their own levels."""
        FENCINGS.overdue()
        if not self.handed:
            return
        to = (
            "a new attempt of this window"
            if self.successor == self.run_id
            else f"window {self.successor}"
            if self.successor
            else "the next window"
        )
        fenced = (
            f"its writers fenced this task's writers of {self.fenced:,} of them, as a handover does"
            if self.fenced
            else "none of them was being written, so no writer had to be fenced"
        )
        log.info(
            "window task %d of %s handed writer %s over to %s; %s",
            self.index,
            self.flow,
            slot_list(self.handed),
            to,
            fenced,
        )
        self.handed, self.fenced = [], 0

    def close(self, leaving: Iterable[int]) -> None:
        """The task ends (its writers closed): the last line, and lines still held logged, at
        DEBUG for `leaving` slots (a newer window announced them), else at their own levels."""
        self.tell()
        FENCINGS.forget(self._ids(self.watched), expected=self._ids(leaving))
