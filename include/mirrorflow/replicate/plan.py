"""What one run copies: per source partition, a span [start, end) cut into bounded ranges.

A plan is data only (JSON in the runs topic and in XCom). The ranges of one partition must be
copied in order by one writer, because the target keeps source order; so work is handed out per
partition ("units"), and the units of one writer slot (which share a transactional.id, see
COPY_SLOTS) to one of at most `tasks.max` workers.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field, fields

from mirrorflow.replicate.progress_records import ProgressSnapshot

COPY_SLOTS = 256
"""Writer slots per flow. A source partition's copy is written under the transactional.id of
its slot, one of COPY_SLOTS fixed by a hash of (topic, partition): every writer of a partition,
whichever run, task or attempt it belongs to, uses the same id, so each new writer fences the
older ones (zombies, a concurrent run) as a per-partition id would, while one producer copies
all the partitions of a slot that a worker holds, one after another. Fixed, not derived from
tasks.max: changing it moves partitions to other ids, which must then be fenced as well (see
copy.writer.SlotWriter); progress records say which scheme wrote them. A micro-batch flow uses
`tasks.max` slots instead (see flow_writer_slots)."""


def flow_writer_slots(micro_batch: bool, tasks_max: int) -> int:
    """The writer slots of a flow: COPY_SLOTS for a batch flow; tasks.max for a micro-batch flow.

    A window's task commits one transaction per slot it holds and batch (every 250 ms): with
    COPY_SLOTS that is up to 256 transactions a batch, each with its AddPartitionsToTxn, EndTxn and
    markers, and the commits were most of a batch's time at 1,000 partitions. With a slot per task,
    a task commits one transaction a batch (a few where its partitions hold more than
    range.max.records), as an MM2 task commits one per poll. Every copy of the flow (its windows,
    and a migration run of it in batch mode) uses the flow's count, so any two current writers of
    a partition share its id and fence each other; a change of mode or of tasks.max moves the
    partitions to other ids, which the first writer under the new count fences (the progress
    records say which count wrote them)."""
    return max(1, tasks_max) if micro_batch else COPY_SLOTS


def writer_slot(topic: str, partition: int, slots: int = COPY_SLOTS) -> int:
    """The writer slot of a source partition (stable across processes and versions: CRC-32).

    Of COPY_SLOTS, a hash of (topic, partition). Of a micro-batch flow's few slots (one per task),
    a topic's partitions go round the slots from one its name picks, so every task holds an even
    share of each topic with at least as many partitions as there are tasks: hashed, the 4
    partitions of a topic went all to one of 2 tasks, and the other held nothing."""
    if slots == COPY_SLOTS:
        return zlib.crc32(b"%s\0%d" % (topic.encode(), partition)) % slots
    return (zlib.crc32(topic.encode()) + partition) % slots


SLICE_UNIT_COST = 1000
"""What a partition's copy costs a worker beside its records, in offsets: a few requests."""


@dataclass(frozen=True, slots=True)
class Range:
    topic: str
    partition: int
    remote_topic: str
    start: int
    end: int

    @property
    def records(self) -> int:
        """Offsets in the range (an upper bound on records: gaps are not known in advance)."""
        return self.end - self.start


@dataclass(frozen=True, slots=True)
class PartitionSpan:
    """One source partition's pending offsets at plan time.

    `progress` is the last replicated upstream offset (-1 when nothing was ever copied);
    `lost` counts offsets that retention removed from the source before they were copied.
    `incarnation` names the source and remote topic incarnations the copy writes into progress
    ("<source topic id>,<remote topic id>"), `progress_incarnation` those of the stored
    progress; `restarted` says why the span starts over at the source's earliest offset (the
    source topic or the remote topic was deleted and created again), or is empty.
    """

    topic: str
    partition: int
    remote_topic: str
    start: int
    end: int
    progress: int = -1
    lost: int = 0
    incarnation: str = ""
    progress_incarnation: str = ""
    restarted: str = ""
    progress_slots: int = 0
    """The writer slot count its progress was written under (0: by a writer with an id per
    partition, whose id is fenced); with no progress, the plan's own count (nothing older to
    fence), or 0 while progress of such a writer is in the flow (planner.py)."""
    open_at: int = -1
    """Where a transaction was open in the remote partition when the plan was made, for a span
    with nothing else to do (-1: none): its writer checks it (a crash can leave one open for
    good there, and a read_committed reader of the target then waits in front of it forever)."""

    @property
    def pending(self) -> int:
        return max(0, self.end - self.start)

    @property
    def needs_copy(self) -> bool:
        """Offsets to copy, or progress that must still be recorded (a start past it, a restart)."""
        return self.pending > 0 or self.progress < self.start - 1 or bool(self.restarted)

    def ranges(self, max_records: int) -> list[Range]:
        out = []
        start = self.start
        while start < self.end:
            end = min(self.end, start + max_records)
            out.append(Range(self.topic, self.partition, self.remote_topic, start, end))
            start = end
        return out


