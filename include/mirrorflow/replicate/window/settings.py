"""How long a window copies, how often, and how it ends.

A window ends at `ends_ms` (its start plus mirrorflow.microbatch.window.seconds). Under Airflow the
next window's DAG run starts about then, so a window does not stop at its end: it goes on copying
until the next one has taken each of its slots (task.py), for at most `handover_s` more, so that
Airflow's scheduling and Spark's start-up (tens of seconds) never leave the flow uncopied. A
window run by hand (`mirrorflow replicate`) has no successor and ends at its end. A window that
has seen its successor's plan (the next DAG run planned, its Spark application starting) waits
for its takeover up to HANDOVER_MAX_S past its end, even when its own wait is shorter: a short
window's wait must not run out while the next window's Spark application is still starting.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from datetime import UTC, datetime

from mirrorflow.config import FlowConfig

HANDOVER_MAX_S = 300.0
"""The longest a window waits past its end for the next one: Airflow's scheduling delay plus the
next Spark application's start-up, with room to spare. A window shorter than this waits its own
length at most."""
STATUS_S = 5.0
"""How often each task stores its figures (records, lag) for the log, the status page and metrics."""
QUIET_AFTER_S = 10.0
"""A partition whose end has not moved for this long is quiet: its end offset is asked for in
turns (see quiet_turns), not every batch."""
QUIET_ASKED_S = 1.0
"""How often a quiet partition's end offset is asked for while batches keep to the interval (once
in quiet_turns batches: longer when batches take longer)."""


@dataclass(frozen=True, slots=True)
class WindowSettings:
    ends_ms: int
    interval_s: float
    handover_s: float
    refresh_s: float | None
    """How often the window plans again to pick up new topics and partitions (None: never)."""
    max_records: int
    """Most offsets of one partition in one batch: a batch stays short even when it catches up."""

    @property
    def status_every(self) -> int:
        """Batches between two status records of a task (one every STATUS_S or so)."""
        return max(1, math.ceil(STATUS_S / self.interval_s))

    @property
    def quiet_turns(self) -> int:
        """Batches over which a task asks the end offsets of its quiet partitions, a share each
        batch: as many as fit in QUIET_ASKED_S at the interval (a flow mirroring a cluster has
        thousands of partitions, most of them quiet: asking all of them every batch cost a second
        a batch at 10,000 partitions, and asking each once a second whatever a batch takes asked
        all of them again when batches took 6 s)."""
        return max(1, math.floor(QUIET_ASKED_S / self.interval_s))

    def wait_s(self, *, successor: bool = False) -> float:
        """How long past its end the window waits for the next one: HANDOVER_MAX_S at least once
        the next one has planned (`successor`), as long as the window hands over at all."""
        return max(self.handover_s, HANDOVER_MAX_S) if successor and self.handover_s else self.handover_s

    def over(self, now_ms: int | None = None, *, successor: bool = False) -> bool:
        """Whether the window's time, its wait for the next window included, has run out."""
        now = int(time.time() * 1000) if now_ms is None else now_ms
        return now >= self.ends_ms + self.wait_s(successor=successor) * 1000

    def ended(self, now_ms: int | None = None) -> bool:
        now = int(time.time() * 1000) if now_ms is None else now_ms
        return now >= self.ends_ms

    def window_over(self, *, first: bool, successor: bool) -> bool:
        """Whether a task that still holds slots stops copying: the window's time, its wait for
        the next window included, has run out. A window nothing takes over from (run by hand)
        whose task began after its end still copies once what was waiting when it began."""
        if self.over(successor=successor) or (self.handover_s == 0 and self.ended()):
            return not (first and self.handover_s == 0)
        return False

    def started_late(self, *, successor: bool) -> bool:
        """Whether a task (or Spark's new attempt of it, after its executor was lost) that starts
        holding slots now starts after the window and its wait for the next window are over:
        nobody copies those slots any more, and the window must say so rather than end as if it
        had copied them. Started earlier, it copies until the next window takes its slots, as the
        window's first attempt would."""
        return self.handover_s != 0 and self.over(successor=successor)


def window_settings(
    flow: FlowConfig, *, started_ms: int, length_s: float | None = None, handover: bool = True
) -> WindowSettings:
    """The settings of a window of `flow` that started at `started_ms` (its plan's time);
    `length_s` overrides mirrorflow.microbatch.window.seconds, `handover` False ends it at its
    end (nothing takes over)."""
    length = float(flow.microbatch_window_seconds if length_s is None else length_s)
    refresh = flow.refresh_topics_interval
    return WindowSettings(
        ends_ms=started_ms + int(length * 1000),
        interval_s=flow.microbatch_interval_ms / 1000,
        handover_s=min(HANDOVER_MAX_S, length) if handover else 0.0,
        refresh_s=None
        if refresh is None
        else max(refresh.total_seconds(), flow.microbatch_interval_ms / 1000),
        max_records=flow.range_max_records,
    )


def clock(ms: int) -> str:
    """A window's moment (epoch ms) as a log line says it."""
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%H:%M:%S UTC")
