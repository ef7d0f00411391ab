"""Test-side helpers for micro-batch windows: a seeded producer that keeps writing while windows
run, one window run in-process with local workers (as `mirrorflow replicate` runs it), and the
check that a remote topic holds its source's records exactly once, in order."""

from __future__ import annotations

import dataclasses
import random
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from confluent_kafka import Producer

from mirrorflow.clients import FlowClients
from mirrorflow.config import MirrorConfig
from mirrorflow.replicate import run_reading, service
from mirrorflow.replicate.copy import CopyJob
from mirrorflow.replicate.plan import Plan
from mirrorflow.replicate.window.announced import window_copy_job
from mirrorflow.replicate.window.driver import WindowDriver, WindowResult
from mirrorflow.replicate.window.local import LocalTasks
from mirrorflow.replicate.window.settings import WindowSettings, window_settings
from mirrorflow.replicate.window.share import Assignment, task_count
from mirrorflow.replicate.window.task import TaskOutcome, run_task

from .kafkatools import provenance_runs, read_topic


class SteadyProducer(threading.Thread):
    """Writes `rate` records a second round-robin over a topic's partitions (or those of `only`)
    until stopped; keys count up, value sizes come from a seeded RNG. `stop()` flushes and says
    how many it wrote."""

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        partitions: int,
        *,
        rate: float,
        seed: int,
        only: Sequence[int] | None = None,
    ) -> None:
        super().__init__(name=f"steady-producer-{topic}", daemon=True)
        self.topic, self.rate = topic, rate
        self.written = list(only) if only is not None else list(range(partitions))
        self.random = random.Random(seed)
        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
        self.sent = 0
        self.failed: list[object] = []
        self._halt = threading.Event()

    def run(self) -> None:
        started = time.monotonic()
        while not self._halt.is_set():
            due = int((time.monotonic() - started) * self.rate)
            while self.sent < due:
                self.producer.produce(
                    self.topic,
                    key=b"%d" % self.sent,
                    value=self.random.randbytes(self.random.randint(10, 400)),
                    partition=self.written[self.sent % len(self.written)],
                    on_delivery=lambda err, _m: err is not None and self.failed.append(err),
                )
                self.sent += 1
            self.producer.poll(0)
            time.sleep(0.005)

    def stop(self) -> int:
        self._halt.set()
        self.join(10)
        assert self.producer.flush(30) == 0 and not self.failed, self.failed[:3]
        return self.sent


class ThreadTasks:
    """A window's tasks in threads of the test's own process (where LocalTasks spawns processes),
    so that what they log reaches pytest's caplog; `stop()` as LocalTasks.stop."""

    def __init__(self, job: CopyJob, settings: WindowSettings) -> None:
        self.job, self.settings = job, settings
        self._stop = threading.Event()

    def stop(self) -> None:
        self._stop.set()

    def __call__(self, assigned: list[Assignment]) -> list[TaskOutcome]:
        with ThreadPoolExecutor(len(assigned), thread_name_prefix="window-task") as pool:
            return list(pool.map(lambda a: run_task(self.job, self.settings, a, self._stop.is_set), assigned))


class WindowRun(threading.Thread):
    """One window of source->target with local worker processes, as `mirrorflow replicate` runs
    it, in a thread of the test (`handover`: it waits for a next window to take over, as a DAG
    run's window does, for `handover_s` at most, by default its length: a loaded machine may
    need longer to start the next one). `stop()` ends it after the batch in flight, as Ctrl-C
    does. `in_process`: its tasks run in threads of the test's process (ThreadTasks). The lines
    its driver would print are in `lines`."""

    def __init__(
        self,
        config: MirrorConfig,
        run_id: str,
        *,
        length_s: float,
        handover: bool,
        handover_s: float | None = None,
        source: str = "A",
        target: str = "B",
        in_process: bool = False,
    ) -> None:
        super().__init__(name=f"window-{run_id}", daemon=True)
        self.flow = config.flow(source, target)
        self.clients = FlowClients.resolve(self.flow)
        planned = service.plan_run(config, source, target, run_id=run_id)
        plan = Plan.from_json(
            run_reading.read_run_record(self.clients.target_consumer, planned["plan_offset"])[3]
        )
        settings = window_settings(
            self.flow, started_ms=plan.created_ms, length_s=length_s, handover=handover
        )
        if handover_s is not None:
            settings = dataclasses.replace(settings, handover_s=handover_s)
        self.plan, self.plan_offset = plan, planned["plan_offset"]
        self.count = task_count(plan)
        self.job = job = window_copy_job(self.flow, self.clients, plan, settings)
        self.tasks = ThreadTasks(job, settings) if in_process else LocalTasks(job, settings)
        self.lines: list[str] = []
        self.driver = WindowDriver(
            self.flow, self.clients, plan, planned["plan_offset"], settings, log_line=self.lines.append
        )
        self.outcome: WindowResult | None = None

    def run(self) -> None:
        self.outcome = self.driver.run(self.tasks, self.count)

    def stop(self) -> None:
        self.tasks.stop()

    def result(self, timeout_s: float = 120) -> WindowResult:
        self.join(timeout_s)
        assert self.outcome is not None, f"{self.name} did not end within {timeout_s:.0f}s"
        return self.outcome


def assert_copied_exactly(source: str, target: str, topic: str, remote: str, partitions: int) -> int:
    """Every source record of `topic` in `remote`, once each and in order (as read_committed
    readers see them); returns how many."""
    wanted, found = read_topic(source, topic, partitions), read_topic(target, remote, partitions)
    for partition in range(partitions):
        expected = [r.content() for r in wanted[partition]]
        copied = [r.content() for r in found[partition]]
        same = next((i for i, (a, b) in enumerate(zip(copied, expected, strict=False)) if a != b), None)
        assert copied == expected, (
            f"{remote}-{partition}: {len(copied)} records for {len(expected)}, first difference at {same}"
        )
    return sum(len(records) for records in wanted.values())


def wait_for(check, what: str, timeout_s: float = 120, explain=None) -> None:
    """Until `check()` is true, failing with `what` after `timeout_s` (and what `explain()` then
    says, when given)."""
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() >= deadline:
            raise AssertionError(f"{what} within {timeout_s:.0f}s" + (f"\n{explain()}" if explain else ""))
        time.sleep(0.2)


def window_story(
    source: str, target: str, topic: str, remote: str, partitions: int, *windows: WindowRun
) -> str:
    """For a failure message: each partition's records on the source and on the target, and each
    window's state, outcome and the lines its driver printed."""
    wanted, found = read_topic(source, topic, partitions), read_topic(target, remote, partitions)
    told = [
        f"{topic}-{p}: {len(wanted[p])} on the source, {len(found[p])} in {remote}" for p in range(partitions)
    ]
    # Where a partition's copies differ from its source: which source offsets each stretch of the
    # target copies (a duplicate shows as a run going back).
    told += [
        f"{remote}-{p} copies: {provenance_runs(found[p])}"
        for p in range(partitions)
        if len(found[p]) != len(wanted[p])
    ]
    for window in windows:
        outcome = window.outcome
        told.append(
            f"--- {window.name}: {'running' if window.is_alive() else 'ended'}"
            + (f", ok={outcome.ok} error={outcome.error!r} window={outcome.report.window}" if outcome else "")
        )
        told.extend(window.lines[-60:])
    return "\n".join(told)
