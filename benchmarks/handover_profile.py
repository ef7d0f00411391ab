"""Where a micro-batch handover's time goes: the next window's task taking over a busy flow.

Two single-node Apache Kafka clusters (localkafka, the version pinned in kafka/pom.xml). For each
of --repeat handovers, a flow of its own (--partitions partitions, --per-topic to a topic) takes
--rate records a second of --size bytes spread over all its partitions. A first window (one task,
tasks.max 1, exactly-once, handover on) copies it for --warmup seconds; then the next window is
planned and its task started in this process, as the next window's Spark task starts (without
Spark's own start-up, which `lag.py --only handovers` includes). The script wraps the window
task's batch and the writer's opening to time them (the product's code is not changed) and
prints, from the moment the next task starts:

- its timeline: the takeover stored, the writer opened (which fences the first window's), the
  first batch committed; and the first window's last batches and its letting go of the slot;
- the gap: from the first window's last committed batch to the next window's first, the time the
  records of those seconds wait longer than a batch;
- the lag a read_committed consumer of the target sees (arrival - the record's timestamp): p50
  and p99 over the 12 s before the handover, the largest in the --after seconds after it.

Every handover's flow writes its progress to the same progress topic, so each one's next window
meets the history of the ones before (--without-plan-read: its task reads that history itself,
as before a plan handed the tasks its read of progress).

Run: `.venv/bin/python benchmarks/handover_profile.py` (--partitions 1000 --repeat 3; --help).
Figures go to docs/development/window-profile.md with the command.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

from _clusters import create_topics, two_clusters
from confluent_kafka import Consumer, TopicPartition
from vs_mm2 import machine, properties
from window_profile import Load

from mirrorflow.clients import FlowClients
from mirrorflow.config import load_config
from mirrorflow.replicate import phases, service
from mirrorflow.replicate.copy import writer
from mirrorflow.replicate.plan import Plan
from mirrorflow.replicate.run_reading import read_run_record
from mirrorflow.replicate.window import task
from mirrorflow.replicate.window.announced import window_copy_job
from mirrorflow.replicate.window.settings import window_settings
from mirrorflow.replicate.window.share import assignments

STEADY_S = 12.0


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--per-topic", type=int, default=10)
    parser.add_argument("--rate", type=int, default=2000, help="records per second, in all")
    parser.add_argument("--size", type=int, default=200, help="bytes per record")
    parser.add_argument(
        "--warmup", type=float, default=40.0, help="seconds of the first window before the next"
    )
    parser.add_argument("--after", type=float, default=12.0, help="seconds measured after the handover")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--without-plan-read",
        action="store_true",
        help="the tasks read progress from the topic's start, not on from the plan's read (as before it was handed to them)",
    )
    return parser.parse_args()


class Timeline:
    """(monotonic time, window, event), from wrappers around the task's batch and the writer's open."""

    def __init__(self) -> None:
        self.events: list[tuple[float, str, str]] = []
        self.lock = threading.Lock()
        self.first_batch: dict[str, phases.PhaseTotals] = {}
        """The phases of the next window's first batch (the first window's last ones overlap it)."""

    def add(self, what: str) -> None:
        with self.lock:
            self.events.append((time.monotonic(), threading.current_thread().name, what))

    def install(self) -> None:
        batch, release, opening = task.WindowTask._batch, task.WindowTask._release, writer.SlotWriter.open
        initiate = writer.init_transactions

        def timed_batch(this, *args, **kwargs):
            first = kwargs.get("first") and threading.current_thread().name == "next"
            before = phases.snapshot() if first else None
            result = batch(this, *args, **kwargs)
            self.add("batch committed" if this.held else "batch ended, slot gone")
            if before is not None:
                self.first_batch = phases.since(before)
            return result

        def timed_init(*args, **kwargs):
            result = initiate(*args, **kwargs)
            self.add("writer: init_transactions done (older writer's transaction aborted)")
            return result

        def timed_release(this, slot, *, fenced=False):
            self.add(f"let slot {slot} go ({'fenced' if fenced else 'idle'})")
            return release(this, slot, fenced=fenced)

        def timed_open(this, *args, **kwargs):
            fresh = this.producer is None
            if fresh:
                self.add("writer: opening")
            result = opening(this, *args, **kwargs)
            if fresh:
                self.add("writer: opened (older writer fenced)")
            return result

        task.WindowTask._batch = timed_batch
        writer.init_transactions = timed_init
        task.WindowTask._release = timed_release
        writer.SlotWriter.open = timed_open


class Arrivals(threading.Thread):
    """A read_committed consumer of every remote partition: (arrival, lag seconds) per record."""

    def __init__(self, bootstrap: str, partitions: list[tuple[str, int]]) -> None:
        super().__init__(daemon=True)
        self.stopped = threading.Event()
        self.samples: list[tuple[float, float]] = []
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": "handover-profile",
                "isolation.level": "read_committed",
            }
        )
        self.consumer.assign([TopicPartition(t, p, 0) for t, p in partitions])

    def run(self) -> None:
        try:
            while not self.stopped.is_set():
                for message in self.consumer.consume(10_000, 0.2):
                    if message.error() is None:
                        now = time.monotonic()
                        self.samples.append((now, time.time() - message.timestamp()[1] / 1000))
        finally:
            self.consumer.close()


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def handover(args: argparse.Namespace, tmp: Path, source, target, timeline: Timeline) -> dict[str, float]:
    prefix = f"h{uuid.uuid4().hex[:5]}"
    topics = [f"{prefix}-{i:05d}" for i in range(max(1, args.partitions // args.per_topic))]
    create_topics(source.bootstrap, topics, args.per_topic)
    create_topics(target.bootstrap, [f"A.{t}" for t in topics], args.per_topic)
    extra = (
        f"A->B.topics = {prefix}-.*\ntasks.max = 1\nrefresh.topics.enabled = false\n"
        "sync.topic.configs.enabled = false\nsync.topic.acls.enabled = false\nemit.checkpoints.enabled = false\n"
        "A->B.mirrorflow.replicate.mode = micro-batch\n"
    )
    config = load_config(str(properties(tmp / f"{prefix}.properties", source, target, "A", "B", extra)))
    flow = config.flow("A", "B")
    clients = FlowClients.resolve(flow)
    every = [(t, p) for t in topics for p in range(args.per_topic)]
    load = Load(source.bootstrap, every, args.rate, args.size)
    arrivals = Arrivals(target.bootstrap, [(f"A.{t}", p) for t, p in every])

    def window(name: str, length_s: float, *, handover: bool):
        planned = service.plan_run(config, "A", "B", run_id=f"{name}-{prefix}")
        plan = Plan.from_json(read_run_record(clients.target_consumer, planned["plan_offset"])[3])
        if args.without_plan_read:
            plan = dataclasses.replace(plan, progress_read=None)
        settings = window_settings(flow, started_ms=plan.created_ms, length_s=length_s, handover=handover)
        # As a window's driver makes it: with the counts of the flow's recent takeovers.
        began = time.perf_counter()
        job = window_copy_job(flow, clients, plan, settings, workers=1)
        print(
            f"{name}: the driver's copy job (its read of recent takeovers) took {time.perf_counter() - began:.2f}s"
        )
        (assignment,) = assignments(plan, planned["plan_offset"], 1)
        stop = threading.Event()
        thread = threading.Thread(
            target=task.run_task, args=(job, settings, assignment, stop.is_set), name=name
        )
        return thread, stop

    load.start()
    arrivals.start()
    first, _ = window("first", args.warmup, handover=True)
    first.start()
    time.sleep(max(0.0, args.warmup - 5))
    second, stop_second = window("next", args.warmup + args.after + 60, handover=False)
    started = time.monotonic()
    second.start()
    first.join(300)
    time.sleep(args.after)
    stop_second.set()
    load.stopped.set()
    second.join(120)
    load.join(60)
    arrivals.stopped.set()
    arrivals.join(30)

    events = [(at - started, who, what) for at, who, what in timeline.events if at >= started - STEADY_S]
    timeline.events.clear()
    print(
        f"\n{args.partitions:,} partitions, {args.rate:,} records/s: the next window's task started at 0.00 s"
    )
    for at, who, what in events:
        if at >= -3:
            print(f"  {at:7.2f} s  {who:<6} {what}")
    # The first window's last commit: its last batch that ended before it let the slot go.
    gone = min(at for at, who, what in events if who == "first" and what.startswith("let slot"))
    last_old = max(
        at for at, who, what in events if who == "first" and what == "batch committed" and at < gone
    )
    first_new = min(at for at, who, what in events if who == "next" and what == "batch committed")
    steady = [lag for at, lag in arrivals.samples if -STEADY_S <= at - started < -1]
    after = [lag for at, lag in arrivals.samples if 0 <= at - started <= args.after]
    figures = {
        "opened": min(at for at, who, what in events if who == "next" and what.startswith("writer: opened")),
        "first commit": first_new,
        "gap": first_new - last_old,
        "steady p50": quantile(steady, 0.5),
        "steady p99": quantile(steady, 0.99),
        "max after": max(after, default=float("nan")),
    }
    print("  " + ", ".join(f"{name} {value:.2f} s" for name, value in figures.items()))
    print(f"  the next window's first batch: {'phase':<44} {'wall ms':>8} {'CPU ms':>8}")
    for name, total in sorted(timeline.first_batch.items(), key=lambda item: -item[1].wall_s)[:8]:
        if total.calls:
            print(f"  {'':<31}{name:<44} {total.wall_s * 1000:>8.0f} {total.cpu_s * 1000:>8.0f}")
    return figures


def main() -> int:
    args = parse_args()
    print(" ".join([".venv/bin/python benchmarks/handover_profile.py", *sys.argv[1:]]))
    print(machine())
    timeline = Timeline()
    timeline.install()
    runs = []
    with (
        tempfile.TemporaryDirectory(prefix="mirrorflow-handover-") as tmp_dir,
        two_clusters(Path(tmp_dir)) as (source, target),
    ):
        for _ in range(args.repeat):
            runs.append(handover(args, Path(tmp_dir), source, target, timeline))
    print(f"\nmedians of {len(runs)}:")
    for name in runs[0]:
        print(f"  {name:<13} {statistics.median(r[name] for r in runs):6.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
