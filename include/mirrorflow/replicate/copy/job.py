"""What a copy worker is given (CopyJob) and what it gives back per partition (UnitResult)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from mirrorflow.replicate.plan import COPY_SLOTS, PartitionSpan
from mirrorflow.replicate.progress_records import ProgressSnapshot

DEFAULT_TRANSACTION_TIMEOUT_MS = 60000  # librdkafka's default

SETTLE_MARGIN_S = 20.0
"""Beyond transaction.timeout.ms: the broker's check for timed-out transactions runs every 10 s
(transaction.abort.timed.out.transaction.cleanup.interval.ms), and its markers take a moment."""


def transaction_timeout_s(target_producer: Mapping[str, Any]) -> float:
    """The copy producers' transaction.timeout.ms: no transaction of the flow's writers stays
    open longer (the broker aborts it then), which bounds every wait for one."""
    return float(target_producer.get("transaction.timeout.ms", DEFAULT_TRANSACTION_TIMEOUT_MS)) / 1000


def settle_timeout_s(target_producer: Mapping[str, Any]) -> float:
    """How long a settle waits for transactions open in progress partitions before it takes the
    one left for hanging: the flow's transaction.timeout.ms (every writer of the flow writes
    progress with the flow's target producer settings) and SETTLE_MARGIN_S."""
    return transaction_timeout_s(target_producer) + SETTLE_MARGIN_S


GROUP_PARTITIONS = 32
"""How many small partitions of a slot share a transaction in a batch flow (schedule.py)."""
WINDOW_GROUP_PARTITIONS = 4096
"""The same for a micro-batch flow: its task holds one slot, and a batch of all the partitions
with new records commits as one transaction, bounded by range.max.records offsets, as an MM2 task
commits once per poll."""


@dataclass(frozen=True)
class CopyJob:
    """Everything a worker needs for one flow's copy; shipped to Spark executors as is.

    Client configs may hold credentials, so they never appear in repr().
    """

    run_id: str
    source: str
    target: str
    exactly_once: bool
    max_records: int
    max_bytes: int
    provenance: bool
    progress_topic: str
    offset_syncs_topic: str | None
    offset_syncs_on_target: bool
    source_consumer: dict[str, Any] = field(repr=False)
    target_producer: dict[str, Any] = field(repr=False)
    target_consumer: dict[str, Any] = field(repr=False)
    source_producer: dict[str, Any] = field(repr=False)
    source_admin: dict[str, Any] = field(default_factory=dict, repr=False)
    target_admin: dict[str, Any] = field(default_factory=dict, repr=False)
    stall_timeout_s: float = 120.0
    unreachable_timeout_s: float = 15.0
    max_bytes_per_second: int = 0
    """The flow's cap (mirrorflow.replicate.max.bytes.per.second); 0: none."""
    workers: int = 1
    """How many workers share the cap (a run's tasks): each holds its reads to an equal share."""
    remote_topics: Mapping[str, str] = field(default_factory=dict, repr=False)
    """Source topic -> remote topic for every topic of the plan: what a writer's landed check
    (copy/recovery/landed.py) reads when its settle meets a hanging progress record of any of them."""
    group_partitions: int = GROUP_PARTITIONS
    """How many small partitions of a slot share a transaction (schedule.py)."""
    older_slots: tuple[int, ...] = ()
    """Other slot counts the flow's progress named when the plan was made (a change of tasks.max
    or of mode): their ids are fenced for every partition before it is written, progress or not,
    and progress naming a count neither here nor `slots` is a newer writer's (copy/writer.py)."""
    slots: int = COPY_SLOTS
    """The flow's writer slots (plan.flow_writer_slots): a partition's transactional.id is its
    slot's of this many; what its progress records say they were written under."""
    progress_start: ProgressSnapshot | None = field(default=None, repr=False)
    """The plan's settled read of the flow's progress: each worker's progress reader starts from
    it and reads only what was written since (ProgressReader `start`), not the topic's history."""

    @property
    def chunk_seconds(self) -> float:
        """How long one transaction may keep reading before it commits.

        A transaction still open after transaction.timeout.ms is aborted by the broker, and on a
        slow link a chunk bounded by records and bytes alone would then fail the same way on
        every run. Reading stops after a quarter of the timeout, which leaves the rest for the
        flush and the commit."""
        return max(0.05, transaction_timeout_s(self.target_producer) / 4)


