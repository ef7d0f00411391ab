"""MirrorMaker 2 against mirrorflow: the same brokers, the same data, one run.

Two single-node Apache Kafka clusters (localkafka, the version pinned in kafka/pom.xml) hold the
source and the target. For each data set (by default 1,000,000 records of 1 KiB and 1,000,000 of
100 bytes over 8 partitions) every replicator copies the whole topic into a remote topic of its
own, --repeat times:

- MM2 at-least-once: real MirrorMaker 2 in dedicated mode with its defaults (one task per
  partition up to tasks.max);
- MM2 exactly-once: the same with `exactly.once.source.support = enabled` on the target and a
  read_committed source consumer (KIP-618/656);
- mirrorflow CLI: `mirrorflow replicate` (exactly-once, local worker processes);
- mirrorflow Spark: the replicate plan, then `spark-submit spark_apps/mirrorflow_copy.py`.

All get `tasks.max` = --tasks. A counting consumer reads every remote topic read_committed while
it fills, so each row's times are what a consumer of the target sees: time to the first copied
record, steady records/s and MB/s (between 10% and 90% of the records), time until every record
is readable, CPU seconds per million records of the replicator's processes (from /proc, the
whole process tree: JVM, workers, Spark), and the bytes the remote topic takes on the target's
disk. Each replicator starts from nothing (its own aliases, so its own progress and remote topic).

Part 2 measures failover. One source topic is copied by MM2 (with its checkpoint connector on)
and by mirrorflow (with its checkpoint job), groups are committed on the source at the end of a
partition, within its last 100 records and anywhere before, and each tool's checkpoints are
compared with where each group must resume on the target (found by record key): records
re-delivered, and skipped, per group partition.

Run: `.venv/bin/python benchmarks/vs_mm2.py` (options: --help; `--records 200000` for a quick look).
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import psutil
from _clusters import SINGLE_NODE_REPLICATION, two_clusters
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from localkafka import LocalKafka, kafka_version
from localkafka.mirrormaker import SINGLE_BROKER_WORKER, MirrorMaker
from mirrorflow.clients import FlowClients
from mirrorflow.config import load_config
from mirrorflow.control.checkpoints import checkpoint_pass
from mirrorflow.control.groups import Committed, commit_offsets
from mirrorflow.kafka import admin_client, await_topics, read_partition
from mirrorflow.mm2.formats import Checkpoint
from mirrorflow.replicate import service

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
TIMEOUT_S = 900.0
KINDS = {"at the end": 1, "caught-up (last 100)": 100, "lagging (anywhere)": 10**12}


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000, help="records per data set")
    parser.add_argument(
        "--sizes", default="1024,100", help="record sizes in bytes (key + value), comma-separated"
    )
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--tasks", type=int, default=2, help="tasks.max for every replicator")
    parser.add_argument("--repeat", type=int, default=2, help="runs of every replicator per data set")
    parser.add_argument("--only", default="", help="replicators to run (comma-separated names), default all")
    parser.add_argument("--spark-master", default="local[2]")
    parser.add_argument("--failover-records", type=int, default=200_000, help="records in part 2's topic")
    parser.add_argument("--groups", type=int, default=20, help="groups per partition and kind in part 2")
    parser.add_argument("--heap", default="1g", help="heap of each Kafka broker")
    parser.add_argument("--seed", type=int, default=1)
    return parser.parse_args()


# -- data ----------------------------------------------------------------------------------------


def key_of(i: int) -> bytes:
    return b"%016d" % i


def fill(bootstrap: str, topic: str, records: int, size: int, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(60)
    await_topics(admin, {topic: partitions})
    producer = Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1_000_000, "acks": "all"}
    )
    value = os.urandom(max(0, size - 16))
    for i in range(records):
        while True:
            try:
                producer.produce(topic, key=key_of(i), value=value, partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.01)
    if producer.flush(TIMEOUT_S):
        raise SystemExit(f"could not write the {topic} data set")


def topic_bytes_on_disk(kafka: LocalKafka, topic: str) -> int:
    total = 0
    for node in kafka.nodes:
        for directory in (node.directory / "data").glob(f"{topic}-*"):
            if directory.name.rsplit("-", 1)[0] == topic and directory.name.rsplit("-", 1)[1].isdigit():
                # Segment files only: index files are preallocated (sparse) and say nothing of the data.
                total += sum(f.stat().st_size for f in directory.glob("*.log"))
    return total


# -- measuring a copy ----------------------------------------------------------------------------


class Counter(threading.Thread):
    """Reads a remote topic read_committed as it fills and notes when records arrive."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, records: int) -> None:
        super().__init__(daemon=True)
        self.bootstrap, self.topic, self.partitions, self.records = bootstrap, topic, partitions, records
        self.started = time.monotonic()
        self.timeline: list[tuple[float, int]] = []
        self.done = threading.Event()
        self.stop_now = threading.Event()

    def run(self) -> None:
        consumer = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": f"bench-count-{uuid.uuid4().hex}",
                "isolation.level": "read_committed",
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "topic.metadata.refresh.interval.ms": 500,
                "log_level": 3,
            }
        )
        consumer.assign([TopicPartition(self.topic, p, 0) for p in range(self.partitions)])
        seen = 0
        try:
            while seen < self.records and not self.stop_now.is_set():
                batch = consumer.consume(10_000, timeout=0.2)
                got = sum(1 for m in batch if m.error() is None)
                if got:
                    seen += got
                    self.timeline.append((time.monotonic() - self.started, seen))
        finally:
            consumer.close()
            self.done.set()

    def at(self, count: int) -> float:
        return next(t for t, seen in self.timeline if seen >= count)


