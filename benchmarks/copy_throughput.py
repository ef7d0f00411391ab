"""Copy throughput: mirrorflow's copy against a naive consume-then-produce loop, same brokers.

Starts two real Apache Kafka clusters (source and target: single KRaft nodes from localkafka,
the pinned version of kafka/pom.xml), fills an 8-partition source topic with 1 KiB records
and measures, in one run and one table:
- produce-only and consume-only rates of confluent-kafka clients (what any copy is bounded by);
- a naive copy: one process, one consumer, one producer, no transactions (the baseline), once
  with librdkafka's defaults and once with the client settings mirrorflow's copy defaults to;
- mirrorflow's copy engine in local worker processes (`runner.run_locally` over a planner plan,
  exactly-once), steady (copy loops only) and including process and client start-up;
- the same through the real Spark job (`spark-submit spark_apps/mirrorflow_copy.py`, plan stored
  by `service.plan_run`), steady and including Spark start-up.
CPU per record is the CPU time of the processes that copied (getrusage of waited-for children)
over the records copied; the Spark row counts the whole spark-submit tree, JVM included. The
steady mirrorflow row counts what the workers spent copying (their clients' set-up included; the
interpreter's start and imports of a spawned worker, about 0.3 s each, left to the row with
start-up), as the naive loop runs in a forked child that imports nothing. The
brokers column is the two Kafka JVMs' CPU over the same records.

Every measurement runs --repeat times and the table shows medians (spread: (max - min) / median
of the rates), since a 2-core machine shared with other work is noisy. Each mirrorflow copy
goes through its own pair of cluster aliases naming the same two brokers, so it starts from
empty progress and writes its own remote topic, which is deleted once checked.

Run: `.venv/bin/python benchmarks/copy_throughput.py` (`--no-spark` skips the Spark job,
`--profile` adds a cProfile of one worker copying one partition).
"""

from __future__ import annotations

import argparse
import cProfile
import importlib.metadata
import io
import os
import platform
import pstats
import resource
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import confluent_kafka
import psutil
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from localkafka import QUICK_CLUSTER, LocalKafka, kafka_version
from mirrorflow.clients import FlowClients
from mirrorflow.config import load_config
from mirrorflow.replicate import run_reading, service
from mirrorflow.replicate.copy import CONSUMER_DEFAULTS, copy_slice, copy_unit
from mirrorflow.replicate.plan import Plan
from mirrorflow.replicate.planner import make_plan
from mirrorflow.replicate.report import RunReport
from mirrorflow.replicate.runner import copy_job_for

ROOT = Path(__file__).resolve().parent.parent
TOPIC = "bench"
TIMEOUT_S = 600.0
PROFILE_FLOW = ("psrc", "pdst")
SOURCE_PRODUCER = {
    "acks": "all",
    "linger.ms": 20,
    "batch.size": 1_000_000,
    "queue.buffering.max.kbytes": 1_048_576,
    "queue.buffering.max.messages": 1_000_000,
}


@dataclass
class Sample:
    seconds: float
    cpu_seconds: float | None
    broker_cpu_seconds: float


