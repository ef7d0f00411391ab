"""A window from its driver's side: deal the plan to tasks, plan again while they copy, follow
their figures, and store the window's report like a batch run's.

The same driver runs under Spark (spark/window_job.py: the tasks are long-running Spark tasks)
and in `mirrorflow replicate` (commands/window.py: local worker processes); `launch` is what
differs. While the tasks copy, the driver:

- plans the flow again every refresh.topics.interval.seconds (make_plan: remote topics created
  and grown, recreated topics noticed) and stores the plan as a `refresh` record for the tasks;
- reads the tasks' `window` records and hands a line (records, lag) to `log_line`: one per task
  round of status (every few seconds, whatever the interval) while something moves, and one a
  minute while nothing does (figures.StatusLines).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from mirrorflow.clients import FlowClients
from mirrorflow.config import FlowConfig
from mirrorflow.replicate import runs
from mirrorflow.replicate.plan import Plan
from mirrorflow.replicate.planner import make_plan
from mirrorflow.replicate.report import TOPIC_ROWS, RunReport, worst_rows
from mirrorflow.replicate.runner import store_report
from mirrorflow.replicate.window.channel import REFRESH, STATUS, RunsTail
from mirrorflow.replicate.window.figures import StatusLines, attempt_key, merge_status
from mirrorflow.replicate.window.settings import STATUS_S, WindowSettings
from mirrorflow.replicate.window.share import Assignment, assignments
from mirrorflow.replicate.window.task import TaskOutcome

NAMES_LIMIT = 100  # created, grown and restarted names a report keeps; with their counts

log = logging.getLogger("mirrorflow.window")

Launch = Callable[[list[Assignment]], list[TaskOutcome]]


@dataclass
class WindowResult:
    report: RunReport
    error: str | None = None
    """The window's one error (a task's, or the report's when it could not be stored)."""
    stored: bool = True
    """Whether the report reached the target (a window that lost its target may not store it)."""

    @property
    def ok(self) -> bool:
        return self.error is None and self.report.ok


@dataclass
class _Refreshes:
    count: int = 0
    created: list[str] = field(default_factory=list)
    grown: dict[str, list[int]] = field(default_factory=dict)
    restarted: dict[str, str] = field(default_factory=dict)
    topic_errors: dict[str, str] = field(default_factory=dict)

    def add(self, created: list[str], grown: dict[str, tuple[int, int]], restarted: dict[str, str]) -> None:
        self.count += 1
        self.created += [t for t in created if t not in self.created]
        self.grown |= {t: list(v) for t, v in grown.items()}
        self.restarted |= restarted


