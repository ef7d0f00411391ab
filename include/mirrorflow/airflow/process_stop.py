"""Waiting for the processes of a local Airflow to end after they were asked to stop, and ending
the LocalExecutor workers a scheduler would otherwise wait on for good (see AirflowServer.stop)."""

from __future__ import annotations

import contextlib
import re
import time

import psutil


def running(proc: psutil.Process) -> bool:
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def wait_gone(procs: list[psutil.Process], timeout: float) -> list[psutil.Process]:
    """Wait up to `timeout` for `procs` to end; the ones still running. Polled: psutil's
    wait_procs raises when a process ends (and is reaped by its parent) while it waits on it."""
    deadline = time.monotonic() + timeout
    alive = [p for p in procs if running(p)]
    while alive and time.monotonic() < deadline:
        time.sleep(0.1)
        alive = [p for p in alive if running(p)]
    return alive


IDLE_WORKER = re.compile(r"^airflow worker -- LocalExecutor[^:]*: <idle>$")
IDLE_WORKER_S = 5.0
"""How long the scheduler may wait on LocalExecutor workers that run nothing before they are ended."""


def idle_worker(proc: psutil.Process) -> bool:
    try:
        return bool(IDLE_WORKER.match(" ".join(proc.cmdline()).strip()))
    except psutil.Error:
        return False


def wait_gone_ending_idle_workers(
    procs: list[psutil.Process], scheduler: int | None, timeout: float
) -> tuple[list[psutil.Process], list[str]]:
    """wait_gone for the scheduler's side, and its LocalExecutor workers. The scheduler ends its
    workers with one message each and waits for them without a limit; under load a worker was
    left waiting for its message with every task ended, and the scheduler with it (both killed
    after the grace). Once only the scheduler and idle workers (titled `<idle>`: running no task)
    are left for IDLE_WORKER_S, the workers are ended with SIGKILL (they ignore SIGTERM, which the
    scheduler's inherited handler drops in them), and the scheduler then exits by itself.
    Returns the processes still running, and the command lines of the idle workers ended."""
    deadline = time.monotonic() + timeout
    ended: list[str] = []
    only_idle_since: float | None = None
    alive = [p for p in procs if running(p)]
    while alive and time.monotonic() < deadline:
        idle = [p for p in alive if p.pid != scheduler and idle_worker(p)]
        if idle and all(p.pid == scheduler or p in idle for p in alive):
            only_idle_since = only_idle_since or time.monotonic()
            if time.monotonic() - only_idle_since >= IDLE_WORKER_S:
                for worker in idle:
                    with contextlib.suppress(psutil.Error):
                        ended.append(" ".join(worker.cmdline()).strip())
                        worker.kill()
                only_idle_since = None
        else:
            only_idle_since = None
        time.sleep(0.1)
        alive = [p for p in alive if running(p)]
    return alive, ended