@dataclass
class Row:
    label: str
    records: int
    payload_bytes: int
    note: str = ""
    samples: list[Sample] = field(default_factory=list)

    @property
    def seconds(self) -> float:
        return statistics.median(s.seconds for s in self.samples)

    @property
    def rate(self) -> float:
        return self.records / self.seconds

    @property
    def mb_per_s(self) -> float:
        return self.payload_bytes / self.seconds / 1_000_000

    @property
    def spread(self) -> float:
        rates = [self.records / s.seconds for s in self.samples]
        return (max(rates) - min(rates)) / self.rate

    def us_per_record(self, seconds: list[float | None]) -> str:
        known = [s for s in seconds if s is not None]
        return f"{statistics.median(known) / self.records * 1e6:.1f}" if known else "-"


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000, help="records in the source topic")
    parser.add_argument("--size", type=int, default=1024, help="bytes per record (key + value)")
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument(
        "--workers", type=int, default=2, help="tasks.max: local copy workers and Spark tasks"
    )
    parser.add_argument("--repeat", type=int, default=3, help="runs of every measurement (medians are shown)")
    parser.add_argument("--spark-master", default="local[2]")
    parser.add_argument("--heap", default="1g", help="maximum heap of each Kafka broker")
    parser.add_argument("--no-spark", action="store_true", help="skip the spark-submit measurement")
    parser.add_argument(
        "--profile", action="store_true", help="also print a cProfile of one worker copying one partition"
    )
    args = parser.parse_args()
    if min(args.records, args.partitions, args.workers, args.repeat) < 1 or args.size < 16:
        parser.error("--records, --partitions, --workers and --repeat must be >= 1, and --size >= 16")
    return args


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


class CpuMeter:
    """CPU seconds used between start() and stop(): by the processes this script waited for (the
    copying processes) and by the two brokers."""

    def __init__(self, clusters: list[LocalKafka]) -> None:
        self.brokers = [
            psutil.Process(n.process.pid) for c in clusters for n in c.nodes if n.process is not None
        ]
        self._start = (0.0, 0.0)

    def _now(self) -> tuple[float, float]:
        return children_cpu(), sum(sum(p.cpu_times()[:2]) for p in self.brokers)

    def start(self) -> None:
        self._start = self._now()

    def stop(self) -> tuple[float, float]:
        copying, brokers = self._now()
        return copying - self._start[0], brokers - self._start[1]


def in_child(meter: CpuMeter, fn: Callable[..., float], *args: Any) -> Sample:
    """Run fn (which times itself) in a new process; its CPU and the brokers' are measured here."""
    meter.start()
    with ProcessPoolExecutor(max_workers=1, mp_context=get_context("fork")) as pool:
        seconds = pool.submit(fn, *args).result()
    return Sample(seconds, *meter.stop())


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    client = AdminClient({"bootstrap.servers": bootstrap})
    client.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)


def delete_topic(bootstrap: str, topic: str) -> None:
    """Free the broker's memory for the next measurement."""
    client = AdminClient({"bootstrap.servers": bootstrap})
    client.delete_topics([topic])[topic].result(30)


def record_key(i: int) -> bytes:
    return b"%015d" % i


def produce_source(bootstrap: str, topic: str, records: int, size: int, partitions: int) -> float:
    producer = Producer({"bootstrap.servers": bootstrap, **SOURCE_PRODUCER})
    value = os.urandom(size - len(record_key(0)))
    started = time.perf_counter()
    for i in range(records):
        while True:
            try:
                producer.produce(topic, value=value, key=record_key(i), partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.01)
    if producer.flush(TIMEOUT_S):
        raise SystemExit(f"the source producer could not deliver every record within {TIMEOUT_S:.0f}s")
    return time.perf_counter() - started


def consume_source(bootstrap: str, records: int, partitions: int) -> float:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"bench-{uuid.uuid4().hex}", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(partitions)])
    seen = 0
    started = time.perf_counter()
    while seen < records:
        for message in consumer.consume(min(10_000, records - seen), timeout=1.0):
            if message.error() is not None:
                raise KafkaException(message.error())
            seen += 1
        if time.perf_counter() - started > TIMEOUT_S:
            raise SystemExit(f"consumed only {seen} of {records} records within {TIMEOUT_S:.0f}s")
    elapsed = time.perf_counter() - started
    consumer.close()
    return elapsed