@dataclass(frozen=True, slots=True)
class Plan:
    run_id: str
    source: str
    target: str
    mode: str  # "replicate" or "migrate"
    created_ms: int
    max_records: int
    max_bytes: int
    delivery: str  # "exactly-once" or "at-least-once"
    tasks_max: int
    spans: tuple[PartitionSpan, ...] = field(default_factory=tuple)
    created_topics: tuple[str, ...] = ()
    slots: int = COPY_SLOTS
    """The flow's writer slots (flow_writer_slots): how its partitions map to transactional ids."""
    progress_read: ProgressSnapshot | None = None
    """The settled read of the flow's progress this plan was made from, handed to the copy tasks
    (CopyJob.progress_start): they read only what was written after it. None in plans of older
    versions, and when the progress topic's id was not known."""

    @property
    def flow(self) -> str:
        return f"{self.source}->{self.target}"

    def ranges(self) -> list[Range]:
        return [r for span in self.spans for r in span.ranges(self.max_records)]

    def units(self) -> list[PartitionSpan]:
        """Spans with work to do, plus empty ones whose progress must still be recorded or whose
        remote partition had a transaction open."""
        return [s for s in self.spans if s.needs_copy or s.open_at >= 0]

    def slices(self) -> list[list[PartitionSpan]]:
        """Units over min(tasks.max, writer slots) workers, each slot's units to one worker (its
        units share a transactional.id, see COPY_SLOTS and `slots`): the slot with the most work goes
        to the worker with the least so far (a partition counts as SLICE_UNIT_COST offsets on
        top of its pending ones); within a worker, units in (topic, partition) order."""
        slots: dict[int, list[PartitionSpan]] = {}
        for unit in self.units():
            slots.setdefault(writer_slot(unit.topic, unit.partition, self.slots), []).append(unit)
        workers = max(1, min(self.tasks_max, len(slots)))
        dealt: list[list[PartitionSpan]] = [[] for _ in range(workers)]
        loads = [0] * workers

        def cost(units: list[PartitionSpan]) -> int:
            return sum(u.pending + SLICE_UNIT_COST for u in units)

        for _, units in sorted(slots.items(), key=lambda item: (-cost(item[1]), item[0])):
            least = min(range(workers), key=lambda w: (loads[w], w))
            dealt[least].extend(units)
            loads[least] += cost(units)
        return [sorted(d, key=lambda s: (s.topic, s.partition)) for d in dealt if d]

    def summary(self) -> dict[str, dict[str, int]]:
        """Per remote topic: partitions, pending offsets, ranges and offsets lost to retention."""
        out: dict[str, dict[str, int]] = {}
        for span in self.spans:
            row = out.setdefault(
                span.topic,
                {"partitions": 0, "pending": 0, "ranges": 0, "lost": 0},
            )
            row["partitions"] += 1
            row["pending"] += span.pending
            row["ranges"] += len(span.ranges(self.max_records))
            row["lost"] += span.lost
        return out

    def restarted(self) -> dict[str, str]:
        """ "topic-partition" -> why it is copied again from the source's earliest offset."""
        return {f"{s.topic}-{s.partition}": s.restarted for s in self.spans if s.restarted}

    def json_pieces(self, rows_per_piece: int = 1000) -> Iterator[str]:
        """The plan's JSON in pieces of at most `rows_per_piece` spans, for the run-records
        writer to chunk as they come: a plan of 120,000 partitions is ~11 MB of JSON, and it
        need not exist as one string. Spans are rows in PartitionSpan's field order."""
        head = {
            f.name: getattr(self, f.name) for f in fields(self) if f.name not in ("spans", "progress_read")
        }
        head["created_topics"] = list(self.created_topics)
        yield json.dumps(head, separators=(",", ":"))[:-1] + ',"spans":['
        for first in range(0, len(self.spans), rows_per_piece):
            rows = [
                [
                    s.topic,
                    s.partition,
                    s.remote_topic,
                    s.start,
                    s.end,
                    s.progress,
                    s.lost,
                    s.incarnation,
                    s.progress_incarnation,
                    s.restarted,
                    s.progress_slots,
                    s.open_at,
                ]
                for s in self.spans[first : first + rows_per_piece]
            ]
            yield ("," if first else "") + json.dumps(rows, separators=(",", ":"))[1:-1]
        yield "]"
        if self.progress_read is not None:
            yield ',"progress_read":'
            yield from self.progress_read.json_pieces(rows_per_piece)
        yield "}"

    def to_json(self) -> str:
        return "".join(self.json_pieces())

    @classmethod
    def from_json(cls, text: str | bytes) -> Plan:
        data = json.loads(text)
        data["spans"] = tuple(PartitionSpan(*row) for row in data["spans"])
        data["created_topics"] = tuple(data.get("created_topics", ()))
        read = data.get("progress_read")
        data["progress_read"] = None if read is None else ProgressSnapshot.from_json_data(read)
        return cls(**data)
