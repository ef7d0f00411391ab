"""Verify throughput: a full verification of a copy against the copy itself, same data, same brokers.

The issue's target: a full verify of 1,000,000 records of 1 KiB runs at least as fast as the
copy of the same data. Starts two real Apache Kafka clusters (source and target: single KRaft
nodes from localkafka, the pinned version of kafka/pom.xml), fills a source topic of
--partitions partitions with --records records of --size bytes, and measures in one run:

- the copy: one `mirrorflow replicate` run (commands.replicate.run_flow, what the command runs:
  plan, local worker processes at tasks.max, report and summary; exactly-once);
- a full verification of that copy (verify_service.run_locally, what `mirrorflow verify` runs:
  plan, compare in local worker processes at tasks.max, report and summary);
- a sampled verification (--sample, `mirrorflow verify --sample`);
- the consume ceilings: plain read_committed consumers with the copy's fetch settings reading the
  source topic, the remote topic, and both sides in tasks.max processes dealt as a verification
  deals its partitions (what a verification that did nothing but read could reach).

Each mirrorflow row has two times: the whole call (process start-up, planning, stored reports
included: what a user waits for) and steady, the busiest worker's own copy or compare seconds
from the run's stored report (the ceilings' steady time is their busiest reader's). Rates count
source records (a verification reads each twice: once per side; the sampled one counts those its
stretches compared) over the whole time; MB/s is their payload; "vs copy" is the time over the
copy's.
CPU per record is the CPU of this process and the workers it waited for; brokers is the two
Kafka JVMs' CPU; others is the CPU the rest of the machine used meanwhile, in cores (the
machine load a figure was measured under).

Every measurement runs --repeat times (medians shown, spread = (max - min) / median of the
rates). Each round copies through its own cluster aliases naming the same two brokers, so it
starts from empty progress and writes its own remote topic, which is deleted after the round.

Run: `.venv/bin/python benchmarks/verify.py` (the issue's workload; `--records 100000` for a quick
look; `--profile` adds a cProfile of one worker comparing one partition).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import platform
import pstats
import resource
import shlex
import statistics
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
from rich.console import Console

from localkafka import QUICK_CLUSTER, LocalKafka, kafka_version
from mirrorflow.clients import FlowClients
from mirrorflow.commands.replicate import run_flow
from mirrorflow.config import load_config
from mirrorflow.ops.verification import service as verify_service
from mirrorflow.ops.verification.compare import compare_partition
from mirrorflow.ops.verification.plan import PLAN_KIND, VerifyPlan, plan_verify
from mirrorflow.ops.verification.reader import PartitionReader
from mirrorflow.ops.verification.report import REPORT_KIND
from mirrorflow.ops.verification.run import compare_job_for
from mirrorflow.replicate import run_reading
from mirrorflow.replicate.copy import CONSUMER_DEFAULTS
from mirrorflow.replicate.report import RunReport

TOPIC = "bench"
TIMEOUT_S = 1200.0
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
    steady: float
    cpu_seconds: float
    broker_cpu_seconds: float
    other_cores: float


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
    def steady(self) -> float:
        return statistics.median(s.steady for s in self.samples)

    @property
    def rate(self) -> float:
        return self.records / self.seconds

    @property
    def spread(self) -> float:
        rates = [self.records / s.seconds for s in self.samples]
        return (max(rates) - min(rates)) / self.rate

    def per_record_us(self, name: str) -> float:
        return statistics.median(getattr(s, name) for s in self.samples) / self.records * 1e6


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000, help="records in the source topic")
    parser.add_argument("--size", type=int, default=1024, help="bytes per record (key + value)")
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--workers", type=int, default=2, help="tasks.max: copy and verify workers")
    parser.add_argument("--sample", type=float, default=0.1, help="fraction of the sampled verification")
    parser.add_argument(
        "--repeat", type=int, default=1, help="rounds of every measurement (medians are shown)"
    )
    parser.add_argument("--heap", default="1g", help="maximum heap of each Kafka broker")
    parser.add_argument(
        "--profile", action="store_true", help="also print a cProfile of one worker comparing one partition"
    )
    args = parser.parse_args()
    if min(args.records, args.partitions, args.workers, args.repeat) < 1 or args.size < 16:
        parser.error("--records, --partitions, --workers and --repeat must be >= 1, and --size >= 16")
    if not 0 < args.sample <= 1:
        parser.error("--sample must be a fraction in (0, 1]")
    return args


# -- measuring --------------------------------------------------------------------------------


def busy_cpu_seconds() -> float:
    """CPU seconds all cores of the machine spent busy since boot."""
    times = psutil.cpu_times()
    return sum(times) - times.idle - getattr(times, "iowait", 0.0)


def own_cpu_seconds() -> float:
    """This process's CPU and that of the children it waited for (the worker processes)."""
    total = 0.0
    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
        usage = resource.getrusage(who)
        total += usage.ru_utime + usage.ru_stime
    return total