def naive_copy(source: str, target: str, remote: str, records: int, partitions: int, tuned: bool) -> float:
    """What a user would write without mirrorflow: poll a batch, produce each record, flush once.

    `tuned` gives its consumer the settings mirrorflow's copy defaults to, to tell the copy
    engine's own cost apart from client tuning."""
    consumer_config = {"bootstrap.servers": source, "group.id": f"naive-{uuid.uuid4().hex}"}
    if tuned:
        consumer_config = {**CONSUMER_DEFAULTS, **consumer_config}
    consumer = Consumer({**consumer_config, "enable.auto.commit": False})
    producer = Producer({"bootstrap.servers": target})
    consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(partitions)])
    copied = 0
    started = time.perf_counter()
    while copied < records:
        for message in consumer.consume(min(1000, records - copied), timeout=1.0):
            if message.error() is not None:
                raise KafkaException(message.error())
            while True:
                try:
                    producer.produce(
                        remote,
                        value=message.value(),
                        key=message.key(),
                        partition=message.partition(),
                        headers=message.headers(),
                        timestamp=message.timestamp()[1],
                    )
                    break
                except BufferError:
                    producer.poll(0.05)
            copied += 1
        producer.poll(0)
        if time.perf_counter() - started > TIMEOUT_S:
            raise SystemExit(f"the naive loop copied only {copied} of {records} records in {TIMEOUT_S:.0f}s")
    if producer.flush(TIMEOUT_S):
        raise SystemExit("the naive loop's producer could not deliver every record")
    elapsed = time.perf_counter() - started
    consumer.close()
    return elapsed


def flow_aliases(kind: str, i: int) -> tuple[str, str]:
    return f"{kind}{i}src", f"{kind}{i}dst"


def config_text(source: str, target: str, workers: int, repeat: int) -> str:
    flows = [flow_aliases(kind, i) for kind in ("w", "s") for i in range(repeat)] + [PROFILE_FLOW]
    lines = [f"clusters = {', '.join(alias for flow in flows for alias in flow)}"]
    for src, dst in flows:
        lines += [
            f"{src}.bootstrap.servers = {source}",
            f"{dst}.bootstrap.servers = {target}",
            f"{src}->{dst}.enabled = true",
            f"{src}->{dst}.topics = {TOPIC}",
        ]
    lines += [
        f"tasks.max = {workers}",
        "replication.factor = 1",
        "offset-syncs.topic.replication.factor = 1",
        "checkpoints.topic.replication.factor = 1",
        "heartbeats.topic.replication.factor = 1",
        "offset.storage.replication.factor = 1",
        "emit.heartbeats.enabled = false",
    ]
    return "\n".join(lines) + "\n"


def copy_makespan(plan: Plan, units: list[dict[str, Any]], name: str) -> float:
    """Seconds the busiest worker spent: workers run in parallel, each its units one by one."""
    by_unit = {(u["topic"], u["partition"]): float(u[name]) for u in units}
    return max(sum(by_unit[(s.topic, s.partition)] for s in dealt) for dealt in plan.slices())


def check_units(what: str, units: list[dict[str, Any]], records: int) -> None:
    failed = [u for u in units if u.get("error")]
    if failed:
        raise SystemExit(
            f"{what} failed: {failed[0]['topic']}-{failed[0]['partition']}: {failed[0]['error']}"
        )
    copied = sum(int(u["records"]) for u in units)
    if copied != records:
        raise SystemExit(f"{what} copied {copied} records, expected {records}")


def timed_slice(job: Any, spans: list[Any]) -> tuple[list[Any], float]:
    """One worker's share, as runner.run_locally copies it, and the CPU the worker spent on it
    (its clients' set-up and the copy; not the interpreter's start and imports, which the
    with-start-up row counts)."""
    started = time.process_time()
    results = copy_slice(job, spans)
    return results, time.process_time() - started


