"""Scale: what a run, a checkpoint pass and a group-sync pass cost as the partition count grows.

For each size (default 200, 2,000 and 20,000 partitions, in topics of 10 partitions) two fresh
Apache Kafka clusters (localkafka, the version pinned in kafka/pom.xml, one node each unless
--brokers says more, JMX on) hold the source A and the target B. A gets --initial-records
records per partition and --groups consumer groups with committed offsets (group g reads topic
g mod topics, all its partitions, committed somewhere in the initial records), then flow A->B
(tasks.max = --tasks, exactly-once, sync.group.offsets.enabled = true) runs, in this order:

1. a first replicate run, copying everything (shown, not a target);
2. an idle replicate run: nothing new on A;
3. a replicate run after --new-records more records per partition;
4. one checkpoint pass (mirrorflow.control.checkpoints.emit_checkpoints, what
   `mirrorflow checkpoints` and the checkpoint DAG run);
5. one group-sync pass (mirrorflow.control.group_sync.sync_group_offsets).

A replicate run goes the way the replicate DAG takes it, each step its own process: the plan
(service.plan_run in a fresh Python process), the copy (`spark-submit
spark_apps/mirrorflow_copy.py --master --spark-master`, as vs_mm2.py's Spark row), the report
(service.report_run in a fresh Python process); its wall time is the three together, Python,
JVM and Spark start-up included. `--copy cli` runs `mirrorflow replicate` (local worker
processes) instead of plan + Spark + report.

Requests are counted where they arrive: every broker's
`kafka.network:type=RequestMetrics,name=RequestsPerSec,request=*` counters, read over JMX with
Kafka's JmxTool (localkafka.jmx) before and after each step; the table shows the difference
summed over both clusters (the brokers' own quorum and heartbeat traffic left out) and the
request types that dominate (AddPartitionsToTxnVerification is a broker asking the transaction
coordinator about a transactional Produce, KIP-890: caused by the copy, sent by the broker). Peak memory is the resident set size, sampled every 0.1 s with
psutil: of the plan process, and of the Spark driver (the spark-submit JVM, which in local mode
also runs the tasks, plus the Python driver of mirrorflow_copy.py) and of the whole Spark tree
(with the Python workers). The largest run record is the biggest value in
`mirrorflow-runs.internal` on B after all runs.

Per-partition columns divide by the flow's partitions for replicate runs and by the committed
group partitions (--groups x 10) for checkpoint and group-sync passes, so a flat column means
linear cost. The issue's targets for 20,000 partitions are printed beside the figures.

A node keeps one open file per partition (its active log segment), so a size above the
machine's open-file limit (`ulimit -n`) per broker cannot run on one node; such a size is
skipped with the reason unless --brokers spreads it. At 20,000 partitions the plan's single
CreateTopics request for every remote topic exceeds Kafka's 10,000 partitions per request;
--precreate-remote creates them first, in smaller requests, so the runs can be measured.

Run: `.venv/bin/python benchmarks/scale.py` (options: --help; `--sizes 200,2000` for a quick look).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import platform
import pstats
import random
import resource
import shlex
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import psutil
from _clusters import SINGLE_NODE_REPLICATION
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

import mirrorflow
from localkafka import QUICK_CLUSTER, LocalKafka, kafka_version
from localkafka.jmx import request_counts
from mirrorflow.control.checkpoints import emit_checkpoints
from mirrorflow.control.group_sync import sync_group_offsets
from mirrorflow.control.groups import Committed, commit_offsets
from mirrorflow.kafka import await_topics
from mirrorflow.replicate.runs import RUNS_TOPIC

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
TOPIC_PARTITIONS = 10
TIMEOUT_S = 3600.0
MIB = 2**20
# The targets at 20,000 partitions: seconds per step, and the largest run record.
TARGET_PARTITIONS = 20_000
TARGETS_S = {"idle run": 60.0, "run, new records": 300.0, "checkpoint pass": 20.0}
TARGET_RECORD_BYTES = MIB
# The tests' quick cluster settings, except the two that make a broker scan every partition
# often (retention every 500 ms, the log cleaner every 100 ms): tests need them to see retention
# and compaction happen, production clusters keep Kafka's defaults (5 minutes, 15 s), and at
# 10,000 partitions per node they cost the brokers a share of this 2-core machine (idle, 5,000
# partitions: 1.6 s of broker CPU per 20 s against 0.8 s).
BROKER_SETTINGS = {
    key: value
    for key, value in QUICK_CLUSTER.items()
    if key not in ("log.retention.check.interval.ms", "log.cleaner.backoff.ms")
}
# Open files a node needs besides one per partition (jars, sockets, internal topics), for the check.
FILE_MARGIN = 1_000


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="200,2000,20000", help="partition counts, comma-separated")
    parser.add_argument(
        "--groups", type=int, default=2000, help="consumer groups with committed offsets on A"
    )
    parser.add_argument(
        "--initial-records", type=int, default=10, help="records per partition before the first run"
    )
    parser.add_argument("--new-records", type=int, default=100, help="records per partition before run 3")
    parser.add_argument("--record-size", type=int, default=100, help="bytes per record (key + value)")
    parser.add_argument("--tasks", type=int, default=2, help="tasks.max: Spark tasks or local workers")
    parser.add_argument("--copy", choices=("spark", "cli"), default="spark", help="how runs copy")
    parser.add_argument("--spark-master", default="local[2]")
    parser.add_argument("--brokers", type=int, default=1, help="nodes per cluster")
    parser.add_argument("--heap", default="2g", help="maximum heap of each Kafka node")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--precreate-remote",
        action="store_true",
        help="create the remote topics on B before the first run, 2,000 partitions per request (the "
        "plan asks for all of them in one CreateTopics request, which Kafka refuses above 10,000 partitions)",
    )
    parser.add_argument(
        "--runs-only",
        action="store_true",
        help="measure the replicate runs only, not the checkpoint and group-sync passes",
    )
    parser.add_argument(
        "--passes-only",
        action="store_true",
        help="after the first run (which the passes need), measure the checkpoint and group-sync passes only",
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="after the measured passes, print a cProfile of a second checkpoint pass and group-sync pass",
    )
    # A replicate step in its own process (what the benchmark itself runs; not for people).
    parser.add_argument("--step", choices=("plan", "report"), help=argparse.SUPPRESS)
    parser.add_argument("--config", help=argparse.SUPPRESS)
    parser.add_argument("--run-id", help=argparse.SUPPRESS)
    parser.add_argument("--plan", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.step is None:
        sizes = [int(s) for s in args.sizes.split(",")]
        if any(s < TOPIC_PARTITIONS or s % TOPIC_PARTITIONS for s in sizes):
            parser.error(f"--sizes must be multiples of {TOPIC_PARTITIONS}")
        if min(args.groups, args.initial_records, args.new_records, args.tasks, args.brokers) < 1:
            parser.error("--groups, --initial-records, --new-records, --tasks and --brokers must be >= 1")
    return args


# -- a replicate step in a process of its own -------------------------------------------------------


def step_main(args: argparse.Namespace) -> int:
    from mirrorflow.replicate import service

    if args.step == "plan":
        planned = service.plan_run(args.config, "A", "B", run_id=args.run_id)
        out = {k: planned[k] for k in ("plan_offset", "units", "ranges", "topic_errors")}
    else:
        plan = json.loads(args.plan)
        summary = service.report_run(
            args.config,
            "A",
            "B",
            run_id=args.run_id,
            plan_offset=plan["plan_offset"],
            topic_errors=plan["topic_errors"],
        )
        out = {k: summary.get(k) for k in ("records", "lag_left") if k in summary}
    sys.stdout.write(json.dumps(out) + "\n")
    return 0


# -- measuring ---------------------------------------------------------------------------------------


class PeakRss(threading.Thread):
    """Samples a process tree's resident set every 0.1 s: the peak of the whole tree and of the
    processes `driver` picks out of it."""

    def __init__(self, pid: int, driver: Callable[[psutil.Process], bool] = lambda _p: True) -> None:
        super().__init__(daemon=True)
        self.root = psutil.Process(pid)
        self.driver = driver
        self.tree = 0
        self.driver_peak = 0
        self.stop_now = threading.Event()

    def run(self) -> None:
        while not self.stop_now.wait(0.1):
            tree = driver = 0
            try:
                processes = [self.root, *self.root.children(recursive=True)]
            except psutil.NoSuchProcess:
                return
            for process in processes:
                try:
                    rss = process.memory_info().rss
                    picked = process is self.root or self.driver(process)
                except psutil.NoSuchProcess:
                    continue
                tree += rss
                driver += rss if picked else 0
            self.tree = max(self.tree, tree)
            self.driver_peak = max(self.driver_peak, driver)

    def stop(self) -> None:
        self.stop_now.set()
        self.join(5)


def run_process(
    command: list[str], log: Path, driver: Callable[[psutil.Process], bool] | None = None
) -> tuple[str, PeakRss]:
    """Run a command to its end with its tree's memory sampled; its stdout, and the sampler."""
    env = {
        **os.environ,
        "PYSPARK_PYTHON": sys.executable,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    with open(log, "ab") as err:
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=err, env=env)
        sampler = PeakRss(process.pid, driver or (lambda _p: True))
        sampler.start()
        try:
            out, _ = process.communicate(timeout=TIMEOUT_S)
        finally:
            sampler.stop()
            if process.poll() is None:  # interrupted or timed out: take the whole tree down
                for child in psutil.Process(process.pid).children(recursive=True):
                    child.kill()
                process.kill()
                process.wait()
    if process.returncode != 0:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-40:])
        raise SystemExit(f"{shlex.join(command[:4])}... failed ({process.returncode}):\n{tail}")
    return out.decode(), sampler


