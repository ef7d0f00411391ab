"""A window's tasks in local worker processes, for `mirrorflow replicate` on a micro-batch flow.

Workers are spawned (not forked, see runner.run_locally) and ignore Ctrl-C: the terminal sends it
to the whole process group, and a worker killed between a produce and its commit would leave the
transaction for the next writer to abort. Ctrl-C in the command sets a flag instead; every task
ends after the batch it is copying (each batch commits whole), and the window reports as usual.
A second Ctrl-C stops the workers at once, and so does the command's death (kill -9): nobody would
read what a worker copies after that, and whatever it had open is aborted when the next window
fences its slots.
"""

from __future__ import annotations

import contextlib
import ctypes
import queue
import signal
from multiprocessing import get_context
from multiprocessing.synchronize import Event

from mirrorflow import logs
from mirrorflow.replicate.copy import CopyJob
from mirrorflow.replicate.window.settings import WindowSettings
from mirrorflow.replicate.window.share import Assignment
from mirrorflow.replicate.window.task import TaskOutcome, run_task

POLL_S = 0.5


PR_SET_PDEATHSIG = 1


def _task_process(
    job: CopyJob,
    settings: WindowSettings,
    assignment: Assignment,
    stop: Event,
    results: queue.Queue,
    log_level: str | None,
) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    logs.spawned(log_level)
    with contextlib.suppress(OSError):  # Linux: killed with the command that started it
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    results.put(run_task(job, settings, assignment, stop.is_set))


class LocalTasks:
    """Runs a window's tasks in local processes; `interrupted` tells whether Ctrl-C stopped them."""

    def __init__(self, job: CopyJob, settings: WindowSettings) -> None:
        self.job, self.settings = job, settings
        self.interrupted = False
        self._context = get_context("spawn")
        self._stop = self._context.Event()

    def stop(self) -> None:
        """End every task after the batch it is copying."""
        self._stop.set()

    def __call__(self, assigned: list[Assignment]) -> list[TaskOutcome]:
        context, stop = self._context, self._stop
        results = context.Queue()
        processes = {
            a.index: context.Process(
                target=_task_process,
                args=(self.job, self.settings, a, stop, results, logs.level()),
                name=f"mirrorflow-window-task-{a.index}",
            )
            for a in assigned
        }
        for process in processes.values():
            process.start()
        outcomes: dict[int, TaskOutcome] = {}
        try:
            while len(outcomes) < len(processes):
                try:
                    self._collect(results, outcomes, timeout=POLL_S)
                except KeyboardInterrupt:
                    if self.interrupted:
                        raise
                    self.interrupted = True
                    self.stop()
                    continue
                if all(not p.is_alive() for p in processes.values()):
                    self._collect(results, outcomes, timeout=POLL_S)
                    break
        except KeyboardInterrupt:
            for process in processes.values():
                process.terminate()
            raise
        finally:
            for process in processes.values():
                process.join(10)
        for index, process in processes.items():
            if index not in outcomes:
                outcomes[index] = TaskOutcome(
                    index,
                    "",
                    stopped="failed",
                    error=f"the worker process of task {index} died (exit code {process.exitcode})",
                )
        return [outcomes[index] for index in sorted(outcomes)]

    @staticmethod
    def _collect(results: queue.Queue, outcomes: dict[int, TaskOutcome], *, timeout: float) -> None:
        try:
            outcome = results.get(timeout=timeout)
        except queue.Empty:
            return
        outcomes[outcome.index] = outcome