@dataclass
class UnitResult:
    """What copying one partition did. `copy_seconds` is the time spent moving records once the
    clients were ready (the steady-rate figure); `interleaved_chunks` counts chunks copied twice
    because another writer's records landed among ours on the target."""

    topic: str
    partition: int
    remote_topic: str
    planned_start: int
    planned_end: int
    resumed_from: int = -1
    progress: int = -1
    records: int = 0
    bytes: int = 0
    skipped_loops: int = 0
    retimed: int = 0
    """Records with CreateTime 0 that the target got with the copy's wall-clock time instead:
    librdkafka (and so every confluent-kafka producer) reads a timestamp of 0 as "now"."""
    transactions: int = 0
    offset_syncs: int = 0
    offset_sync_errors: int = 0
    attempts: int = 0
    seconds: float = 0.0
    copy_seconds: float = 0.0
    interleaved_chunks: int = 0
    waited_ms: int = -1
    """How long the oldest record this copy moved waited for it: from its source timestamp to the
    commit that made it visible on the target (-1: no record copied). A micro-batch window takes it
    as its lag in seconds; the source timestamp is the append time with LogAppendTime topics and
    the producer's CreateTime otherwise."""
    last_target_offset: int = -1
    """The remote partition's offset of the last record this copy wrote (-1: none): with
    `progress`, the last source offset, it says where the run's copies end on both sides (the
    Asset events of a run carry both)."""
    unreachable: str | None = None
    """The alias of a cluster this copy found unreachable (its worker then skips the rest)."""
    lost: list[tuple[int, int]] = field(default_factory=list)
    """Offset ranges [start, end) deleted from the source (retention, DeleteRecords) before they
    were copied: found by the plan or met by the copy. Ranges, not a count, so that attempts
    which meet the same gap again never count it twice."""
    error: str | None = None
    stale: bool = False
    """Not copied because the plan no longer holds (StalePlan): retrying the same span fails the
    same way; only a newer plan copies it."""

    @classmethod
    def for_span(cls, span: PartitionSpan) -> UnitResult:
        result = cls(span.topic, span.partition, span.remote_topic, span.start, span.end)
        if span.lost:
            result.count_lost(span.start - span.lost, span.start)
        return result

    @classmethod
    def not_copied(
        cls, span: PartitionSpan, error: str, *, progress: int = -1, unreachable: str | None = None
    ) -> UnitResult:
        """The result of a unit that never ran, and why."""
        return cls(
            span.topic,
            span.partition,
            span.remote_topic,
            span.start,
            span.end,
            progress=progress,
            unreachable=unreachable,
            error=error,
        )

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def lost_to_retention(self) -> int:
        return sum(end - start for start, end in self.lost)

    def count_lost(self, start: int, end: int) -> None:
        self.lost = merge_ranges([*self.lost, (start, end)])


def merge_ranges(ranges: Sequence[Sequence[int]]) -> list[tuple[int, int]]:
    """The union of half-open offset ranges, sorted and without overlaps or empty ranges."""
    out: list[tuple[int, int]] = []
    for start, end in sorted((int(a), int(b)) for a, b in ranges if b > a):
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


class CopyError(RuntimeError):
    """A failure that retrying cannot fix (for example the remote partition does not exist)."""


class StalePlan(CopyError):
    """The span was planned for topic incarnations or progress that no longer hold: copying it
    would skip or repeat records, so it is not copied and the next plan sees it anew."""


class Fenced(RuntimeError):
    """A newer writer took the slot over: this writer copies nothing more of it."""