@dataclass
class Step:
    name: str
    seconds: float
    requests: Counter[str]
    per: int  # partitions (runs) or group partitions (passes) the per-partition columns divide by
    memory: dict[str, int] = field(default_factory=dict)
    parts: dict[str, float] = field(default_factory=dict)
    load: float = 0.0  # the machine's 1-minute load average when the step ended

    @property
    def total_requests(self) -> int:
        return sum(self.requests.values())


class Meter:
    """Wall time and the requests both clusters served, around one step."""

    def __init__(self, clusters: list[LocalKafka]) -> None:
        self.clusters = clusters

    def counts(self) -> Counter[str]:
        total: Counter[str] = Counter()
        for cluster in self.clusters:
            total.update(request_counts(cluster))
        return total

    def measure(self, name: str, per: int, fn: Callable[[Step], None]) -> Step:
        sys.stderr.write(f"  {name}...\n")
        before = self.counts()
        step = Step(name, 0.0, Counter(), per)
        started = time.monotonic()
        fn(step)
        step.seconds = time.monotonic() - started
        step.load = os.getloadavg()[0]
        after = self.counts()
        step.requests = Counter({k: after[k] - before[k] for k in after if after[k] - before[k] > 0})
        sys.stderr.write(f"    {step.seconds:.1f} s, {step.total_requests:,} requests {step.parts}\n")
        return step