def tree_cpu(process: psutil.Process) -> float:
    """CPU seconds of a process and all its descendants: those alive, and those they waited for."""
    total = 0.0
    for p in [process, *process.children(recursive=True)]:
        try:
            times = p.cpu_times()
            total += times.user + times.system + times.children_user + times.children_system
        except psutil.NoSuchProcess:
            continue
    return total


def reap(process: subprocess.Popen) -> float | None:
    """If the replicator has exited: collect it and return the CPU seconds of it and of every
    descendant it waited for (from wait4's resource usage); None while it runs."""
    if process.returncode is not None:
        return None
    pid, status, usage = os.wait4(process.pid, os.WNOHANG)
    if pid == 0:
        return None
    process.returncode = os.waitstatus_to_exitcode(status)
    return usage.ru_utime + usage.ru_stime


@dataclass
class Measure:
    first_s: float
    steady_rps: float
    caught_up_s: float
    cpu_s: float
    steady_cpu_s: float
    disk_bytes: int


@dataclass
class Row:
    name: str
    size: int
    records: int
    measures: list[Measure] = field(default_factory=list)

    def median(self, attribute: str) -> float:
        return statistics.median(getattr(m, attribute) for m in self.measures)


def watch(
    start: Callable[[], subprocess.Popen],
    target: LocalKafka,
    remote: str,
    records: int,
    partitions: int,
    *,
    stop: Callable[[subprocess.Popen], None],
) -> Measure:
    counter = Counter(target.bootstrap, remote, partitions, records)
    started = time.monotonic()
    counter.started = started
    process = start()
    ps = psutil.Process(process.pid)
    counter.start()
    marks: dict[str, float] = {}
    cpu_now = 0.0
    exited: float | None = None  # the whole tree's CPU seconds once the replicator has exited
    while not counter.done.wait(0.2):
        if exited is None:
            exited = reap(process)
        cpu_now = max(cpu_now, tree_cpu(ps) if exited is None else exited)
        seen = counter.timeline[-1][1] if counter.timeline else 0
        if "low" not in marks and seen >= records * 0.1:
            marks["low"] = cpu_now
        if "high" not in marks and seen >= records * 0.9:
            marks["high"] = cpu_now
        if time.monotonic() - started > TIMEOUT_S:
            counter.stop_now.set()
            stop(process)
            raise SystemExit(f"{remote}: only {seen} of {records} records readable after {TIMEOUT_S:.0f}s")
        if process.returncode not in (None, 0) and not counter.timeline:
            raise SystemExit(
                f"{remote}: the replicator exited with {process.returncode} before copying anything"
            )
    if exited is None:
        exited = reap(process)
    cpu_now = max(cpu_now, tree_cpu(ps) if exited is None else exited)
    stop(process)
    caught_up = counter.at(records)
    first = counter.at(1)
    low, high = counter.at(int(records * 0.1)), counter.at(int(records * 0.9))
    steady = (int(records * 0.9) - int(records * 0.1)) / max(1e-6, high - low)
    steady_cpu = marks.get("high", cpu_now) - marks.get("low", 0.0)
    return Measure(first, steady, caught_up, cpu_now, steady_cpu, topic_bytes_on_disk(target, remote))