class Meter:
    """CPU seconds between start() and stop(): ours, the brokers', and the rest of the machine's."""

    def __init__(self, clusters: list[LocalKafka]) -> None:
        self.brokers = [
            psutil.Process(n.process.pid) for c in clusters for n in c.nodes if n.process is not None
        ]
        self._start = (0.0, 0.0, 0.0, 0.0)

    def _now(self) -> tuple[float, float, float, float]:
        brokers = sum(sum(p.cpu_times()[:2]) for p in self.brokers)
        return time.perf_counter(), own_cpu_seconds(), brokers, busy_cpu_seconds()

    def start(self) -> None:
        self._start = self._now()

    def sample(self, steady: float | None = None) -> Sample:
        """The measurement since start(); `steady` defaults to the wall time."""
        now = self._now()
        wall, ours, brokers, busy = (b - a for a, b in zip(self._start, now, strict=True))
        return Sample(wall, wall if steady is None else steady, ours, brokers, (busy - ours - brokers) / wall)


# -- source data and plain consumers ----------------------------------------------------------


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    client = AdminClient({"bootstrap.servers": bootstrap})
    client.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)


def delete_topic(bootstrap: str, topic: str) -> None:
    client = AdminClient({"bootstrap.servers": bootstrap})
    client.delete_topics([topic])[topic].result(30)


def produce_source(bootstrap: str, records: int, size: int, partitions: int) -> float:
    producer = Producer({"bootstrap.servers": bootstrap, **SOURCE_PRODUCER})
    value = os.urandom(size - 15)
    started = time.perf_counter()
    for i in range(records):
        while True:
            try:
                producer.produce(TOPIC, value=value, key=b"%015d" % i, partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.01)
    if producer.flush(TIMEOUT_S):
        raise SystemExit(f"the source producer could not deliver every record within {TIMEOUT_S:.0f}s")
    return time.perf_counter() - started


