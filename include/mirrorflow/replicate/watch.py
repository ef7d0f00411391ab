"""A copy's progress while it runs, for the CLI's progress bar and the Spark driver's log lines.

Neither the CLI (local worker processes) nor the Spark driver (executors) hears from a worker
before its whole share of partitions is done. Both follow the flow's progress topic instead:
it moves with every committed chunk, the copy writes it anyway, and one ProgressReader reads
only what was added since its last look, so a look costs one watermark request per
offsets-topic partition and the new records, not a request per copied partition.

RunProgress turns what was read into per-topic and total figures; progress_lines writes them
as a bounded number of log lines (at most LOG_TOPICS topics, the most behind first, and a
total), whatever the run's size.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaException

from mirrorflow.replicate.copy import UnitResult
from mirrorflow.replicate.plan import PartitionSpan, Plan
from mirrorflow.replicate.progress import ProgressReader, ProgressReadError

UnitKey = tuple[str, int]
READ_TIMEOUT_S = 10.0
BAR_INTERVAL_S = 0.5  # the CLI's progress bar
LOG_TOPICS = 20  # topics with a progress line of their own; the total line counts them all
INTERVAL_ENV = "MIRRORFLOW_COPY_PROGRESS_INTERVAL_S"
DEFAULT_INTERVAL_S = 5.0


def log_interval_s(environ: Mapping[str, str] | None = None) -> float:
    """Seconds between the copy job's progress lines: MIRRORFLOW_COPY_PROGRESS_INTERVAL_S
    (default 5; 0 turns them off). A value that is not a number is refused at once, naming it."""
    raw = (os.environ if environ is None else environ).get(INTERVAL_ENV, "").strip()
    if not raw:
        return DEFAULT_INTERVAL_S
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(
            f"{INTERVAL_ENV}={raw!r} is not a number of seconds (0 turns progress lines off)"
        ) from None
    if value < 0:
        raise ValueError(
            f"{INTERVAL_ENV}={raw!r} is negative; write seconds, or 0 to turn progress lines off"
        )
    return value


@dataclass(frozen=True, slots=True)
class Figures:
    """Offsets copied of those planned, and partitions complete (and failed) of those planned."""

    done: int
    planned: int
    partitions_done: int
    partitions: int
    failed: int = 0

    @property
    def left(self) -> int:
        return self.planned - self.done

    @property
    def complete(self) -> bool:
        return self.partitions_done == self.partitions

    def text(self) -> str:
        share = 100.0 if not self.planned else 100.0 * self.done / self.planned
        failed = f", {self.failed} failed" if self.failed else ""
        return (
            f"{self.done:,}/{self.planned:,} offsets ({share:.1f}%), "
            f"{self.partitions_done}/{self.partitions} partitions done{failed}"
        )


class RunProgress:
    """Offsets done per partition of a plan, from the progress read on the target (`observed`)
    and from finished partitions' results (`finished`). Thread-safe: a watcher thread and the
    thread collecting results both feed it."""

    def __init__(self, plan: Plan) -> None:
        self._lock = threading.Lock()
        self.units: dict[UnitKey, PartitionSpan] = {(s.topic, s.partition): s for s in plan.units()}
        self._done = dict.fromkeys(self.units, 0)
        self._complete: set[UnitKey] = set()
        self._failed: set[UnitKey] = set()
        self.by_topic: dict[str, list[UnitKey]] = {}
        for key in self.units:
            self.by_topic.setdefault(key[0], []).append(key)

    @property
    def keys(self) -> list[UnitKey]:
        return list(self.units)

    def observed(self, stored: Mapping[UnitKey, int]) -> None:
        """Progress read from the target: the last upstream offset committed per partition."""
        with self._lock:
            for key, offset in stored.items():
                span = self.units.get(key)
                if span is not None:
                    self._advance(key, span, offset)

    def finished(self, result: UnitResult) -> None:
        key = (result.topic, result.partition)
        with self._lock:
            self._advance(key, self.units[key], result.progress)
            if result.ok:
                self._failed.discard(key)
            else:
                self._failed.add(key)

    def _advance(self, key: UnitKey, span: PartitionSpan, progress: int) -> None:
        done = min(span.pending, max(0, progress - span.start + 1))
        self._done[key] = max(self._done[key], done)
        if progress >= span.end - 1:
            self._complete.add(key)

    def figures(self, keys: Iterable[UnitKey]) -> Figures:
        keys = list(keys)
        with self._lock:
            return Figures(
                done=sum(self._done[k] for k in keys),
                planned=sum(self.units[k].pending for k in keys),
                partitions_done=sum(k in self._complete for k in keys),
                partitions=len(keys),
                failed=sum(k in self._failed for k in keys),
            )

    def total(self) -> Figures:
        return self.figures(self.units)

    def per_topic(self) -> dict[str, Figures]:
        return {topic: self.figures(keys) for topic, keys in self.by_topic.items()}


def progress_lines(flow: str, progress: RunProgress, limit: int = LOG_TOPICS) -> list[str]:
    """One line per unfinished topic, the most offsets left first (ties by name), at most
    `limit` of them, then the total line, which says how many topics are done and how many
    unfinished ones have no line of their own."""
    topics = progress.per_topic()
    unfinished = sorted(
        ((name, f) for name, f in topics.items() if not f.complete), key=lambda item: (-item[1].left, item[0])
    )
    lines = [f"progress {flow}: {name} {figures.text()}" for name, figures in unfinished[:limit]]
    unlisted = len(unfinished) - min(len(unfinished), limit)
    complete = len(topics) - len(unfinished)
    total = f"progress {flow}: total {progress.total().text()}, {complete}/{len(topics)} topics done" + (
        f", {unlisted:,} more unfinished topics not listed" if unlisted else ""
    )
    return [*lines, total]


class ProgressLog:
    """progress_lines for a log, only when the run has moved since the lines before: a copy
    that waits (a Spark job starting, a slow target) would otherwise repeat the same block at
    every interval, burying the lines that say something."""

    def __init__(self, flow: str, progress: RunProgress) -> None:
        self.flow = flow
        self.progress = progress
        self._last: Figures | None = None

    def lines(self) -> list[str]:
        total = self.progress.total()
        if total == self._last:
            return []
        self._last = total
        return progress_lines(self.flow, self.progress)


class ProgressWatcher(threading.Thread):
    """Reads the run's partitions' progress from the target every `interval_s` while the copy
    runs, and hands it to `on_progress`."""

    def __init__(
        self,
        consumer_config: Mapping[str, Any],
        progress_topic: str,
        source_alias: str,
        keys: list[UnitKey],
        on_progress: Callable[[dict[UnitKey, int]], None],
        *,
        interval_s: float = BAR_INTERVAL_S,
    ) -> None:
        super().__init__(name="mirrorflow-progress-watcher", daemon=True)
        self._reader = lambda: ProgressReader(
            consumer_config, progress_topic, source_alias, timeout_s=READ_TIMEOUT_S
        )
        self._keys = keys
        self._on_progress = on_progress
        self._interval_s = interval_s
        self._stopped = threading.Event()

    def run(self) -> None:
        # One reader for the whole run: each look reads only the progress written since the last.
        reader = self._reader()
        try:
            while not self._stopped.wait(self._interval_s):
                try:
                    reader.settle(self._keys)
                except (ProgressReadError, KafkaException):
                    continue  # only the progress shown waits; the workers' results are what count
                self._on_progress({key: stored.offset for key, stored in reader.entries(self._keys).items()})
        finally:
            reader.close()

    def stop(self) -> None:
        """Stop without waiting out a read in flight (a daemon: it only feeds what is shown),
        so a run whose target went away is not held up by it."""
        self._stopped.set()
        self.join(1.0)