# -- the replicators ---------------------------------------------------------------------------


def properties(path: Path, source: LocalKafka, target: LocalKafka, src: str, dst: str, extra: str) -> Path:
    path.write_text(
        f"clusters = {src}, {dst}\n"
        f"{src}.bootstrap.servers = {source.bootstrap}\n"
        f"{dst}.bootstrap.servers = {target.bootstrap}\n"
        f"{src}->{dst}.enabled = true\n"
        f"{dst}->{src}.enabled = false\n"
        + SINGLE_NODE_REPLICATION
        + SINGLE_BROKER_WORKER
        + "emit.heartbeats.enabled = false\n"
        + extra
    )
    return path


def mm2_properties(
    path: Path, source: LocalKafka, target: LocalKafka, src: str, dst: str, extra: str, exactly_once: bool
) -> Path:
    """MM2's properties for flow src->dst: `properties`, and with `exactly_once` what KIP-618
    asks of a dedicated MM2 (exactly-once source support on the target, a read_committed source
    consumer, the internal REST server its task fencing needs, on a free port)."""
    if exactly_once:
        extra += (
            f"{dst}.exactly.once.source.support = enabled\n"
            f"{src}->{dst}.exactly.once.support = required\n"
            f"{src}.consumer.isolation.level = read_committed\n"
            "dedicated.mode.enable.internal.rest = true\n"
            f"listeners = http://127.0.0.1:{free_port()}\n"
        )
    return properties(path, source, target, src, dst, extra)


def mm2_runner(exactly_once: bool, settings: str = "") -> Callable[..., Measure]:
    """`settings`: more properties lines, with {src} and {dst} standing for the run's aliases."""

    def run(ctx: Context, topic: str, size: int, records: int) -> Measure:
        src, dst = ctx.aliases("m")
        extra = f"{src}->{dst}.topics = {topic}\ntasks.max = {ctx.args.tasks}\n" + settings.format(
            src=src, dst=dst
        )
        path = mm2_properties(
            ctx.tmp / f"{src}.properties", ctx.source, ctx.target, src, dst, extra, exactly_once
        )
        mm2 = MirrorMaker(path, ctx.tmp / f"mm2-{src}", clusters=(dst,))
        return watch(
            lambda: mm2.start().process,  # type: ignore[return-value]
            ctx.target,
            f"{src}.{topic}",
            records,
            ctx.args.partitions,
            stop=lambda _p: mm2.stop(timeout_s=60),
        )

    return run


def mirrorflow_cli(ctx: Context, topic: str, size: int, records: int, settings: str = "") -> Measure:
    """`settings` as for mm2_runner."""
    src, dst = ctx.aliases("c")
    extra = f"{src}->{dst}.topics = {topic}\ntasks.max = {ctx.args.tasks}\n" + settings.format(
        src=src, dst=dst
    )
    path = properties(ctx.tmp / f"{src}.properties", ctx.source, ctx.target, src, dst, extra)
    log = open(ctx.tmp / f"{src}.log", "wb")  # noqa: SIM115 - closed after the run

    def start() -> subprocess.Popen:
        return subprocess.Popen(
            [str(BIN / "mirrorflow"), "replicate", str(path), "--flow", f"{src}->{dst}"],
            stdout=log,
            stderr=subprocess.STDOUT,
        )

    def stop(process: subprocess.Popen) -> None:
        if process.wait(TIMEOUT_S) != 0:
            raise SystemExit(f"mirrorflow replicate failed; see {ctx.tmp / f'{src}.log'}")
        log.close()

    return watch(start, ctx.target, f"{src}.{topic}", records, ctx.args.partitions, stop=stop)


