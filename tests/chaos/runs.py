"""The copy under a fault schedule: `mirrorflow replicate` runs of one flow, back to back, as the
real command in sessions of their own (the way tests/reliability/test_kill_nine.py runs it), so a
fault takes a run's whole process group, its workers included.

A run that fails is not a failure of the schedule by itself: under faults most runs are meant to
stop, and what matters is that they stop with a reason an operator can act on and leave nothing
wrong behind (the checker decides that). So each run is recorded with how it ended, classified
from its one JSON object (`--output json`) or, where it wrote none, from its output: killed by
the schedule, fenced by another writer, a cluster unreachable, a hanging transaction refused
with Kafka's command for it, and so on. A run that outlives RUN_TIMEOUT_S is killed and counted
as stuck, which is a failure: every wait of the product is bounded.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import threading
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from ..reliability.test_kill_nine import kill_nine

RUN_TIMEOUT_S = 240.0
END_WAIT_S = 60.0  # at the schedule's end, the run in flight gets this long before it is killed
# (pattern in the run's error, reason), first match wins; a run's error names the partitions, so
# one failed partition's reason stands for the run.
REASONS = (
    ("kafka-transactions.sh", "hanging transaction refused"),
    ("fenced", "fenced"),
    ("took its writer slot", "fenced"),
    ("unreachable", "unreachable"),
    # Through the source link's proxy, a source broker that is down accepts and closes each
    # connection, which the product's diagnosis reads as a listener of another protocol.
    ("cannot be reached", "unreachable"),
    ("Traceback", "traceback"),
    ("timed out", "timed out"),
    ("Timed out", "timed out"),
)
EXPECTED = {
    "ok",
    "killed by the schedule",
    "fenced",
    "unreachable",
    "hanging transaction refused",
    "timed out",
}


@dataclass
class Run:
    number: int
    role: str  # "loop", "concurrent", "clean"
    started_s: float  # since the schedule's start
    process: subprocess.Popen
    log: Path
    seconds: float = 0.0
    code: int | None = None
    reason: str = "running"
    detail: str = ""
    killed: bool = False  # by the schedule (or its end)

    def __str__(self) -> str:
        text = (
            f"run {self.number} ({self.role}, at {self.started_s:.1f}s, {self.seconds:.1f}s): {self.reason}"
        )
        return text + (f": {self.detail}" if self.detail and self.reason != "ok" else "")


def classify(code: int, killed: bool, stdout: str, output: str) -> tuple[str, str]:
    """(reason, detail) of a run that ended with `code`."""
    if killed:
        return "killed by the schedule", ""
    if code == 0:
        return "ok", ""
    error = ""
    with contextlib.suppress(ValueError, AttributeError):
        error = json.loads(stdout).get("error") or ""
    text = error or output[-3000:]
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    detail = " | ".join(lines[:3])[:400]
    if "Traceback" in output:
        return "traceback", detail or output[-400:]
    for pattern, reason in REASONS:
        if pattern in text:
            return reason, detail
    return "other", detail


class Copier:
    """Runs `command` back to back until stopped (`start`/`stop`); `concurrent()` starts one more
    beside it, `clean()` runs one alone. The schedule's faults reach the run in flight through
    `current()` and go through `kill()` and `freeze()`, so a run killed on purpose is told from
    one that died."""

    def __init__(self, command: list[str], logs: Path, clock0: float) -> None:
        self.command, self.logs, self.clock0 = command, logs, clock0
        self.runs: list[Run] = []
        self.failure: BaseException | None = None
        self._lock = threading.Lock()
        self._current: Run | None = None
        self._stopping = threading.Event()
        self._threads: list[threading.Thread] = []
        self._env = {**os.environ, "COLUMNS": "200"}

    # -- processes ----------------------------------------------------------------------------

    def _launch(self, role: str) -> Run:
        with self._lock:
            number = len(self.runs) + 1
            log = self.logs / f"run-{number:03d}-{role}.log"
            with log.open("wb") as err, (self.logs / f"run-{number:03d}.json").open("wb") as out:
                process = subprocess.Popen(
                    [*self.command, "--output", "json"],
                    stdout=out,
                    stderr=err,
                    stdin=subprocess.DEVNULL,
                    start_new_session=True,
                    env=self._env,
                )
            run = Run(number, role, time.monotonic() - self.clock0, process, log)
            self.runs.append(run)
            return run

    def _reap(self, run: Run, timeout_s: float = RUN_TIMEOUT_S) -> Run:
        """Wait for the run (polling: a fault may be killing it from another thread), then
        classify how it ended."""
        deadline = time.monotonic() + timeout_s
        while run.process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        stuck = run.process.poll() is None
        if stuck:
            with contextlib.suppress(AssertionError):
                kill_nine(run.process, f"run {run.number}")
        run.seconds = time.monotonic() - self.clock0 - run.started_s
        run.code = run.process.returncode
        stdout = (self.logs / f"run-{run.number:03d}.json").read_text(errors="replace")
        output = run.log.read_text(errors="replace")
        if stuck:
            run.reason, run.detail = "stuck", f"still running after {timeout_s:.0f}s; killed"
        else:
            run.reason, run.detail = classify(run.code or 0, run.killed, stdout, output)
        return run

    # -- what the schedule asks -------------------------------------------------------------

    def current(self) -> Run | None:
        with self._lock:
            return self._current

    def kill(self, run: Run, where: str) -> str:
        """kill -9 of the run's process group; a process of it that survives is a defect."""
        run.killed = run.killed or run.process.poll() is None  # a second kill must not undo the first
        try:
            killed = kill_nine(run.process, where)
        except AssertionError as exc:
            raise SurvivedKill(str(exc)) from exc
        return f"killed run {run.number} ({killed} processes)" if killed else f"run {run.number} had ended"

    def freeze(self, run: Run, hold_s: float) -> str:
        """SIGSTOP of the run's process group for `hold_s`, then SIGCONT (always)."""
        try:
            os.killpg(run.process.pid, signal.SIGSTOP)
        except ProcessLookupError:
            return f"run {run.number} had ended"
        try:
            time.sleep(hold_s)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(run.process.pid, signal.SIGCONT)
        return f"froze run {run.number} for {hold_s:.1f}s"

    def concurrent(self) -> str:
        run = self._launch("concurrent")
        thread = threading.Thread(target=self._reap, args=(run,), name=f"chaos-run-{run.number}", daemon=True)
        thread.start()
        self._threads.append(thread)
        return f"started run {run.number} beside run {getattr(self.current(), 'number', None)}"

    def clean(self) -> Run:
        return self._reap(self._launch("clean"))

    # -- the loop -----------------------------------------------------------------------------

    def start(self) -> Copier:
        thread = threading.Thread(target=self._loop, name="chaos-copier", daemon=True)
        thread.start()
        self._threads.insert(0, thread)
        return self

    def _loop(self) -> None:
        try:
            while not self._stopping.is_set():
                run = self._launch("loop")
                with self._lock:
                    self._current = run
                self._reap(run)
                with self._lock:
                    self._current = None
                if run.seconds < 1.0:
                    self._stopping.wait(1.0)  # a run that fails at once must not spin
        except BaseException as exc:  # noqa: BLE001 - reported by the schedule, never lost
            self.failure = exc

    def stop(self) -> None:
        """No new run; the runs in flight get END_WAIT_S to end, then are killed."""
        self._stopping.set()
        deadline = time.monotonic() + END_WAIT_S
        for run in list(self.runs):
            while run.process.poll() is None and time.monotonic() < deadline:
                time.sleep(0.1)
            if run.process.poll() is None:
                run.killed = True
                with contextlib.suppress(AssertionError):
                    kill_nine(run.process, f"run {run.number} at the schedule's end")
        for thread in self._threads:
            thread.join(RUN_TIMEOUT_S)

    def kill_all(self) -> None:
        """Whatever still runs (a test that failed half-way): killed, so nothing outlives it."""
        self._stopping.set()
        for run in list(self.runs):
            if run.process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(run.process.pid, signal.SIGCONT)
                with contextlib.suppress(AssertionError):
                    kill_nine(run.process, f"run {run.number}")

    def outcomes(self) -> Counter:
        return Counter(run.reason for run in self.runs)


class SurvivedKill(AssertionError):
    """A process of a killed run outlived kill -9 of its group."""
