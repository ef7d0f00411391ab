"""Where a micro-batch batch's time goes as partitions grow: wall and CPU per phase, per batch.

Two single-node Apache Kafka clusters (localkafka, the version pinned in kafka/pom.xml). For each
size in --sizes (partitions in all, --per-topic partitions per topic), a flow of its own copies a
steady load of --rate records a second (--size bytes each) spread evenly over --active of its
partitions (the rest stay quiet), in one window task run in this process with tasks.max 1 and
mirrorflow.microbatch.interval.ms = --interval-ms, exactly-once. The first batch opens every
writer slot that has records (the window's start, timed); --warmup seconds after it ends the
phases' totals (mirrorflow.replicate.phases: the window's steps and the copy engine's, summed over
its slot threads) are read, and again --seconds later: what each phase took per batch, wall and
CPU of the thread that ran it, and how often it ran per batch (a `copy: commit` is a
transaction). The process's own CPU over the same span, per record copied, includes librdkafka's
threads, which no phase holds.

Run: `.venv/bin/python benchmarks/window_profile.py` (--sizes 100,1000 --seconds 20 for a short
run; --pstats FILE to see which Python functions the task's thread spends its CPU in; --help).
Figures go to docs/development/window-profile.md with the command.
"""

from __future__ import annotations

import argparse
import cProfile
import resource
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

from _clusters import create_topics, two_clusters
from confluent_kafka import Consumer, Producer, TopicPartition
from vs_mm2 import machine, properties

from localkafka import LocalKafka
from mirrorflow.clients import FlowClients
from mirrorflow.config import load_config
from mirrorflow.replicate import phases, runner, service
from mirrorflow.replicate.plan import Plan
from mirrorflow.replicate.run_reading import read_run_record
from mirrorflow.replicate.window.settings import window_settings
from mirrorflow.replicate.window.share import assignments
from mirrorflow.replicate.window.task import run_task

WINDOW_PHASE = "window: copy (all slots)"
FIRST_PHASES = 6  # of the first batch, the largest


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100,1000,10000", help="partitions in all, comma-separated")
    parser.add_argument("--per-topic", type=int, default=10, help="partitions per topic")
    parser.add_argument("--rate", type=int, default=2000, help="records per second, in all")
    parser.add_argument(
        "--active", type=float, default=1.0, help="share of the partitions that receive records (0 < x <= 1)"
    )
    parser.add_argument("--size", type=int, default=200, help="bytes per record")
    parser.add_argument("--interval-ms", type=int, default=250)
    parser.add_argument("--warmup", type=float, default=20.0, help="seconds before the measured span")
    parser.add_argument("--seconds", type=float, default=30.0, help="the measured span")
    parser.add_argument(
        "--pstats",
        help="also profile the window task's thread with cProfile (its whole run, the first batch "
        "included) and write the statistics to PSTATS.<size>, for `python -m pstats`",
    )
    return parser.parse_args()


class Load(threading.Thread):
    """`rate` records a second, round-robin over `targets` (topic, partition), until stopped."""

    def __init__(self, bootstrap: str, targets: list[tuple[str, int]], rate: int, size: int) -> None:
        super().__init__(daemon=True)
        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all"})
        self.targets, self.rate, self.value = targets, rate, b"v" * size
        self.stopped = threading.Event()
        self.sent = 0

    def run(self) -> None:
        started = time.monotonic()
        while not self.stopped.is_set():
            due = int((time.monotonic() - started) * self.rate)
            while self.sent < due:
                topic, partition = self.targets[self.sent % len(self.targets)]
                try:
                    self.producer.produce(topic, self.value, partition=partition)
                except BufferError:
                    self.producer.poll(0.05)
                    continue
                self.sent += 1
            self.producer.poll(0)
            time.sleep(0.005)
        self.producer.flush(30)


