"""One task of a window: a CopyWorker kept for the whole window, copying its share of the slots
batch after batch until the window is over, the next window has taken its slots, or it is told
to stop.

Every interval the task asks the source once for the last stable offset of its partitions (one
batched ListOffsets; quiet ones in turns, see PartitionState.due) and copies each partition's
[progress + 1, that offset), bounded by mirrorflow.range.max.records, through the same worker
(clients and slot writers stay open). A batch commits what it copies; stopping between batches
leaves nothing half-done.

Handover: a window's tasks take its slots from the last window's tasks slot by slot, through
takeover records in the run-records topic and the writers' fencing; handovers.py says how.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import KafkaException
from confluent_kafka.admin import OffsetSpec

from mirrorflow.kafka import ClusterUnreachable, KafkaCallError, admin_client
from mirrorflow.kafka_offsets import list_offsets
from mirrorflow.replicate.copy import CopyJob, CopyWorker, UnitResult
from mirrorflow.replicate.phases import phase
from mirrorflow.replicate.plan import COPY_SLOTS, PartitionSpan, Plan, writer_slot
from mirrorflow.replicate.runs import RunRecord, RunRecordNotStored
from mirrorflow.replicate.window.channel import (
    REFRESH,
    STATUS,
    TAKEOVER,
    RunsTail,
    StatusWriter,
    new_attempt,
    write_takeover,
)
from mirrorflow.replicate.window.figures import TaskFigures
from mirrorflow.replicate.window.handovers import (
    HandoverLog,
    late_start_error,
    retakes_error,
    slots_taken,
    taken_by,
)
from mirrorflow.replicate.window.partitions import PartitionState, next_spans, refreshed
from mirrorflow.replicate.window.reach import TargetReach
from mirrorflow.replicate.window.settings import WindowSettings
from mirrorflow.replicate.window.share import Assignment

MAX_RETAKES = 5
log = logging.getLogger("mirrorflow.window")


class WindowFailed(RuntimeError):
    """The window cannot go on (a cluster lost, its slots taken again and again)."""


@dataclass
class TaskOutcome:
    """What a task of a window hands back to its driver."""

    index: int
    attempt: str
    results: list[UnitResult] = field(default_factory=list)
    stopped: str = ""
    error: str | None = None
    handed_over: list[int] = field(default_factory=list)
    retakes: int = 0
    joined: int = 0
    figures: dict[str, Any] = field(default_factory=dict)


class WindowTask:
    def __init__(
        self,
        job: CopyJob,
        settings: WindowSettings,
        assignment: Assignment,
        stop: Callable[[], bool] | None = None,
    ) -> None:
        self.job, self.settings, self.assignment = job, settings, assignment
        self.stop = stop or (lambda: False)
        self.parts = {
            (s.topic, s.partition): PartitionState(s, job.slots, turn)
            for turn, s in enumerate(assignment.spans)
        }
        self.held = set(assignment.slots)
        self.leaving: set[int] = set()
        """Slots a newer window announced: let go once fenced or idle."""
        self.outcome = TaskOutcome(assignment.index, new_attempt())
        self.own_offset: int | None = None
        self.figures = TaskFigures()
        self.batches = 0
        self.renew = False
        """Whether the next batch needs a new worker (see _refresh)."""
        self.handovers = HandoverLog(job, assignment)
        self.successor: str | None = None
        """The run id of the newest window of the flow that planned after this one (RunsTail)."""
        self.older_counts: set[int] = set()
        """Writer-slot counts of older windows' takeovers read after this window's plan."""

    # -- the loop ---------------------------------------------------------------------------------
    def run(self) -> TaskOutcome:
        job, settings, outcome = self.job, self.settings, self.outcome
        reach = TargetReach(job)
        tail = RunsTail(
            reach.config(job.target_consumer),
            self.assignment.flow,
            (REFRESH, TAKEOVER, STATUS),
            start=self.assignment.plan_offset,
            run_id=self.assignment.run_id,
        )
        status = StatusWriter(reach.config(job.target_producer), self.assignment.flow, self.assignment.run_id)
        worker: CopyWorker | None = None
        try:
            self._read(tail.catch_up(job.unreachable_timeout_s))
            self.successor = tail.successor
            self._check_start()
            self.handovers.watch(self.held)
            if self.held:
                self.own_offset = write_takeover(
                    job.target_producer,
                    self.assignment.flow,
                    self.assignment.run_id,
                    plan_offset=self.assignment.plan_offset,
                    attempt=outcome.attempt,
                    slots=self.held,
                    writer_slots=self.assignment.writer_slots,
                    timeout_s=job.unreachable_timeout_s,
                )
                # An older window's takeover stored between this window's plan and its own is
                # one whose writers may be copying now: its count is fenced too (announced.py).
                self._read(tail.catch_up(job.unreachable_timeout_s))
            worker = self._worker(tail)
            # Its metadata requests name topics that may have been deleted (_batch); the flow's
            # admin config never lets them be created again (FlowConfig.file_client_config).
            admin = admin_client(job.source_admin or job.source_consumer)
            first = True
            while not outcome.stopped:
                tick = time.monotonic()
                outcome.stopped = self._stop_reason(first=first)
                if outcome.stopped:
                    break
                worker = self._batch(worker, admin, tail, first=first)
                first = False
                self.batches += 1
                if self.batches % settings.status_every == 0:
                    with phase("window: status record"):
                        status.send(self._status())
                with phase("window: run-records tail"):
                    self._read(tail.poll())
                    self.successor = tail.successor
                    self.handovers.tell()
                with phase("window: target probe"):
                    reach.check(tail.probe)
                with phase("window: wait for the next batch"):
                    self._sleep(tick + settings.interval_s - time.monotonic())
        except (WindowFailed, ClusterUnreachable, RunRecordNotStored) as exc:
            outcome.error = str(exc)
            outcome.stopped = "failed"
        finally:
            if worker is not None:
                worker.close()
            self.handovers.close(self.leaving)
            status.send(self._status())
            # The last figures are what the status page keeps of a window that ended: worth a wait
            # unless the window failed (its target may be gone).
            status.close(2.0 if outcome.error else job.unreachable_timeout_s)
            tail.close()
        return self._finish()

    def _check_start(self) -> None:
        assignment, successor = self.assignment, self.successor is not None
        late = late_start_error(
            self.settings, task=assignment.index, flow=assignment.flow, held=self.held, successor=successor
        )
        if late:
            raise WindowFailed(late)

    def _stop_reason(self, *, first: bool = False) -> str:
        if self.stop():
            return "stopped"
        if not self.held:
            return "handed over"
        return (
            "window over"
            if self.settings.window_over(first=first, successor=self.successor is not None)
            else ""
        )

    def _sleep(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while not self.stop() and (left := deadline - time.monotonic()) > 0:
            time.sleep(min(left, 0.1))

    # -- one batch ----------------------------------------------------------------------------------
    def _batch(self, worker: CopyWorker, admin: Any, tail: RunsTail, *, first: bool) -> CopyWorker:
        job, settings = self.job, self.settings
        if self.renew:
            worker.close()
            worker, self.renew = self._worker(tail), False
        now = time.monotonic()
        due = [
            st for st in self.parts.values() if st.due(now, self.batches, settings.quiet_turns, first=first)
        ]
        active = [st for st in due if self._slot(st.key) in self.held]
        missing: set[tuple[str, int]] = set()
        try:
            with phase("window: source end offsets (ListOffsets)"):
                ends = list_offsets(
                    admin,
                    [st.key for st in active],
                    OffsetSpec.latest(),
                    read_committed=True,
                    timeout_s=job.unreachable_timeout_s,
                    missing=missing,
                )
        except KafkaCallError as exc:
            raise WindowFailed(f"the end offsets of cluster {job.source} could not be read: {exc}") from exc
        for topic in sorted({t for t, _ in missing}):
            # A partition added since the client last read the topic's metadata is unknown to it
            # until it reads it again (every topic.metadata.refresh.interval.ms, 5 min): now.
            with contextlib.suppress(KafkaException):
                admin.list_topics(topic, timeout=job.unreachable_timeout_s)
        listed_ms = int(time.time() * 1000)
        spans, states = [], []
        with phase("window: spans of partitions with new records"):
            next_spans(active, ends, listed_ms, self.settings, spans, states, first=first)
        spans, states = self._unopened_leaving_dropped(worker, tail, spans, states)
        with phase("window: copy (all slots)"):
            results = worker.copy(spans) if spans else []
        with phase("window: figures"):
            fenced = set(worker.fenced_slots)
            samples: dict[str, int] = {}
            for span, st, result in zip(spans, states, results, strict=True):
                sample = st.fold(
                    span, result, fenced=self._slot(st.key) in fenced, interval_s=settings.interval_s
                )
                samples[span.topic] = max(samples.get(span.topic, 0), sample)
            gone = next((r for r in results if r.unreachable), None)
            if gone is not None:
                raise WindowFailed(gone.error or f"cluster {gone.unreachable} is unreachable")
            busy = {self._slot((s.topic, s.partition)) for s in spans if s.pending}
            self._observe(samples, results)
        return self._after_fences(worker, tail, fenced, busy)

    def _unopened_leaving_dropped(
        self, worker: CopyWorker, tail: RunsTail, spans: list[PartitionSpan], states: list[PartitionState]
    ) -> tuple[list[PartitionSpan], list[PartitionState]]:
        """Before a batch opens a slot's writer (its first batch, a new worker, a producer let go
        after a failure), the task reads the takeovers stored since it last looked, and opens no
        writer for a slot a newer window announced: that open would fence the newer window's
        writer, which would take the slot back. Such a slot is idle and let go after the batch."""
        opening = {self._slot((s.topic, s.partition)) for s in spans} - worker.open_slots
        if not opening:
            return spans, states
        with phase("window: run-records tail"):
            self._read(tail.catch_up(self.job.unreachable_timeout_s))
        left = opening & self.leaving
        if not left:
            return spans, states
        kept = [(span, st) for span, st in zip(spans, states, strict=True) if self._slot(st.key) not in left]
        return [span for span, _ in kept], [st for _, st in kept]

    def _observe(self, samples: dict[str, int], results: Iterable[UnitResult]) -> None:
        now_ms = int(time.time() * 1000)
        for st in self.parts.values():
            if self._slot(st.key) in self.held:
                topic = st.base.topic
                samples[topic] = max(samples.get(topic, 0), st.lag_ms(now_ms))
        self.figures.batch(samples, results, now_ms)

    def _after_fences(
        self, worker: CopyWorker, tail: RunsTail, fenced: set[int], busy: set[int]
    ) -> CopyWorker:
        """Let go of slots a newer window took or may take now; take back slots fenced by anyone else."""
        fenced &= self.held
        if fenced - self.leaving:
            self._read(tail.catch_up(self.job.unreachable_timeout_s))
        for slot in list(self.leaving):
            if slot in fenced or slot not in busy:
                self._release(slot, fenced=slot in fenced)
        taken = fenced & self.held
        if not taken:
            return worker
        self.handovers.taken_back(taken)
        self.outcome.retakes += 1
        if self.outcome.retakes > MAX_RETAKES:
            raise WindowFailed(retakes_error(taken, self.assignment.flow, MAX_RETAKES + 1))
        self.handovers.retaking(taken)
        worker.close()
        return self._worker(tail)

    def _worker(self, tail: RunsTail) -> CopyWorker:
        return CopyWorker(
            self.job, may_write=lambda slot: self._may_write(tail, slot), older_counts=self.older_counts
        )

    def _may_write(self, tail: RunsTail, slot: int) -> str:
        """Why a slot is no longer this task's, asked by its writer once its producer is
        initialised (handovers.py): the run records up to their end now say (RunsTail.look)."""
        if slot not in self.held or slot in self.leaving:
            return f"writer slot {slot} was let go to a newer window"
        return taken_by(
            tail.look(self.job.unreachable_timeout_s),
            slot,
            assignment=self.assignment,
            attempt=self.outcome.attempt,
            own_offset=self.own_offset,
        )

    def _release(self, slot: int, *, fenced: bool = False) -> None:
        self.held.discard(slot)
        self.leaving.discard(slot)
        self.outcome.handed_over.append(slot)
        self.handovers.released(slot, fenced=fenced)

    # -- what the run-records topic says --------------------------------------------------------------
    def _read(self, records: Iterable[RunRecord]) -> None:
        for record in records:
            if record.kind == TAKEOVER:
                self._takeover(record)
            elif record.kind == REFRESH and record.run_id == self.assignment.run_id:
                self._refresh(Plan.from_json(record.body))
            elif record.kind == STATUS and record.run_id == self.assignment.run_id:
                self._earlier_attempt(json.loads(record.body))

    def _takeover(self, record: RunRecord) -> None:
        body = json.loads(record.body)
        if body["plan_offset"] < self.assignment.plan_offset:
            self.older_counts.add(int(body.get("writer_slots", COPY_SLOTS)))
        taken, at_once = slots_taken(
            record,
            body,
            assignment=self.assignment,
            attempt=self.outcome.attempt,
            own_offset=self.own_offset,
            held=self.held,
        )
        if taken:
            self.handovers.successor = record.run_id
        if at_once:
            for slot in sorted(taken):
                self._release(slot)
        else:
            self.leaving |= taken

    def _earlier_attempt(self, body: dict[str, Any]) -> None:
        """A status record of this task's earlier attempt (Spark runs a task again when its
        executor is lost): its counts ride on this attempt's status records, so the status page,
        which reads only the newest records, still counts what the lost attempt copied."""
        if int(body["task"]) == self.assignment.index and body.get("attempt") != self.outcome.attempt:
            self.figures.earlier_attempt(body, own=self.outcome.attempt)

    def _refresh(self, plan: Plan) -> None:
        held = [span for span in plan.spans if self._slot((span.topic, span.partition)) in self.held]
        joined, renew = refreshed(self.parts, held, self.job.slots)
        self.outcome.joined += joined
        self.renew |= renew

    # -- the end --------------------------------------------------------------------------------------
    def _status(self) -> dict[str, Any]:
        return self.figures.status(
            index=self.assignment.index,
            tasks=self.assignment.tasks,
            attempt=self.outcome.attempt,
            batches=self.batches,
            partitions=sum(self._slot(k) in self.held for k in self.parts),
        )

    def _finish(self) -> TaskOutcome:
        outcome = self.outcome
        outcome.results = [r for st in self.parts.values() if (r := st.final()) is not None]
        outcome.figures = self._status()
        log.info(
            "window task %d of %s ended (%s) after %d batches",
            outcome.index,
            self.assignment.flow,
            outcome.stopped,
            self.batches,
        )
        return outcome

    def _slot(self, key: tuple[str, int]) -> int:
        return writer_slot(*key, self.assignment.writer_slots)


def run_task(
    job: CopyJob, settings: WindowSettings, assignment: Assignment, stop: Callable[[], bool] | None = None
) -> TaskOutcome:
    return WindowTask(job, settings, assignment, stop).run()