def is_spark_driver(process: psutil.Process) -> bool:
    """The JVM is the sampled root; its Python driver is the process running mirrorflow_copy.py."""
    return any(part.endswith("mirrorflow_copy.py") for part in process.cmdline())


def replicate_run(ctx: Context, step: Step) -> None:
    run_id = f"scale-{uuid.uuid4().hex[:8]}"
    if ctx.args.copy == "cli":
        started = time.monotonic()
        _, sampler = run_process(
            [str(BIN / "mirrorflow"), "replicate", str(ctx.config), "--flow", "A->B"], ctx.log
        )
        step.parts["copy"] = time.monotonic() - started
        step.memory["cli tree"] = sampler.tree
        return
    me = Path(__file__).resolve()
    started = time.monotonic()
    out, sampler = run_process(
        [sys.executable, str(me), "--step", "plan", "--config", str(ctx.config), "--run-id", run_id], ctx.log
    )
    step.parts["plan"] = time.monotonic() - started
    step.memory["plan"] = sampler.tree
    planned = json.loads(out.strip().splitlines()[-1])
    started = time.monotonic()
    _, sampler = run_process(
        [
            str(BIN / "spark-submit"),
            "--master",
            ctx.args.spark_master,
            "--conf",
            "spark.ui.enabled=false",
            "--conf",
            "spark.speculation=false",
            str(ROOT / "spark_apps" / "mirrorflow_copy.py"),
            "--config",
            str(ctx.config),
            "--flow",
            "A->B",
            "--plan-offset",
            str(planned["plan_offset"]),
        ],
        ctx.log,
        driver=is_spark_driver,
    )
    step.parts["spark"] = time.monotonic() - started
    step.memory["spark driver"] = sampler.driver_peak
    step.memory["spark tree"] = sampler.tree
    started = time.monotonic()
    run_process(
        [
            sys.executable,
            str(me),
            "--step",
            "report",
            "--config",
            str(ctx.config),
            "--run-id",
            run_id,
            "--plan",
            json.dumps(planned),
        ],
        ctx.log,
    )
    step.parts["report"] = time.monotonic() - started


# -- data ---------------------------------------------------------------------------------------------