class WindowDriver:
    def __init__(
        self,
        flow: FlowConfig,
        clients: FlowClients,
        plan: Plan,
        plan_offset: int,
        settings: WindowSettings,
        *,
        log_line: Callable[[str], None],
    ) -> None:
        self.flow, self.clients, self.plan, self.plan_offset = flow, clients, plan, plan_offset
        self.settings = settings
        self.log_line = log_line
        self.refreshes = _Refreshes()
        self._done = threading.Event()
        self._attempts: dict[tuple[int, str], dict[str, Any]] = {}
        """The newest status of every task attempt seen (attempt_key): the log line's figures, and
        an attempt Spark lost with its executor returns no outcome, so its figures are known only
        from here."""

    def run(self, launch: Launch, tasks: int) -> WindowResult:
        started_ms = int(time.time() * 1000)
        threads = [threading.Thread(target=self._follow, name="mirrorflow-window-status", daemon=True)]
        if self.settings.refresh_s is not None:
            threads.append(
                threading.Thread(target=self._refresh, name="mirrorflow-window-refresh", daemon=True)
            )
        for thread in threads:
            thread.start()
        try:
            outcomes = launch(assignments(self.plan, self.plan_offset, tasks))
            failure = None
        except Exception as exc:  # noqa: BLE001 - a task that could not run fails the window, with its cause
            log.exception("the window's tasks failed")
            outcomes, failure = [], f"the window's tasks failed: {exc}"
        finally:
            self._done.set()
            for thread in threads:
                thread.join(5.0)
        errors = [o.error for o in outcomes if o.error]
        window = self._window_figures(outcomes, tasks)
        results = [r for o in outcomes for r in o.results]
        error = failure or (errors[0] if errors else None)
        try:
            report = store_report(self.clients, self.plan, results, started_ms, window=window)
        except runs.RunRecordNotStored as exc:
            report = exc.report  # type: ignore[attr-defined]
            error = f"{error}; the window's report could not be stored: {exc}" if error else str(exc)
            return WindowResult(report, error, stored=False)
        return WindowResult(report, error)

    # -- while the tasks copy --------------------------------------------------------------------
    def _refresh(self) -> None:
        assert self.settings.refresh_s is not None
        # Each refresh reads progress on from the last plan's read, not from the topic's start.
        progress_read = self.plan.progress_read
        while not self._done.wait(self.settings.refresh_s):
            try:
                outcome = make_plan(
                    self.flow, self.clients, run_id=self.plan.run_id, progress_from=progress_read
                )
                progress_read = outcome.plan.progress_read or progress_read
                # The tasks take new partitions from it; they keep the window plan's read of progress.
                runs.write_run_record(
                    self.clients.target_producer,
                    self.flow.name,
                    self.plan.run_id,
                    REFRESH,
                    dataclasses.replace(outcome.plan, progress_read=None).json_pieces(),
                )
            except Exception as exc:  # noqa: BLE001 - the next refresh tries again; the copy goes on
                log.warning(
                    "planning %s again failed: %s; the window goes on with what it has", self.flow.name, exc
                )
                continue
            topics, restarted = outcome.topics, outcome.plan.restarted()
            self.refreshes.add(list(topics.created), dict(topics.grown), restarted)
            self.refreshes.topic_errors = dict(list(topics.errors.items())[:NAMES_LIMIT])
            for remote in topics.created:
                self.log_line(
                    f"window {self.flow.name}: created {remote} on {self.flow.target} (a new source topic)"
                )
            for remote, (before, after) in topics.grown.items():
                self.log_line(f"window {self.flow.name}: grew {remote} from {before} to {after} partitions")
            for where, why in restarted.items():
                self.log_line(f"window {self.flow.name}: {where}: {why}")
            for topic, why in topics.errors.items():
                log.warning("%s: %s is not copied: %s", self.flow.name, topic, why)

    def _follow(self) -> None:
        tail = RunsTail(self.clients.target_consumer, self.flow.name, (STATUS,), start=self.plan_offset)
        lines = StatusLines(self.flow.name, now=time.monotonic(), every_s=STATUS_S * 0.8)
        try:
            while not self._done.wait(1.0):
                fresh = [r for r in tail.poll() if r.run_id == self.plan.run_id]
                for record in fresh:
                    body = json.loads(record.body)
                    self._attempts[attempt_key(body)] = body
                line = lines.line(merge_status(self._attempts.values()), time.monotonic()) if fresh else None
                if line is not None:
                    self.log_line(line)
        finally:
            tail.close()

    # -- the end -------------------------------------------------------------------------------------
    def _window_figures(self, outcomes: list[TaskOutcome], tasks: int) -> dict[str, Any]:
        settings, refreshes = self.settings, self.refreshes
        merged = merge_status([o.figures for o in outcomes if o.figures])
        stopped: dict[str, int] = {}
        for outcome in outcomes:
            stopped[outcome.stopped] = stopped.get(outcome.stopped, 0) + 1
        topics_lag = {name: row["window"] for name, row in merged["topics"].items()}
        returned = {o.attempt for o in outcomes}
        lost = [body for (_, attempt), body in self._attempts.items() if attempt not in returned]
        return {
            "ends_ms": settings.ends_ms,
            "interval_ms": round(settings.interval_s * 1000),
            "tasks": tasks,
            "batches": merged["batches"],
            "stopped": stopped,
            "errors": [o.error for o in outcomes if o.error][:NAMES_LIMIT],
            "handed_over_slots": sum(len(o.handed_over) for o in outcomes),
            "retakes": sum(o.retakes for o in outcomes),
            "lost_attempts": {
                "count": len(lost),
                "records": sum(int(b.get("records", 0)) for b in lost),
                "bytes": sum(int(b.get("bytes", 0)) for b in lost),
            },
            "joined_partitions": sum(o.joined for o in outcomes),
            "lag_s": merged["lag_window_s"],
            "topics_lag_s": worst_rows(topics_lag, ("p99", "max"), TOPIC_ROWS),
            "refreshes": refreshes.count,
            "created_topics": refreshes.created[:NAMES_LIMIT],
            "created_topics_count": len(refreshes.created),
            "grown_topics": dict(list(refreshes.grown.items())[:NAMES_LIMIT]),
            "restarted": dict(list(refreshes.restarted.items())[:NAMES_LIMIT]),
            "restarted_count": len(refreshes.restarted),
            "topic_errors": refreshes.topic_errors,
        }