def spark_submit(master: str, app: str, config: Path, flow: str, plan_offset: int) -> list[str]:
    """spark-submit of one of mirrorflow's Spark applications for a stored plan."""
    return [
        str(BIN / "spark-submit"),
        "--master",
        master,
        "--conf",
        "spark.ui.enabled=false",
        "--conf",
        "spark.speculation=false",
        str(ROOT / "spark_apps" / app),
        "--config",
        str(config),
        "--flow",
        flow,
        "--plan-offset",
        str(plan_offset),
    ]


def spark_env() -> dict[str, str]:
    return {**os.environ, "PYSPARK_PYTHON": sys.executable, "PATH": f"{BIN}:{os.environ['PATH']}"}


def mirrorflow_spark(ctx: Context, topic: str, size: int, records: int) -> Measure:
    src, dst = ctx.aliases("s")
    extra = f"{src}->{dst}.topics = {topic}\ntasks.max = {ctx.args.tasks}\n"
    path = properties(ctx.tmp / f"{src}.properties", ctx.source, ctx.target, src, dst, extra)
    planned = service.plan_run(str(path), src, dst, run_id=f"bench-{uuid.uuid4().hex[:8]}")
    log = open(ctx.tmp / f"{src}.log", "wb")  # noqa: SIM115 - closed after the run

    def start() -> subprocess.Popen:
        command = spark_submit(
            ctx.args.spark_master, "mirrorflow_copy.py", path, f"{src}->{dst}", planned["plan_offset"]
        )
        return subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=spark_env())

    def stop(process: subprocess.Popen) -> None:
        if process.wait(TIMEOUT_S) != 0:
            raise SystemExit(f"the Spark copy failed; see {ctx.tmp / f'{src}.log'}")
        log.close()

    return watch(start, ctx.target, f"{src}.{topic}", records, ctx.args.partitions, stop=stop)


REPLICATORS: dict[str, Callable[..., Measure]] = {
    "MM2 at-least-once": mm2_runner(False),
    "MM2 exactly-once": mm2_runner(True),
    "mirrorflow CLI (exactly-once)": mirrorflow_cli,
    "mirrorflow Spark (exactly-once)": mirrorflow_spark,
}


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class Context:
    args: argparse.Namespace
    source: LocalKafka
    target: LocalKafka
    tmp: Path
    counter: int = 0

    def aliases(self, kind: str) -> tuple[str, str]:
        self.counter += 1
        return f"{kind}{self.counter}src", f"{kind}{self.counter}dst"


# -- part 2: failover ----------------------------------------------------------------------------


def target_positions(bootstrap: str, remote: str, partition: int) -> tuple[dict[bytes, int], list[int]]:
    """Per key, its offset on the target; and every record offset, in order."""
    by_key: dict[bytes, int] = {}
    offsets: list[int] = []
    for message in read_partition({"bootstrap.servers": bootstrap}, remote, partition):
        by_key.setdefault(message.key(), message.offset())
        offsets.append(message.offset())
    return by_key, offsets


def latest_checkpoints(bootstrap: str, topic: str) -> dict[tuple[str, int], int]:
    """The newest checkpoint per (group, partition) in a checkpoints topic."""
    found: dict[tuple[str, int], int] = {}
    for message in read_partition({"bootstrap.servers": bootstrap}, topic, 0):
        checkpoint = Checkpoint.decode(message.key(), message.value())
        found[(checkpoint.group, checkpoint.partition)] = checkpoint.downstream_offset
    return found