def topic_names(partitions: int) -> list[str]:
    return [f"scale-{t:05d}" for t in range(partitions // TOPIC_PARTITIONS)]


def create_topics(bootstrap: str, topics: list[str]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for i in range(0, len(topics), 200):
        chunk = topics[i : i + 200]
        futures = admin.create_topics([NewTopic(t, TOPIC_PARTITIONS, 1) for t in chunk], request_timeout=300)
        for future in futures.values():
            future.result(300)
    await_topics(admin, dict.fromkeys(topics, TOPIC_PARTITIONS), timeout_s=600)


def produce(bootstrap: str, topics: list[str], per_partition: int, size: int, first: int) -> None:
    """per_partition records into every partition, keys numbered from `first`."""
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 50,
            "batch.size": 1_000_000,
            "acks": "all",
            "queue.buffering.max.messages": 2_000_000,
            "queue.buffering.max.kbytes": 1_048_576,
            "log_level": 3,
        }
    )
    # Every topic known with all its partitions before the first record: on a busy multi-node
    # cluster a node still replaying new topics answers with none, and librdkafka 2.16 once
    # failed an assertion (rd_kafka_enq_once_del_source_return) producing into such a flip.
    deadline = time.monotonic() + 300
    while True:
        known = producer.list_topics(timeout=60).topics
        if all(t in known and len(known[t].partitions) == TOPIC_PARTITIONS for t in topics):
            break
        if time.monotonic() > deadline:
            raise SystemExit("the producer did not see every source topic within 300 s")
        time.sleep(1)
    value = os.urandom(max(0, size - 16))
    for i in range(first, first + per_partition):
        key = b"%016d" % i
        for topic in topics:
            for partition in range(TOPIC_PARTITIONS):
                while True:
                    try:
                        producer.produce(topic, key=key, value=value, partition=partition)
                        break
                    except BufferError:
                        producer.poll(0.05)
        producer.poll(0)
    if producer.flush(TIMEOUT_S):
        raise SystemExit("could not write the source records")


def commit_groups(bootstrap: str, topics: list[str], groups: int, committed_below: int, seed: int) -> int:
    """Group g commits every partition of topic g mod topics; returns the group partitions."""
    rng = random.Random(seed)
    wanted = {
        f"scale-group-{g:05d}": {
            (topics[g % len(topics)], p): Committed(rng.randrange(0, committed_below + 1), "")
            for p in range(TOPIC_PARTITIONS)
        }
        for g in range(groups)
    }
    admin = AdminClient({"bootstrap.servers": bootstrap})
    pending = dict(wanted)
    deadline = time.monotonic() + 120
    while pending:
        outcomes = commit_offsets(admin, pending)
        pending = {g: pending[g] for g, outcome in outcomes.items() if outcome.error}
        if pending and time.monotonic() > deadline:
            raise SystemExit(f"committing group offsets failed: {outcomes[next(iter(pending))].error}")
        if pending:
            time.sleep(1)  # the new offsets topic's coordinators are still loading
    return sum(len(offsets) for offsets in wanted.values())


def largest_run_record(bootstrap: str) -> tuple[int, str, int]:
    """(bytes, kind, records) of the biggest value in the runs topic."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"scale-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "fetch.max.bytes": 64 * MIB,
            "max.partition.fetch.bytes": 64 * MIB,
        }
    )
    consumer.assign([TopicPartition(RUNS_TOPIC, 0, 0)])
    largest, kind, count = 0, "-", 0
    try:
        while True:
            message = consumer.poll(10)
            if message is None:
                raise SystemExit(f"reading {RUNS_TOPIC} stalled")
            if message.error():
                if message.error().code() == -191:  # end of partition
                    return largest, kind, count
                raise SystemExit(f"reading {RUNS_TOPIC}: {message.error()}")
            count += 1
            if len(message.value()) > largest:
                largest, kind = len(message.value()), message.key().decode().rsplit("|", 1)[-1]
    finally:
        consumer.close()


def config_text(source: str, target: str, tasks: int) -> str:
    return (
        "clusters = A, B\n"
        f"A.bootstrap.servers = {source}\n"
        f"B.bootstrap.servers = {target}\n"
        "A->B.enabled = true\n"
        "B->A.enabled = false\n"
        "A->B.topics = scale-.*\n"
        f"tasks.max = {tasks}\n"
        "sync.group.offsets.enabled = true\n"
        "emit.heartbeats.enabled = false\n" + SINGLE_NODE_REPLICATION
    )


# -- one size -----------------------------------------------------------------------------------------


@dataclass
class Context:
    args: argparse.Namespace
    config: Path
    log: Path


@dataclass
class SizeResult:
    partitions: int
    steps: list[Step]
    group_partitions: int
    setup_s: float
    record: tuple[int, str, int]
    profiles: list[str] = field(default_factory=list)


def open_files_problem(partitions: int, brokers: int) -> str | None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = partitions // brokers + FILE_MARGIN
    if need <= soft:
        return None
    return (
        f"{partitions:,} partitions need about {need:,} open files on each of {brokers} node(s) "
        f"(one log segment per partition, plus {FILE_MARGIN:,} for jars, sockets and internal topics), "
        f"above this machine's open-file limit of {soft:,} (hard limit {hard:,}; raising it needs "
        f"CAP_SYS_RESOURCE); run it with --brokers {-(-partitions // (soft - FILE_MARGIN))} or more"
    )


def measure_size(args: argparse.Namespace, partitions: int, tmp: Path) -> SizeResult:
    started = time.monotonic()
    source = LocalKafka(
        tmp / "source", brokers=args.brokers, overrides=BROKER_SETTINGS, heap=args.heap, jmx=True
    )
    target = LocalKafka(
        tmp / "target", brokers=args.brokers, overrides=BROKER_SETTINGS, heap=args.heap, jmx=True
    )
    source.launch()
    target.launch()
    try:
        source.start()
        target.start()
        topics = topic_names(partitions)
        sys.stderr.write(f"{partitions:,} partitions: creating {len(topics):,} topics\n")
        create_topics(source.bootstrap, topics)
        if args.precreate_remote:
            create_topics(target.bootstrap, [f"A.{t}" for t in topics])
        produce(source.bootstrap, topics, args.initial_records, args.record_size, 0)
        group_partitions = commit_groups(
            source.bootstrap, topics, args.groups, args.initial_records, args.seed
        )
        config = tmp / "scale.properties"
        config.write_text(config_text(source.bootstrap, target.bootstrap, args.tasks))
        ctx = Context(args, config, tmp / "steps.log")
        setup_s = time.monotonic() - started
        meter = Meter([source, target])
        steps = [meter.measure("first run", partitions, lambda step: replicate_run(ctx, step))]
        if not args.passes_only:
            steps.append(meter.measure("idle run", partitions, lambda step: replicate_run(ctx, step)))
            produce(source.bootstrap, topics, args.new_records, args.record_size, args.initial_records)
            steps.append(meter.measure("run, new records", partitions, lambda step: replicate_run(ctx, step)))
        if not args.runs_only:
            steps.append(
                meter.measure(
                    "checkpoint pass", group_partitions, lambda _step: emit_checkpoints(str(config), "A", "B")
                )
            )
            steps.append(
                meter.measure(
                    "group-sync pass",
                    group_partitions,
                    lambda _step: sync_group_offsets(str(config), "A", "B"),
                )
            )
        record = largest_run_record(target.bootstrap)
        result = SizeResult(partitions, steps, group_partitions, setup_s, record)
        if args.profile and not args.runs_only:
            for name, job in (("checkpoint pass", emit_checkpoints), ("group-sync pass", sync_group_offsets)):
                result.profiles.append(
                    f"{partitions:,} partitions, a second {name}:\n{profiled(job, config)}"
                )
        return result
    finally:
        source.stop()
        target.stop()


def profiled(job: Callable[[str, str, str], object], config: Path) -> str:
    profiler = cProfile.Profile()
    profiler.enable()
    job(str(config), "A", "B")
    profiler.disable()
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(30)
    return out.getvalue()


# -- output -------------------------------------------------------------------------------------------


def machine() -> list[str]:
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return [
        f"machine: {platform.machine()} {platform.system()} {platform.release()}, {os.cpu_count()} cores, "
        f"{psutil.virtual_memory().total / 2**30:.0f} GiB, open-file limit {soft:,}; "
        f"Apache Kafka {kafka_version()}; python {platform.python_version()}",
        f"mirrorflow from {Path(mirrorflow.__file__).parent}; "
        f"load average before the run: {' '.join(f'{x:.2f}' for x in os.getloadavg())}",
    ]


def top_requests(requests: Counter[str], n: int = 3) -> str:
    total = sum(requests.values()) or 1
    return ", ".join(f"{name} {count:,} ({count / total:.0%})" for name, count in requests.most_common(n))


def target_cell(step: Step, partitions: int) -> str:
    limit = TARGETS_S.get(step.name)
    if limit is None:
        return ""
    if partitions == TARGET_PARTITIONS:
        return f"≤ {limit:.0f} s: {'met' if step.seconds <= limit else 'MISSED'}"
    if step.per != partitions:  # a pass over the same groups at every size: no extrapolation
        return f"≤ {limit:.0f} s ({'met' if step.seconds <= limit else 'MISSED'} here already)"
    scaled = step.seconds / partitions * TARGET_PARTITIONS
    return f"≤ {limit:.0f} s (x {TARGET_PARTITIONS // partitions:,} linear: {scaled:,.0f} s)"


def tables(results: list[SizeResult], args: argparse.Namespace) -> list[str]:
    lines = [
        "| partitions | step | wall s | ms / partition | requests | requests / partition | top request types | "
        "parts (s) | load | target at 20,000 |",
        "|---:|---|---:|---:|---:|---:|---|---|---:|---|",
    ]
    for result in results:
        for step in result.steps:
            unit = "" if step.per == result.partitions else " (per group partition)"
            parts = ", ".join(f"{k} {v:.1f}" for k, v in step.parts.items())
            lines.append(
                f"| {result.partitions:,} | {step.name}{unit} | {step.seconds:.1f} | "
                f"{step.seconds / step.per * 1000:.2f} | {step.total_requests:,} | "
                f"{step.total_requests / step.per:.2f} | {top_requests(step.requests)} | {parts} | {step.load:.1f} | "
                f"{target_cell(step, result.partitions)} |"
            )
    lines += [
        "",
        "| partitions | step | requests / partition by type (most first) |",
        "|---:|---|---|",
    ]
    for result in results:
        for step in result.steps:
            by_type = ", ".join(
                f"{name} {count / step.per:.2f}" for name, count in step.requests.most_common(8)
            )
            lines.append(f"| {result.partitions:,} | {step.name} | {by_type} |")
    lines += [
        "",
        "| partitions | plan peak RSS MiB | Spark driver peak RSS MiB (JVM + Python driver) | Spark tree "
        "peak RSS MiB | largest run record | run records | setup s |",
        "|---:|---:|---:|---:|---|---:|---:|",
    ]
    for result in results:
        runs = [s for s in result.steps if s.memory]

        def peak(key: str, runs: list[Step] = runs) -> str:
            values = [s.memory[key] for s in runs if key in s.memory]
            return f"{max(values) / MIB:,.0f}" if values else "-"

        size, kind, count = result.record
        verdict = "met" if size <= TARGET_RECORD_BYTES else "MISSED"
        lines.append(
            f"| {result.partitions:,} | {peak('plan')} | {peak('spark driver')} | "
            f"{peak('spark tree') if args.copy == 'spark' else peak('cli tree')} | "
            f"{size / 1024:,.1f} KiB ({kind}; ≤ 1 MiB: {verdict}) | {count} | {result.setup_s:.0f} |"
        )
    return lines


def main() -> int:
    args = parse_args()
    # SIGTERM unwinds like Ctrl-C, so the brokers and any running step are stopped.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    if args.step:
        return step_main(args)
    sizes = [int(s) for s in args.sizes.split(",")]
    out = sys.stdout
    out.write(" ".join([".venv/bin/python benchmarks/scale.py", *sys.argv[1:]]) + "\n")
    for line in machine():
        out.write(line + "\n")
    out.write(
        f"workload: topics of {TOPIC_PARTITIONS} partitions, {args.groups:,} groups, "
        f"{args.initial_records} records per partition first, then {args.new_records} more, "
        f"{args.record_size} B each; tasks.max {args.tasks}; copy: "
        f"{'spark-submit --master ' + args.spark_master if args.copy == 'spark' else 'mirrorflow replicate'}; "
        f"{args.brokers} node(s) per cluster, heap {args.heap}\n\n"
    )
    out.flush()
    results: list[SizeResult] = []
    skipped: list[str] = []
    for partitions in sizes:
        problem = open_files_problem(partitions, args.brokers)
        if problem:
            skipped.append(f"skipped {partitions:,}: {problem}")
            sys.stderr.write(skipped[-1] + "\n")
            continue
        with tempfile.TemporaryDirectory(prefix="mirrorflow-scale-") as tmp:
            results.append(measure_size(args, partitions, Path(tmp)))
        for line in tables(results[-1:], args):
            sys.stderr.write(line + "\n")
    for line in tables(results, args):
        out.write(line + "\n")
    for line in skipped:
        out.write("\n" + line + "\n")
    for result in results:
        for text in result.profiles:
            out.write("\n" + text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