def mirrorflow_workers(
    meter: CpuMeter, config_path: Path, aliases: tuple[str, str], records: int
) -> list[Sample]:
    """[steady, with start-up] of one exactly-once copy by local worker processes (spawned, as
    runner.run_locally spawns them)."""
    flow = load_config(str(config_path)).flow(*aliases)
    clients = FlowClients.resolve(flow)
    plan = make_plan(flow, clients, run_id=f"bench-{uuid.uuid4().hex[:8]}").plan
    job = copy_job_for(flow, clients, plan)
    slices = plan.slices()
    meter.start()
    started = time.perf_counter()
    with ProcessPoolExecutor(max_workers=len(slices), mp_context=get_context("spawn")) as pool:
        shares = [f.result() for f in [pool.submit(timed_slice, job, s) for s in slices]]
    wall = time.perf_counter() - started
    cpu, broker_cpu = meter.stop()
    results = [r for share, _ in shares for r in share]
    units = [vars(r) for r in results]
    check_units("the local copy", units, records)
    delete_topic(clients.target_admin["bootstrap.servers"], plan.spans[0].remote_topic)
    return [
        Sample(copy_makespan(plan, units, "copy_seconds"), sum(c for _, c in shares), broker_cpu),
        Sample(wall, cpu, broker_cpu),
    ]