def failover_part(ctx: Context, console_rows: list[list[str]]) -> None:
    args, rng = ctx.args, random.Random(ctx.args.seed)
    topic = "failover"
    fill(ctx.source.bootstrap, topic, args.failover_records, 200, args.partitions)
    per_partition = args.failover_records // args.partitions
    groups: dict[str, dict[tuple[str, int], Committed]] = {}
    truth: dict[tuple[str, int], int] = {}  # (group, partition) -> source offset to resume at
    for kind, behind in KINDS.items():
        for g in range(args.groups):
            name = f"{kind.split()[0]}-{g}"
            offsets = {}
            for p in range(args.partitions):
                position = per_partition - rng.randrange(0, min(behind, per_partition))
                offsets[(topic, p)] = Committed(position, "")
                truth[(name, p)] = position
            groups[name] = offsets
    outcomes = commit_offsets(admin_client({"bootstrap.servers": ctx.source.bootstrap}), groups)
    failed = [o for o in outcomes.values() if o.error]
    if failed:
        raise SystemExit(f"committing group offsets failed: {failed[0].error}")

    results: dict[str, dict[tuple[str, int], int]] = {}
    remotes: dict[str, str] = {}
    # MM2: its source connector copies, its checkpoint connector translates, as deployed.
    src, dst = ctx.aliases("f")
    extra = (
        f"{src}->{dst}.topics = {topic}\ntasks.max = {args.tasks}\n"
        "emit.checkpoints.interval.seconds = 1\nrefresh.groups.interval.seconds = 1\n"
        f"{dst}.offset.flush.interval.ms = 1000\n"
    )
    path = properties(ctx.tmp / f"{src}.properties", ctx.source, ctx.target, src, dst, extra)
    mm2 = MirrorMaker(path, ctx.tmp / f"mm2-{src}", clusters=(dst,)).start()
    checkpoints_topic = f"{src}.checkpoints.internal"
    try:
        mm2.wait_for(
            lambda: (
                len(latest_checkpoints_quiet(ctx.target.bootstrap, checkpoints_topic)) >= len(truth)
                and _settled(ctx, checkpoints_topic)
            ),
            "checkpoint every group",
            TIMEOUT_S,
        )
    finally:
        mm2.stop()
    results["MM2 (real checkpoints)"] = latest_checkpoints(ctx.target.bootstrap, checkpoints_topic)
    remotes["MM2 (real checkpoints)"] = f"{src}.{topic}"
    # mirrorflow: one replicate run and one checkpoint pass.
    src, dst = ctx.aliases("g")
    path = properties(
        ctx.tmp / f"{src}.properties", ctx.source, ctx.target, src, dst, f"{src}->{dst}.topics = {topic}\n"
    )
    subprocess.run(
        [str(BIN / "mirrorflow"), "replicate", str(path), "--flow", f"{src}->{dst}"],
        check=True,
        capture_output=True,
    )
    flow = load_config(str(path)).flow(src, dst)
    checkpoint_pass(flow, FlowClients.resolve(flow))
    results["mirrorflow"] = latest_checkpoints(ctx.target.bootstrap, f"{src}.checkpoints.internal")
    remotes["mirrorflow"] = f"{src}.{topic}"

    source_keys = {
        p: [m.key() for m in read_partition({"bootstrap.servers": ctx.source.bootstrap}, topic, p)]
        for p in range(args.partitions)
    }
    for who, found in results.items():
        on_target = {
            p: target_positions(ctx.target.bootstrap, remotes[who], p) for p in range(args.partitions)
        }
        for kind in KINDS:
            redelivered, skipped, missing, count = [], 0, 0, 0
            for (group, p), position in truth.items():
                if not group.startswith(kind.split()[0]):
                    continue
                count += 1
                by_key, offsets = on_target[p]
                # Where the group must resume: the target copy of the first record it has not read.
                must = by_key[source_keys[p][position]] if position < len(source_keys[p]) else offsets[-1] + 1
                got = found.get((group, p))
                if got is None:
                    missing += 1
                    continue
                between = sum(1 for o in offsets if min(got, must) <= o < max(got, must))
                if got <= must:
                    redelivered.append(between)
                else:
                    skipped += between
            values = redelivered or [0]
            console_rows.append(
                [
                    who,
                    f"{count} {kind}",
                    f"{sum(values):,}",
                    f"{statistics.mean(values):.1f}",
                    f"{max(values):,}",
                    f"{skipped:,}",
                    f"{missing:,}",
                ]
            )