def copied(bootstrap: str, topics: list[str], partitions: int) -> int:
    """Offsets on the target's remote topics (records and commit markers)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "profile-count"})
    try:
        wanted = [TopicPartition(f"A.{t}", p) for t in topics for p in range(partitions)]
        total = 0
        for start in range(0, len(wanted), 1000):
            for tp in consumer.offsets_for_times(
                [TopicPartition(t.topic, t.partition, -1) for t in wanted[start : start + 1000]], timeout=60
            ):
                total += max(tp.offset, 0)
        return total
    finally:
        consumer.close()


def cpu_s() -> float:
    used = resource.getrusage(resource.RUSAGE_SELF)
    return used.ru_utime + used.ru_stime


def profile(args: argparse.Namespace, tmp: Path, source: LocalKafka, target: LocalKafka, size: int) -> None:
    per_topic = args.per_topic
    prefix = f"p{size}x{uuid.uuid4().hex[:4]}"
    topics = [f"{prefix}-{i:05d}" for i in range(max(1, size // per_topic))]
    started = time.monotonic()
    create_topics(source.bootstrap, topics, per_topic)
    print(
        f"  {len(topics)} topics x {per_topic} partitions created in {time.monotonic() - started:.0f}s",
        flush=True,
    )
    extra = (
        f"A->B.topics = {prefix}-.*\ntasks.max = 1\nrefresh.topics.enabled = false\n"
        f"sync.topic.configs.enabled = false\nsync.topic.acls.enabled = false\nemit.checkpoints.enabled = false\n"
        f"A->B.mirrorflow.replicate.mode = micro-batch\nA->B.mirrorflow.microbatch.interval.ms = {args.interval_ms}\n"
    )
    path = properties(tmp / f"{prefix}.properties", source, target, "A", "B", extra)
    config = load_config(str(path))
    flow = config.flow("A", "B")
    clients = FlowClients.resolve(flow)
    every = [(t, p) for t in topics for p in range(per_topic)]
    active = every[:: max(1, round(1 / args.active))] if args.active < 1 else every
    load = Load(source.bootstrap, active, args.rate, args.size)
    load.start()
    planned = service.plan_run(config, "A", "B", run_id=f"profile-{prefix}")
    plan = Plan.from_json(read_run_record(clients.target_consumer, planned["plan_offset"])[3])
    length = args.warmup + args.seconds + 60
    settings = window_settings(flow, started_ms=plan.created_ms, length_s=length, handover=False)
    job = runner.copy_job_for(flow, clients, plan, workers=1)
    (assignment,) = assignments(plan, planned["plan_offset"], 1)
    stop = threading.Event()
    outcome: list = []

    def run() -> None:
        profiler = cProfile.Profile() if args.pstats else None
        if profiler is not None:
            profiler.enable()
        try:
            outcome.append(run_task(job, settings, assignment, stop.is_set))
        finally:
            if profiler is not None:
                profiler.disable()
                profiler.dump_stats(f"{args.pstats}.{size}")

    task = threading.Thread(target=run)
    at_start = phases.snapshot()
    task.start()
    begun, base = time.monotonic(), at_start.get(WINDOW_PHASE, phases.PhaseTotals()).calls
    while phases.snapshot().get(WINDOW_PHASE, phases.PhaseTotals()).calls == base:
        if not task.is_alive() or time.monotonic() - begun > 900:
            raise SystemExit(
                f"the window's first batch did not end: {outcome[0].error if outcome else 'still running'}"
            )
        time.sleep(0.2)
    first_s = time.monotonic() - begun
    first = phases.since(at_start)
    time.sleep(args.warmup)
    before, cpu_before, copied_before = (
        phases.snapshot(),
        cpu_s(),
        copied(target.bootstrap, topics, per_topic),
    )
    time.sleep(args.seconds)
    during = phases.since(before)
    cpu_during = cpu_s() - cpu_before
    copied_during = copied(target.bootstrap, topics, per_topic) - copied_before
    stop.set()
    load.stopped.set()
    task.join(120)
    load.join(60)
    batches = max(1, during.get(WINDOW_PHASE, phases.PhaseTotals()).calls)
    commits = during.get("copy: commit", phases.PhaseTotals()).calls
    print(
        f"\n{size:,} partitions ({len(topics)} topics x {per_topic}), {len(active):,} receiving {args.rate:,} records/s: "
        f"first batch (opening every writer) ended {first_s:.1f}s after the task started; then "
        f"{batches} batches in {args.seconds:g}s ({args.seconds / batches:.2f}s a batch), "
        f"{commits / batches:.1f} transactions a batch, {copied_during:,} offsets copied, "
        f"process CPU {cpu_during:.1f}s ({cpu_during / max(1, copied_during) * 1e6:,.0f} us an offset)",
        flush=True,
    )
    # Phases of the copy engine run in its slot threads at once: their wall times add up over the
    # threads (thread-seconds), and may exceed the batch's own.
    print(f"  {'phase':<48} {'per batch':>9} {'wall ms':>10} {'CPU ms':>10}")
    for name, total in sorted(during.items(), key=lambda item: -item[1].wall_s):
        if total.calls:
            print(
                f"  {name:<48} {total.calls / batches:>9.1f} {total.wall_s / batches * 1000:>10.1f} "
                f"{total.cpu_s / batches * 1000:>10.1f}"
            )
    # The window's start: where its first batch's time went (the writer's opening: fencing the
    # ids older writers used, settling progress, checking the remote partitions).
    print(f"  first batch: {'phase':<41} {'wall ms':>10} {'CPU ms':>10}")
    for name, total in sorted(first.items(), key=lambda item: -item[1].wall_s)[:FIRST_PHASES]:
        if total.calls:
            print(f"  {'':<13}{name:<41} {total.wall_s * 1000:>10.1f} {total.cpu_s * 1000:>10.1f}")
    if outcome and outcome[0].error:
        print(f"  the window task ended with an error: {outcome[0].error}")


def main() -> int:
    args = parse_args()
    print(" ".join([".venv/bin/python benchmarks/window_profile.py", *sys.argv[1:]]))
    print(machine())
    with (
        tempfile.TemporaryDirectory(prefix="mirrorflow-profile-") as tmp_dir,
        two_clusters(Path(tmp_dir)) as (source, target),
    ):
        for size in (int(s) for s in args.sizes.split(",")):
            profile(args, Path(tmp_dir), source, target, size)
    return 0


if __name__ == "__main__":
    sys.exit(main())
