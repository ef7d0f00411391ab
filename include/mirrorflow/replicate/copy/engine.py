"""A copy worker that lives longer than one range: the long-lived engine.

A batch run gives each worker one share of a plan (whole writer slots) and closes it after. A
micro-batch window keeps one worker per Spark task for the whole window and hands it range after
range (and, when the window's plan is refreshed, spans of new topics and partitions): its clients,
its writers (one per slot, fenced and settled once) and its progress reader stay open, so a range
costs reads, produces and one commit per transaction, not a writer's set-up.

The slots of a share are copied side by side, up to SLOT_THREADS at a time: their time goes to
waiting on the brokers (a writer's fencing, the progress read, the commit), not to the CPU.
Large spans are copied one at a time beside them (schedule.SMALL_SPAN), where the CPU is the limit.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor

from mirrorflow.replicate.copy.clients import SharedClients
from mirrorflow.replicate.copy.job import CopyJob, UnitResult
from mirrorflow.replicate.copy.schedule import SMALL_SPAN, copy_units
from mirrorflow.replicate.phases import phase
from mirrorflow.replicate.plan import PartitionSpan, writer_slot

SLOT_THREADS = 8


class CopyWorker:
    """Copies spans of the flow's partitions with clients and slot writers kept between calls.

    Every call to `copy` must get, for each partition, a span that starts where the worker's last
    copy of it ended (or a fresh plan's span); the slot writers check that against what they
    committed (see resume.py)."""

    def __init__(
        self,
        job: CopyJob,
        *,
        keep_writers: bool = True,
        may_write: Callable[[int], str] | None = None,
        older_counts: set[int] | None = None,
    ) -> None:
        self.job = job
        self.shared = SharedClients(
            job, keep_writers=keep_writers, may_write=may_write, older_counts=older_counts
        )
        self._pool = ThreadPoolExecutor(SLOT_THREADS, thread_name_prefix="mirrorflow-copy")

    def copy(self, spans: Iterable[PartitionSpan]) -> list[UnitResult]:
        """Copy `spans` (results in their order): whole slots side by side, each slot's partitions
        small ones first, the slots with the most to copy first. Once a partition finds the source
        or the target unreachable, the rest fail at once with the same cause."""
        spans = list(spans)
        results: list[UnitResult | None] = [None] * len(spans)
        slots: dict[int, list[int]] = {}
        for index, span in enumerate(spans):
            slots.setdefault(writer_slot(span.topic, span.partition, self.job.slots), []).append(index)
        groups = [sorted(indexes, key=lambda i: spans[i].pending > SMALL_SPAN) for indexes in slots.values()]
        groups.sort(key=lambda indexes: -sum(spans[i].pending for i in indexes))
        self.shared.unreachable = None
        self.shared.check_ahead(spans)
        opening = set(slots) - self.shared.open_slots()
        if opening and self.shared.answered_ahead():
            # Before those writers fence the slots' older ones (progress.ProgressReader.read_ahead);
            # not when the clusters did not answer the check just made (the slots fail on it).
            with phase("copy: read progress ahead of the fencing"):
                self.shared.progress.read_ahead(
                    (spans[i].topic, spans[i].partition) for slot in opening for i in slots[slot]
                )

        def copy_group(indexes: list[int]) -> None:
            for index, result in zip(
                indexes, copy_units(self.job, [spans[i] for i in indexes], self.shared), strict=True
            ):
                results[index] = result

        try:
            if len(groups) > 1:
                for future in [self._pool.submit(copy_group, indexes) for indexes in groups]:
                    future.result()
            else:
                for indexes in groups:
                    copy_group(indexes)
        finally:
            # One batched look at the target for every partition's held offset-syncs.
            self.shared.settle_syncs()
        return [result for result in results if result is not None]

    def committed(self) -> dict[tuple[str, int], int]:
        """The last upstream offset this worker's writers committed per partition: where the next
        range of each starts (the writer is the truth for its partitions while it holds the slot)."""
        return self.shared.committed()

    @property
    def fenced_slots(self) -> list[int]:
        """Slots a newer writer took from this worker (it copies nothing more of them)."""
        return self.shared.fenced_slots()

    @property
    def open_slots(self) -> set[int]:
        """Slots the worker writes without opening a producer (see SharedClients.open_slots)."""
        return self.shared.open_slots()

    def close(self) -> None:
        self._pool.shutdown(wait=True)
        self.shared.close()

    def __enter__(self) -> CopyWorker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def copy_slice(job: CopyJob, spans: Iterable[PartitionSpan]) -> list[UnitResult]:
    """One batch worker's share: whole writer slots, copied once, then the clients go."""
    with CopyWorker(job, keep_writers=False) as worker:
        return worker.copy(spans)