def per_partition(records: int, partitions: list[int], of: int) -> dict[int, int]:
    """How many of `records` dealt round-robin over `of` partitions the given partitions hold."""
    return {p: records // of + (p < records % of) for p in partitions}


def read_plain(sides: list[tuple[str, str, dict[int, int]]]) -> float:
    """Read (bootstrap, topic, {partition: records}) one side after the other with a plain
    read_committed consumer and the copy's fetch settings; seconds spent reading. It asks for no
    more than the records left, so its last batch does not wait out consume()'s timeout."""
    seconds = 0.0
    for bootstrap, topic, counts in sides:
        consumer = Consumer(
            {
                **CONSUMER_DEFAULTS,
                "bootstrap.servers": bootstrap,
                "group.id": f"bench-{uuid.uuid4().hex}",
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
            }
        )
        consumer.assign([TopicPartition(topic, p, 0) for p in counts])
        left = sum(counts.values())
        started = time.perf_counter()
        while left:
            for message in consumer.consume(min(5000, left), timeout=1.0):
                if message.error() is not None:
                    raise KafkaException(message.error())
                left -= 1
            if time.perf_counter() - started > TIMEOUT_S:
                raise SystemExit(f"{topic} was not read to its end within {TIMEOUT_S:.0f}s")
        seconds += time.perf_counter() - started
        consumer.close()
    return seconds


def plain_read(meter: Meter, shares: list[list[tuple[str, str, list[int]]]]) -> Sample:
    """Each share read by a process of its own, all at once; steady is the slowest reader's time."""
    meter.start()
    with ProcessPoolExecutor(max_workers=len(shares), mp_context=get_context("spawn")) as pool:
        steady = max(pool.map(read_plain, shares))
    return meter.sample(steady)


# -- mirrorflow -------------------------------------------------------------------------------


def flow_aliases(i: int) -> tuple[str, str]:
    return f"r{i}src", f"r{i}dst"


def config_text(source: str, target: str, workers: int, repeat: int) -> str:
    flows = [flow_aliases(i) for i in range(repeat)]
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


def busiest(slices: list[list[Any]], seconds: dict[tuple[str, int], float]) -> float:
    """Seconds the busiest worker spent: workers run side by side, each its partitions in turn."""
    return max(sum(seconds[(s.topic, s.partition)] for s in dealt) for dealt in slices)


def replicate(meter: Meter, config_path: Path, aliases: tuple[str, str], records: int) -> tuple[Sample, str]:
    """One `mirrorflow replicate` run; the sample and the remote topic it wrote."""
    config = load_config(str(config_path))
    flow = config.flow(*aliases)
    clients = FlowClients.resolve(flow)
    run_id = f"bench-copy-{uuid.uuid4().hex[:8]}"
    meter.start()
    outcome = run_flow(
        Console(file=io.StringIO()), config, flow, clients, run_id=run_id, mode="replicate", passes=1
    )
    whole = meter.sample()
    if outcome.failure:
        raise SystemExit(f"the copy failed: {outcome.failure}")
    bodies = run_reading.wait_for_run_records(
        clients.target_consumer, flow.name, run_id, "report", start=outcome.planned["plan_offset"]
    )
    units = RunReport.from_json(bodies[-1]).units
    copied = sum(int(u["records"]) for u in units)
    if copied != records:
        raise SystemExit(f"the copy copied {copied} records, expected {records}")
    whole.steady = busiest(
        outcome.plan.slices(), {(u["topic"], u["partition"]): float(u["copy_seconds"]) for u in units}
    )
    return whole, outcome.plan.spans[0].remote_topic


def verification(
    meter: Meter, config_path: Path, aliases: tuple[str, str], records: int, sample: float | None
) -> tuple[Sample, int]:
    """One `mirrorflow verify` run (full, or sampled), and the records it compared; fails unless
    it passed."""
    run_id = f"bench-verify-{uuid.uuid4().hex[:8]}"
    meter.start()
    summary = verify_service.run_locally(str(config_path), *aliases, run_id=run_id, sample=sample)
    whole = meter.sample()
    totals = summary["totals"]
    if sample is None and (summary["verdict"] != "verified" or totals["matched"] != records):
        raise SystemExit(f"the full verification did not verify {records} records: {summary}")
    if sample is not None and (summary["verdict"] != "sample passed" or not totals["matched"]):
        raise SystemExit(f"the sampled verification did not pass: {summary}")
    flow = load_config(str(config_path)).flow(*aliases)
    clients = FlowClients.resolve(flow)
    plan_body = run_reading.wait_for_run_records(
        clients.target_consumer, flow.name, run_id, PLAN_KIND, start=0
    )
    report_body = run_reading.wait_for_run_records(
        clients.target_consumer, flow.name, run_id, REPORT_KIND, start=0
    )
    plan = VerifyPlan.from_json(json.dumps(plan_body[-1]))
    seconds = {(c["topic"], c["partition"]): float(c["seconds"]) for c in report_body[-1]["checks"]}
    whole.steady = busiest(plan.slices(), seconds)
    return whole, totals["matched"]


def profile_one_partition(config_path: Path, aliases: tuple[str, str]) -> str:
    """cProfile of compare_partition over the largest partition of a copied flow."""
    flow = load_config(str(config_path)).flow(*aliases)
    clients = FlowClients.resolve(flow)
    plan = plan_verify(flow, clients, run_id="profile")
    job = compare_job_for(flow, clients, plan)
    span = max(plan.spans, key=lambda s: s.offsets)
    source = PartitionReader(job.source_consumer, "source", f"mirrorflow-{job.source}->{job.target}")
    target = PartitionReader(job.target_consumer, "target", "mirrorflow-reader")
    profiler = cProfile.Profile()
    profiler.enable()
    check = compare_partition(job, span, source, target)
    profiler.disable()
    source.close()
    target.close()
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(20)
    return (
        f"cProfile of one worker comparing {span.topic}-{span.partition} "
        f"({check.matched} records matched, {check.seconds:.2f} s under the profiler):\n{out.getvalue()}"
    )


# -- the run ----------------------------------------------------------------------------------


@dataclass
class Results:
    rows: dict[str, Row]
    produce_seconds: float
    profile: str = ""


def measure(args: argparse.Namespace, source: LocalKafka, target: LocalKafka, tmp: Path) -> Results:
    payload = args.records * args.size
    meter = Meter([source, target])
    w = args.workers
    rows = {
        name: Row(label, args.records, payload, note)
        for name, label, note in (
            ("copy", "copy (mirrorflow replicate)", f"{w} workers, exactly-once"),
            ("verify", "full verify (mirrorflow verify)", f"{w} workers, every record"),
            ("sample", f"sampled verify (--sample {args.sample:g})", f"{w} workers"),
            ("read_source", "plain read: source", "1 consumer"),
            ("read_target", "plain read: target", "1 consumer"),
            ("read_both", "plain read: both sides", f"{w} processes, dealt as verify"),
        )
    }
    create_topic(source.bootstrap, TOPIC, args.partitions)
    produce_seconds = produce_source(source.bootstrap, args.records, args.size, args.partitions)
    config_path = tmp / "bench.properties"
    config_path.write_text(config_text(source.bootstrap, target.bootstrap, args.workers, args.repeat))
    profile = ""
    for i in range(args.repeat):
        sys.stderr.write(f"round {i + 1} of {args.repeat}: copy\n")
        aliases = flow_aliases(i)
        copy, remote = replicate(meter, config_path, aliases, args.records)
        rows["copy"].samples.append(copy)
        sys.stderr.write(f"round {i + 1} of {args.repeat}: plain reads\n")
        every = list(range(args.partitions))
        counts = per_partition(args.records, every, args.partitions)
        rows["read_source"].samples.append(plain_read(meter, [[(source.bootstrap, TOPIC, counts)]]))
        rows["read_target"].samples.append(plain_read(meter, [[(target.bootstrap, remote, counts)]]))
        dealt = [every[k :: args.workers] for k in range(min(args.workers, args.partitions))]
        shares = []
        for parts in dealt:
            share = per_partition(args.records, parts, args.partitions)
            shares.append([(source.bootstrap, TOPIC, share), (target.bootstrap, remote, share)])
        rows["read_both"].samples.append(plain_read(meter, shares))
        sys.stderr.write(f"round {i + 1} of {args.repeat}: verify\n")
        rows["verify"].samples.append(verification(meter, config_path, aliases, args.records, None)[0])
        sampled, compared = verification(meter, config_path, aliases, args.records, args.sample)
        rows["sample"].samples.append(sampled)
        # Its rate counts the records it compared (the stretches differ from round to round).
        rows["sample"].records = compared
        rows["sample"].payload_bytes = compared * args.size
        if args.profile and i == 0:
            profile = in_child(profile_one_partition, config_path, aliases)
        delete_topic(target.bootstrap, remote)
    return Results(rows, produce_seconds, profile)


def in_child(fn: Callable[..., str], *args: Any) -> str:
    with ProcessPoolExecutor(max_workers=1, mp_context=get_context("spawn")) as pool:
        return pool.submit(fn, *args).result()


def machine_facts() -> list[str]:
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    memory = psutil.virtual_memory().total / 2**30
    return [
        f"machine: {platform.machine()} {platform.system()} {platform.release()}, "
        f"{os.cpu_count()} cores ({usable} usable), {memory:.0f} GiB",
        f"python {platform.python_version()}, confluent-kafka {confluent_kafka.__version__}, "
        f"librdkafka {confluent_kafka.libversion()[0]}",
        f"command: {shlex.join([sys.executable, *sys.argv])}",
        f"load average before the run: {' '.join(f'{x:.2f}' for x in os.getloadavg())}",
    ]


def table(rows: list[Row], copy: Row) -> list[str]:
    head = (
        f"{'measurement':<38} {'seconds':>7} {'steady':>7} {'records/s':>10} {'MB/s':>6} {'spread':>6} "
        f"{'CPU us/rec':>10} {'brokers':>7} {'others':>6} {'vs copy':>7}  note"
    )
    lines = [head, "-" * len(head)]
    for row in rows:
        others = statistics.median(s.other_cores for s in row.samples)
        lines.append(
            f"{row.label:<38} {row.seconds:>7.2f} {row.steady:>7.2f} {row.rate:>10.0f} "
            f"{row.payload_bytes / row.seconds / 1e6:>6.1f} {row.spread:>6.0%} "
            f"{row.per_record_us('cpu_seconds'):>10.1f} {row.per_record_us('broker_cpu_seconds'):>7.1f} "
            f"{others:>6.2f} {row.seconds / copy.seconds:>6.2f}x  {row.note}"
        )
    return lines


def verdicts(rows: dict[str, Row]) -> list[str]:
    copy, full = rows["copy"], rows["verify"]
    ratio = full.seconds / copy.seconds
    verdict = "met" if full.seconds <= copy.seconds else "MISSED"
    ceiling = rows["read_both"]
    return [
        f"target {verdict}: full verify <= copy of the same data "
        f"({full.seconds:.2f} s vs {copy.seconds:.2f} s, verify/copy {ratio:.2f}; "
        f"steady {full.steady:.2f} s vs {copy.steady:.2f} s, {full.steady / copy.steady:.2f})",
        f"full verify steady vs the plain read of both sides: {full.steady:.2f} s vs {ceiling.steady:.2f} s "
        f"({ceiling.steady / full.steady:.0%} of the read ceiling)",
        f"sampled verify / full verify: {rows['sample'].seconds / full.seconds:.2f}",
    ]


def main() -> int:
    args = parse_args()
    out = sys.stdout
    for line in machine_facts():
        out.write(line + "\n")
    out.write(
        f"workload: {args.records} records of {args.size} B in {args.partitions} partitions, "
        f"tasks.max = {args.workers}, two single-node Apache Kafka {kafka_version()} clusters "
        f"(heap {args.heap} each), {args.repeat} round(s)\n\n"
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
    out.write(f"source filled in {results.produce_seconds:.1f} s\n")
    for line in table(list(rows.values()), rows["copy"]):
        out.write(line + "\n")
    out.write("\n")
    for line in verdicts(rows):
        out.write(line + "\n")
    out.write(f"load average after the run: {' '.join(f'{x:.2f}' for x in os.getloadavg())}\n")
    if results.profile:
        out.write("\n" + results.profile)
    return 0


if __name__ == "__main__":
    sys.exit(main())
