"""Stopping a local Airflow: a scheduler waiting without a limit on LocalExecutor workers that run
nothing is not left to the grace period and SIGKILL; a worker running a task is never ended.

The processes are real: a "scheduler" that waits for its child, and a child titled as Airflow
titles its LocalExecutor workers, ignoring SIGTERM as a forked worker does (the scheduler's
handler, inherited, returns at once outside the scheduler's own process)."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time

import psutil
import pytest

from mirrorflow.airflow import process_stop

WORKER = (
    "import signal, time, setproctitle; signal.signal(signal.SIGTERM, lambda *_: None); "
    "setproctitle.setproctitle({title!r}); time.sleep(600)"
)
SCHEDULER = "import subprocess, sys; subprocess.Popen([sys.executable, '-c', sys.argv[1]]).wait()"


def _scheduler_and_worker(title: str) -> tuple[subprocess.Popen, psutil.Process]:
    scheduler = subprocess.Popen([sys.executable, "-c", SCHEDULER, WORKER.format(title=title)])
    deadline = time.monotonic() + 30
    while True:
        children = psutil.Process(scheduler.pid).children()
        if children and " ".join(children[0].cmdline()).strip() == title:
            return scheduler, children[0]
        assert time.monotonic() < deadline, "the worker did not start"
        time.sleep(0.05)


@pytest.fixture(autouse=True)
def _short_idle(monkeypatch) -> None:
    monkeypatch.setattr(process_stop, "IDLE_WORKER_S", 0.5)


def test_idle_workers_a_scheduler_waits_on_are_ended_and_the_scheduler_exits() -> None:
    title = "airflow worker -- LocalExecutor: <idle>"
    scheduler, worker = _scheduler_and_worker(title)
    try:
        started = time.monotonic()
        alive, ended = process_stop.wait_gone_ending_idle_workers(
            [psutil.Process(scheduler.pid), worker], scheduler.pid, 30
        )
        assert (alive, ended) == ([], [title])
        assert time.monotonic() - started < 10
        assert scheduler.wait(5) == 0
    finally:
        scheduler.kill()
        with contextlib.suppress(psutil.Error):
            worker.kill()


def test_a_worker_running_a_task_is_waited_for_not_ended() -> None:
    title = "airflow worker -- LocalExecutor: dag_id=d task_id=t run_id=r"
    scheduler, worker = _scheduler_and_worker(title)
    try:
        alive, ended = process_stop.wait_gone_ending_idle_workers(
            [psutil.Process(scheduler.pid), worker], scheduler.pid, 2
        )
        assert ended == [] and {p.pid for p in alive} == {scheduler.pid, worker.pid}
    finally:
        worker.kill()
        scheduler.wait(10)