def latest_checkpoints_quiet(bootstrap: str, topic: str) -> dict[tuple[str, int], int]:
    try:
        return latest_checkpoints(bootstrap, topic)
    except Exception:  # noqa: BLE001 - not there yet
        return {}


_SEEN: dict[str, tuple[int, float]] = {}


def _settled(ctx: Context, topic: str) -> bool:
    """MM2 emits again as its syncs move; wait until two seconds pass without a new checkpoint."""
    count = sum(1 for _ in read_partition({"bootstrap.servers": ctx.target.bootstrap}, topic, 0))
    last = _SEEN.get(topic)
    now = time.monotonic()
    if last is None or last[0] != count:
        _SEEN[topic] = (count, now)
        return False
    return now - last[1] > 2.0


# -- output --------------------------------------------------------------------------------------


def machine() -> str:
    return (
        f"machine: {platform.machine()} {platform.system()} {platform.release()}, {os.cpu_count()} cores, "
        f"{psutil.virtual_memory().total // 2**30} GiB; Apache Kafka {kafka_version()}; python {platform.python_version()}"
    )


def main() -> int:
    args = parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    chosen = [n for n in REPLICATORS if not args.only or any(o.strip() in n for o in args.only.split(","))]
    print(" ".join([".venv/bin/python benchmarks/vs_mm2.py", *sys.argv[1:]]))
    print(machine())
    print(
        f"data: {args.records:,} records per set, sizes {sizes} bytes, {args.partitions} partitions; "
        f"tasks.max {args.tasks}; {args.repeat} runs each (medians)\n",
        flush=True,
    )
    rows: list[Row] = []
    failover_rows: list[list[str]] = []
    with (
        tempfile.TemporaryDirectory(prefix="mirrorflow-vs-mm2-") as tmp,
        two_clusters(Path(tmp), heap=args.heap) as (source, target),
    ):
        ctx = Context(args, source, target, Path(tmp))
        for size in sizes:
            topic = f"bench-{size}"
            fill(source.bootstrap, topic, args.records, size, args.partitions)
            for name in chosen:
                row = Row(name, size, args.records)
                for repetition in range(args.repeat):
                    sys.stderr.write(f"{name}, {size} B, run {repetition + 1}\n")
                    measure = REPLICATORS[name](ctx, topic, size, args.records)
                    row.measures.append(measure)
                    sys.stderr.write(f"  {measure}\n")
                rows.append(row)
        failover_part(ctx, failover_rows)
    header = (
        f"{'replicator':<33} {'size':>5} {'first rec s':>11} {'steady rec/s':>12} {'MB/s':>7} "
        f"{'caught up s':>11} {'CPU s/M rec':>11} {'steady CPU s/M':>14} {'target MB':>9}"
    )
    print(header)
    print("-" * len(header))
    for row in rows:
        steady = row.median("steady_rps")
        per_million = 1e6 / row.records
        print(
            f"{row.name:<33} {row.size:>5} {row.median('first_s'):>11.1f} {steady:>12,.0f} "
            f"{steady * row.size / 1e6:>7.1f} {row.median('caught_up_s'):>11.1f} "
            f"{row.median('cpu_s') * per_million:>11.1f} "
            f"{row.median('steady_cpu_s') * 1e6 / (row.records * 0.8):>14.1f} "
            f"{row.median('disk_bytes') / 1e6:>9.1f}"
        )
    print("\nfailover: records re-delivered per group partition (and skipped; no checkpoint)")
    print(
        f"{'who':<24} {'groups':<28} {'re-delivered':>12} {'mean':>7} {'max':>7} {'skipped':>8} {'none':>5}"
    )
    for cells in failover_rows:
        print(
            f"{cells[0]:<24} {cells[1]:<28} {cells[2]:>12} {cells[3]:>7} {cells[4]:>7} {cells[5]:>8} {cells[6]:>5}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