def mirrorflow_spark(
    meter: CpuMeter, config_path: Path, aliases: tuple[str, str], records: int, master: str
) -> tuple[list[Sample], float]:
    """[steady, with start-up] of one copy by the Spark job, and the Spark start-up seconds."""
    source, target = aliases
    run_id = f"bench-{uuid.uuid4().hex[:8]}"
    planned = service.plan_run(str(config_path), source, target, run_id=run_id)
    command = [
        str(Path(sys.executable).parent / "spark-submit"),
        "--master",
        master,
        "--conf",
        "spark.ui.enabled=false",
        str(ROOT / "spark_apps" / "mirrorflow_copy.py"),
        "--config",
        str(config_path),
        "--flow",
        f"{source}->{target}",
        "--plan-offset",
        str(planned["plan_offset"]),
    ]
    env = {
        **os.environ,
        "PYSPARK_PYTHON": sys.executable,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    meter.start()
    started = time.perf_counter()
    proc = subprocess.run(command, env=env, capture_output=True, text=True, timeout=TIMEOUT_S)
    wall = time.perf_counter() - started
    cpu, broker_cpu = meter.stop()
    if proc.returncode != 0:
        raise SystemExit(f"spark-submit failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    flow = load_config(str(config_path)).flow(source, target)
    clients = FlowClients.resolve(flow)
    plan = Plan.from_json(run_reading.read_run_record(clients.target_consumer, planned["plan_offset"])[3])
    bodies = run_reading.wait_for_run_records(
        clients.target_consumer, flow.name, run_id, "report", start=planned["plan_offset"], timeout_s=30
    )
    units = RunReport.from_json(bodies[-1]).units
    check_units("the Spark copy", units, records)
    delete_topic(clients.target_admin["bootstrap.servers"], plan.spans[0].remote_topic)
    steady = copy_makespan(plan, units, "copy_seconds")
    startup = wall - copy_makespan(plan, units, "seconds")
    return [Sample(steady, None, broker_cpu), Sample(wall, cpu, broker_cpu)], startup


def profile_one_partition(config_path: Path) -> str:
    """cProfile of copy_unit over one partition of a flow of its own (nothing copied yet)."""
    flow = load_config(str(config_path)).flow(*PROFILE_FLOW)
    clients = FlowClients.resolve(flow)
    plan = make_plan(flow, clients, run_id="profile").plan
    job = copy_job_for(flow, clients, plan)
    span = plan.spans[0]
    profiler = cProfile.Profile()
    profiler.enable()
    result = copy_unit(job, span)
    profiler.disable()
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(25)
    return f"cProfile of one worker copying {span.topic}-{span.partition} ({result.records} records):\n{out.getvalue()}"


def machine_facts() -> list[str]:
    java = subprocess.run(["java", "-version"], capture_output=True, text=True)
    java_line = (java.stderr or java.stdout).splitlines()[0] if java.returncode == 0 else "not found"
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    memory = psutil.virtual_memory().total / 2**30
    return [
        f"machine: {platform.machine()} {platform.system()} {platform.release()}, "
        f"{os.cpu_count()} cores ({usable} usable), {memory:.0f} GiB",
        f"python {platform.python_version()}, confluent-kafka {confluent_kafka.__version__}, "
        f"librdkafka {confluent_kafka.libversion()[0]}, pyspark {importlib.metadata.version('pyspark')}, java: {java_line}",
        f"command: {shlex.join([sys.executable, *sys.argv])}",
        f"load average before the run: {' '.join(f'{x:.2f}' for x in os.getloadavg())}",
    ]


def table(rows: list[Row], baseline: Row) -> list[str]:
    head = (
        f"{'measurement':<36} {'seconds':>7} {'records/s':>10} {'MB/s':>7} {'spread':>6} "
        f"{'CPU us/rec':>10} {'brokers':>7} {'vs naive':>8}  note"
    )
    lines = [head, "-" * len(head)]
    for row in rows:
        cpu = row.us_per_record([s.cpu_seconds for s in row.samples])
        brokers = row.us_per_record([s.broker_cpu_seconds for s in row.samples])
        lines.append(
            f"{row.label:<36} {row.seconds:>7.2f} {row.rate:>10.0f} {row.mb_per_s:>7.1f} {row.spread:>6.0%} "
            f"{cpu:>10} {brokers:>7} {row.rate / baseline.rate:>7.2f}x  {row.note}"
        )
    return lines


def verdicts(rows: dict[str, Row]) -> list[str]:
    naive, ceiling = rows["naive"].rate, min(rows["produce"].rate, rows["consume"].rate)
    lines = []
    for name in ("workers", "spark"):
        steady = rows[name]
        if not steady.samples:
            continue
        for what, bound in (
            ("the naive loop", naive),
            ("half of min(produce-only, consume-only)", ceiling / 2),
        ):
            verdict = "met" if steady.rate >= bound else "MISSED"
            lines.append(
                f"target {verdict}: {steady.label} >= {what} ({steady.rate:.0f} vs {bound:.0f} records/s)"
            )
    workers = rows["workers"]
    cpu = statistics.median([s.cpu_seconds for s in workers.samples if s.cpu_seconds is not None])
    naive_cpu = statistics.median([s.cpu_seconds for s in rows["naive"].samples if s.cpu_seconds is not None])
    ratio = cpu / naive_cpu
    lines.append(
        f"target {'met' if ratio <= 2 else 'MISSED'}: {workers.label} CPU per record <= 2x the naive loop's "
        f"({ratio:.2f}x: {cpu / workers.records * 1e6:.1f} vs {naive_cpu / workers.records * 1e6:.1f} us)"
    )
    lines.append(
        f"target {'met' if workers.rate >= 0.8 * naive else 'MISSED'}: {workers.label} >= 0.8x the naive loop "
        f"({workers.rate / naive:.2f}x)"
    )
    lines.append(
        f"for reference: {rows['workers'].label} is {rows['workers'].rate / rows['tuned'].rate:.2f}x "
        f"the {rows['tuned'].label}"
    )
    return lines


@dataclass
class Results:
    rows: dict[str, Row]
    spark_startups: list[float]
    profile: str


def measure(args: argparse.Namespace, source: LocalKafka, target: LocalKafka, tmp: Path) -> Results:
    payload = args.records * args.size
    meter = CpuMeter([source, target])
    rows = {
        name: Row(label, args.records, payload, note)
        for name, label, note in (
            ("produce", "produce-only (source)", "tuned producer"),
            ("consume", "consume-only (source)", "1 consumer, all partitions"),
            ("naive", "naive consume->produce loop", "baseline: 1 process, librdkafka defaults"),
            ("tuned", "naive loop, mirrorflow's settings", "1 process"),
            ("workers", "mirrorflow workers, steady", f"{args.workers} processes, exactly-once"),
            ("workers_all", "mirrorflow workers, with start-up", "pool + clients"),
            ("spark", "mirrorflow Spark, steady", f"{args.workers} tasks, {args.spark_master}"),
            ("spark_all", "mirrorflow Spark, with start-up", "CPU incl. JVM"),
        )
    }
    create_topic(source.bootstrap, TOPIC, args.partitions)
    config_path = tmp / "bench.properties"
    config_path.write_text(config_text(source.bootstrap, target.bootstrap, args.workers, args.repeat))
    startups = []
    for i in range(args.repeat):
        sys.stderr.write(f"run {i + 1} of {args.repeat}\n")
        topic = TOPIC if i == 0 else f"{TOPIC}-produce-{i}"
        if i:
            create_topic(source.bootstrap, topic, args.partitions)
        rows["produce"].samples.append(
            in_child(meter, produce_source, source.bootstrap, topic, args.records, args.size, args.partitions)
        )
        if i:
            delete_topic(source.bootstrap, topic)
        rows["consume"].samples.append(
            in_child(meter, consume_source, source.bootstrap, args.records, args.partitions)
        )
        for name, tuned in (("naive", False), ("tuned", True)):
            remote = f"{name}-{i}.{TOPIC}"
            create_topic(target.bootstrap, remote, args.partitions)
            rows[name].samples.append(
                in_child(
                    meter,
                    naive_copy,
                    source.bootstrap,
                    target.bootstrap,
                    remote,
                    args.records,
                    args.partitions,
                    tuned,
                )
            )
            delete_topic(target.bootstrap, remote)
        steady, whole = mirrorflow_workers(meter, config_path, flow_aliases("w", i), args.records)
        rows["workers"].samples.append(steady)
        rows["workers_all"].samples.append(whole)
        if not args.no_spark:
            (steady, whole), startup = mirrorflow_spark(
                meter, config_path, flow_aliases("s", i), args.records, args.spark_master
            )
            rows["spark"].samples.append(steady)
            rows["spark_all"].samples.append(whole)
            startups.append(startup)
    profile = in_child_text(profile_one_partition, config_path) if args.profile else ""
    return Results(rows, startups, profile)


def in_child_text(fn: Callable[[Path], str], config_path: Path) -> str:
    with ProcessPoolExecutor(max_workers=1, mp_context=get_context("fork")) as pool:
        return pool.submit(fn, config_path).result()


def main() -> int:
    args = parse_args()
    out = sys.stdout
    for line in machine_facts():
        out.write(line + "\n")
    out.write(
        f"workload: {args.records} records of {args.size} B in {args.partitions} partitions, "
        f"{args.workers} copy workers, two single-node Apache Kafka {kafka_version()} clusters "
        f"(heap {args.heap} each), {args.repeat} runs each\n\n"
    )
    out.flush()
    with tempfile.TemporaryDirectory(prefix="mirrorflow-bench-") as tmp:
        source = LocalKafka(Path(tmp) / "source", overrides=QUICK_CLUSTER, heap=args.heap).start()
        target = LocalKafka(Path(tmp) / "target", overrides=QUICK_CLUSTER, heap=args.heap).start()
        try:
            results = measure(args, source, target, Path(tmp))
        finally:
            source.stop()
            target.stop()
    rows = results.rows
    for line in table([row for row in rows.values() if row.samples], rows["naive"]):
        out.write(line + "\n")
    if results.spark_startups:
        startup = statistics.median(results.spark_startups)
        out.write(f"\nSpark start-up (job wall time minus the copy's own time): {startup:.2f} s\n")
    out.write("\n")
    for line in verdicts(rows):
        out.write(line + "\n")
    if results.profile:
        out.write("\n" + results.profile)
    return 0


if __name__ == "__main__":
    sys.exit(main())
