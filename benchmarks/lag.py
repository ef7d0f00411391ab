"""End-to-end replication lag at fixed producer rates: mirrorflow micro-batch against mirrorflow
batch in a tight loop and MirrorMaker 2, on the same brokers in one run.

Two single-node Apache Kafka clusters (localkafka, the version pinned in kafka/pom.xml). For each
rate in --rates and each replicator, a topic of its own (--partitions partitions) is written at
that rate, records of --size bytes (key and value), for --seconds, while the replicator copies it
with tasks.max = --tasks:

- mirrorflow micro-batch (CLI): `mirrorflow replicate --window` on a micro-batch flow, local
  worker processes, mirrorflow.microbatch.interval.ms = --interval-ms (the key's default unless
  given), exactly-once;
- mirrorflow micro-batch (Spark): the plan, then `spark-submit spark_apps/mirrorflow_window.py`
  on --spark-master, the same window;
- mirrorflow micro-batch handovers (Spark): the same, a window of --handover-window seconds,
  the next one planned and submitted when it ends, as the replicate DAG runs them (the lag of a
  window change, the Spark start-up included);
- mirrorflow batch (CLI loop): `mirrorflow replicate` on a batch flow, run again as soon as it
  ends (what `@continuous` comes down to, without the scheduler), exactly-once;
- MM2 at-least-once and MM2 exactly-once: real MirrorMaker 2 from the pinned jars, as
  benchmarks/vs_mm2.py runs it;
- librdkafka exactly-once loop (floor), and the same per partition: benchmarks/txn_loop.py, the
  barest exactly-once copy on the client mirrorflow uses (consume, produce, commit, again; one
  transactional producer per task, or per partition as mirrorflow's writer slots are here), with
  nothing that makes a copy safe to resume: the lag no replicator built that way gets under.

A record's lag is the time from its source timestamp until a read_committed consumer of the target
sees it. The source topic has message.timestamp.type = LogAppendTime, so that timestamp is when the
source broker appended the record, not when the benchmark's own producer queued it; every
replicator keeps it (remote_stamps checks the remote topic's type). Start-up is left out: the
replicator first copies one record per partition, then the rate runs for --warmup seconds (the
brokers' and the replicator's code paths warm up; not measured, but those records must arrive too)
and the clock starts after that. Figures: p50, p99 and max lag of the records appended after the
warm-up; the rate they were copied at (copied/s: those records over the time until the last of
them was readable); CPU per record of the replicator's processes while they were written (the
whole tree: JVM, workers, Spark; from /proc, and from wait4 for processes that ended; what each
process used before is left out); and whether the replicator keeps up: every record readable
within DRAIN_S of the last one written, and the lag of the last quarter of the records not more
than twice the first quarter's plus a second (a lag that grows is a replicator falling behind).

Run: `.venv/bin/python benchmarks/lag.py` (--seconds and --rates for a short run; --help).
"""

from __future__ import annotations

import argparse
import os
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from array import array
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import psutil
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic
from vs_mm2 import free_port, machine, properties, spark_env, spark_submit, tree_cpu

from localkafka import QUICK_CLUSTER, LocalKafka
from localkafka.mirrormaker import MirrorMaker
from mirrorflow.config.mirrorflow_keys import MICROBATCH_INTERVAL_MS
from mirrorflow.replicate import service

BIN = Path(sys.executable).parent
DRAIN_S = 30.0
READY_S = 180.0


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=300.0, help="how long each rate is written")
    parser.add_argument("--rates", default="1000,10000", help="records per second, comma-separated")
    parser.add_argument(
        "--warmup", type=float, default=10.0, help="seconds at the rate before measuring (not measured)"
    )
    parser.add_argument("--size", type=int, default=1024, help="bytes per record (key and value)")
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--tasks", type=int, default=2, help="tasks.max for every replicator")
    parser.add_argument("--only", default="", help="replicators to run (comma-separated names), default all")
    parser.add_argument("--spark-master", default="local[2]")
    parser.add_argument(
        "--handover-window",
        type=float,
        default=20.0,
        help="window length (seconds) of the handovers row: a new window starts this often",
    )
    parser.add_argument(
        "--interval-ms",
        type=int,
        default=MICROBATCH_INTERVAL_MS,
        help="mirrorflow.microbatch.interval.ms of the micro-batch rows (default: the key's default)",
    )
    return parser.parse_args()


class RateProducer(threading.Thread):
    """Writes `rate` records a second, round-robin over the partitions, until `seconds` are up."""

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        partitions: int,
        rate: float,
        seconds: float,
        size: int,
        producer: Producer | None = None,
    ):
        super().__init__(name="rate-producer", daemon=True)
        self.topic, self.partitions, self.rate, self.seconds = topic, partitions, rate, seconds
        self.value = os.urandom(max(0, size - 16))
        # A producer that has written already (the warm-up's) knows the topic's leaders: the rate
        # does not begin with a burst of what queued while it looked them up.
        self.producer = producer or Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all"})
        self.sent = 0
        self.behind_s = 0.0  # how far the producer itself fell behind its schedule, at most

    def run(self) -> None:
        started = time.monotonic()
        while (elapsed := time.monotonic() - started) < self.seconds:
            due = int(elapsed * self.rate)
            self.behind_s = max(self.behind_s, (due - self.sent) / self.rate)
            while self.sent < due:
                try:
                    self.producer.produce(
                        self.topic,
                        key=b"%016d" % self.sent,
                        value=self.value,
                        partition=self.sent % self.partitions,
                        timestamp=int(time.time() * 1000),
                    )
                    self.sent += 1
                except BufferError:
                    self.producer.poll(0.01)
            self.producer.poll(0)
            time.sleep(0.002)
        assert self.producer.flush(60) == 0, "the source did not take every record"


class LagReader(threading.Thread):
    """Reads the remote topic read_committed as it fills; each record's lag is the time it is
    seen minus its timestamp."""

    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        super().__init__(name="lag-reader", daemon=True)
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"lag-{uuid.uuid4().hex}",
                "isolation.level": "read_committed",
                "enable.auto.commit": False,
                "fetch.wait.max.ms": 10,
                "log_level": 3,
            }
        )
        self.topic, self.partitions = topic, partitions
        self.stamps, self.lags = array("q"), array("l")
        self.halt = threading.Event()

    def run(self) -> None:
        while not self.halt.is_set():
            meta = self.consumer.list_topics(self.topic, timeout=5).topics.get(self.topic)
            if meta is not None and meta.error is None and len(meta.partitions) == self.partitions:
                break
            time.sleep(0.2)
        self.consumer.assign([TopicPartition(self.topic, p, 0) for p in range(self.partitions)])
        while not self.halt.is_set():
            for message in self.consumer.consume(1000, timeout=0.1):
                if message.error() is not None and message.error().code() != KafkaError._PARTITION_EOF:
                    raise RuntimeError(message.error().str())
                if message.error() is None:
                    stamp = message.timestamp()[1]
                    self.stamps.append(stamp)
                    self.lags.append(int(time.time() * 1000) - stamp)
        self.consumer.close()


@dataclass
class Replicator:
    """A running replicator: its live processes (for CPU), how to stop it, and what it has to
    say about its run (for the row's note)."""

    processes: Callable[[], list[int]]
    stop: Callable[[], None]
    note: Callable[[], str] = lambda: ""
    metered: bool = True
    """Whether CpuMeter can count its CPU: not for Spark applications that end while measured
    (their Python processes are not waited for by the JVM, so their CPU is lost with them)."""


def _popen(command: list[str], log: Path, **kwargs) -> subprocess.Popen:
    with log.open("ab") as out:
        return subprocess.Popen(
            command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True, **kwargs
        )


def _end(process: subprocess.Popen, sig: int = signal.SIGINT, wait_s: float = 60) -> None:
    """Ask the process group to end (Ctrl-C for mirrorflow), then make sure it did."""
    if process.poll() is None:
        os.killpg(process.pid, sig)
        try:
            process.wait(wait_s)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(30)


def micro_batch_cli(ctx: Context, src: str, dst: str, path: Path) -> Replicator:
    process = _popen(
        [str(BIN / "mirrorflow"), "replicate", str(path), "--flow", f"{src}->{dst}", "--window", "86400"],
        ctx.tmp / f"{src}.log",
    )
    return Replicator(lambda: [process.pid], lambda: _end(process))


def micro_batch_spark(ctx: Context, src: str, dst: str, path: Path) -> Replicator:
    planned = service.plan_run(str(path), src, dst, run_id=f"bench-{uuid.uuid4().hex[:8]}")
    command = spark_submit(
        ctx.args.spark_master, "mirrorflow_window.py", path, f"{src}->{dst}", planned["plan_offset"]
    )
    process = _popen([*command, "--window", "86400"], ctx.tmp / f"{src}.log", env=spark_env())
    # Nothing takes over from it: it is stopped once measured.
    return Replicator(lambda: [process.pid], lambda: _end(process, signal.SIGTERM, 30))


def micro_batch_handovers(ctx: Context, src: str, dst: str, path: Path) -> Replicator:
    """Windows of --handover-window seconds, each its own Spark application, started when the
    one before ends, as the replicate DAG's runs start them (plan, then spark-submit): the window
    before copies on until the next has taken every slot over, then ends by itself. The row's
    lag covers the handovers; its note says how many there were and how each window ended."""
    halt, windows = threading.Event(), []
    length = ctx.args.handover_window

    def loop() -> None:
        while not halt.is_set():
            planned = service.plan_run(str(path), src, dst, run_id=f"bench-{uuid.uuid4().hex[:8]}")
            ends = time.monotonic() + length
            command = spark_submit(
                ctx.args.spark_master, "mirrorflow_window.py", path, f"{src}->{dst}", planned["plan_offset"]
            )
            log = ctx.tmp / f"{src}-window-{len(windows)}.log"
            windows.append(_popen([*command, "--window", f"{length:g}"], log, env=spark_env()))
            halt.wait(max(0.0, ends - time.monotonic()))

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    ended: dict[int, int] = {}

    def live() -> list[int]:
        for index, window in enumerate(windows):
            if index not in ended and window.poll() is not None:
                ended[index] = window.returncode
        return [w.pid for i, w in enumerate(windows) if i not in ended]

    def stop() -> None:
        halt.set()
        thread.join(120)
        live()
        for window in windows:
            _end(window, signal.SIGTERM, 30)

    def note() -> str:
        by_itself = sum(code == 0 for code in ended.values())
        return (
            f"{max(0, len(windows) - 1)} handovers of {length:g}s windows; {by_itself} of "
            f"{len(ended)} ended windows ended by themselves (exit 0)"
        )

    return Replicator(live, stop, note, metered=False)


def batch_loop(ctx: Context, src: str, dst: str, path: Path) -> Replicator:
    halt, current = threading.Event(), [None]

    def loop() -> None:
        while not halt.is_set():
            current[0] = _popen(
                [str(BIN / "mirrorflow"), "replicate", str(path), "--flow", f"{src}->{dst}"],
                ctx.tmp / f"{src}.log",
            )
            current[0].wait()

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()

    def stop() -> None:
        halt.set()
        thread.join(600)

    return Replicator(lambda: [current[0].pid] if current[0] and current[0].poll() is None else [], stop)


def txn_loop(*flags: str) -> Callable[[Context, str, str, Path], Replicator]:
    """The floor: benchmarks/txn_loop.py in --tasks processes, partitions dealt round-robin."""
    return lambda ctx, src, dst, path: _txn_loop(ctx, src, flags)


def _txn_loop(ctx: Context, src: str, flags: tuple[str, ...]) -> Replicator:
    remote = f"{src}.{ctx.topic}"
    admin = AdminClient({"bootstrap.servers": ctx.target.bootstrap})
    created = admin.create_topics(
        [
            NewTopic(remote, ctx.args.partitions, 1),
            NewTopic(f"{remote}.positions", 1, 1, config={"cleanup.policy": "compact"}),
        ]
    )
    for future in created.values():
        future.result(30)
    processes = []
    for task in range(ctx.args.tasks):
        mine = ",".join(str(p) for p in range(task, ctx.args.partitions, ctx.args.tasks))
        command = [sys.executable, str(Path(__file__).with_name("txn_loop.py")), ctx.source.bootstrap]
        command += [ctx.target.bootstrap, ctx.topic, remote, mine, *flags]
        processes.append(_popen(command, ctx.tmp / f"{src}-{task}.log"))

    def stop() -> None:
        for process in processes:
            _end(process)

    return Replicator(lambda: [p.pid for p in processes if p.poll() is None], stop)


def mm2(exactly_once: bool) -> Callable[[Context, str, str, Path], Replicator]:
    def start(ctx: Context, src: str, dst: str, path: Path) -> Replicator:
        extra = f"{src}->{dst}.topics = {ctx.topic}\ntasks.max = {ctx.args.tasks}\n"
        if exactly_once:
            extra += (
                f"{dst}.exactly.once.source.support = enabled\n{src}->{dst}.exactly.once.support = required\n"
                f"{src}.consumer.isolation.level = read_committed\n"
                f"dedicated.mode.enable.internal.rest = true\nlisteners = http://127.0.0.1:{free_port()}\n"
            )
        config = properties(ctx.tmp / f"{src}-mm2.properties", ctx.source, ctx.target, src, dst, extra)
        runner = MirrorMaker(config, ctx.tmp / f"mm2-{src}", clusters=(dst,)).start()
        return Replicator(
            lambda: [runner.process.pid] if runner.running else [], lambda: runner.stop(timeout_s=60)
        )

    return start


MICRO = "mirrorflow.replicate.mode = micro-batch\nmirrorflow.microbatch.interval.ms = {interval}\n"
REPLICATORS: dict[str, tuple[Callable[[Context, str, str, Path], Replicator], str]] = {
    "mirrorflow micro-batch (CLI)": (micro_batch_cli, MICRO),
    "mirrorflow micro-batch (Spark)": (micro_batch_spark, MICRO),
    "mirrorflow micro-batch handovers (Spark)": (micro_batch_handovers, MICRO),
    "mirrorflow batch (CLI loop)": (batch_loop, ""),
    "MM2 at-least-once": (mm2(False), ""),
    "MM2 exactly-once": (mm2(True), ""),
    "librdkafka exactly-once loop (floor)": (txn_loop(), ""),
    "librdkafka exactly-once loop per partition (floor)": (txn_loop("--per-partition"), ""),
}


@dataclass
class Context:
    args: argparse.Namespace
    source: LocalKafka
    target: LocalKafka
    tmp: Path
    topic: str = ""
    counter: int = 0


class CpuMeter:
    """CPU seconds of the replicator's processes: those running now (their whole tree) and
    those that ended and were waited for since the meter started (RUSAGE_CHILDREN)."""

    def __init__(self, live: Callable[[], list[int]]) -> None:
        self.live = live
        self.base = self._children()
        self.started = self._running()
        """What the processes running now had used before: their start-up is not the rate's."""

    @staticmethod
    def _children() -> float:
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        return usage.ru_utime + usage.ru_stime

    def _running(self) -> float:
        running = 0.0
        for pid in self.live():
            try:
                running += tree_cpu(psutil.Process(pid))
            except psutil.NoSuchProcess:
                continue
        return running

    def now(self) -> float:
        return self._children() - self.base + self._running() - self.started


@dataclass
class Row:
    name: str
    rate: int
    records: int
    p50_s: float
    p99_s: float
    max_s: float
    cpu_us: float | None
    copied_per_s: float
    """The measured records over the time from the warm-up's end until the last of them was
    readable on the target: the rate the replicator sustained (the producer's rate when it kept up)."""
    keeps_up: bool
    note: str


def quantile(values: list[int], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] / 1000


def remote_stamps(bootstrap: str, topic: str, name: str) -> None:
    """Stop the benchmark if the remote topic stamps records itself: its lags would then measure
    the target's append time, not the replicator."""
    described = ConfigResource(ConfigResource.Type.TOPIC, topic)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    configs = admin.describe_configs([described])[described].result(30)
    kind = configs["message.timestamp.type"].value
    if kind != "CreateTime":
        raise SystemExit(
            f"{name}: remote topic {topic} has message.timestamp.type={kind}; its lags mean nothing"
        )


def measure(ctx: Context, name: str, rate: int) -> Row:
    args = ctx.args
    ctx.counter += 1
    src, dst = f"l{ctx.counter}src", f"l{ctx.counter}dst"
    ctx.topic = f"lag-{ctx.counter}"
    admin = AdminClient({"bootstrap.servers": ctx.source.bootstrap})
    # The source stamps each record when it appends it: a record's lag is then the time from
    # its append on the source, as the replicators see it, not from when the benchmark's own
    # producer queued it. Every replicator here keeps the stamp and leaves message.timestamp.type
    # out of the topic configs it copies (MM2's default config.properties.exclude); remote_stamps
    # checks that after each run.
    topic = NewTopic(ctx.topic, args.partitions, 1, config={"message.timestamp.type": "LogAppendTime"})
    admin.create_topics([topic])[ctx.topic].result(30)
    start, settings = REPLICATORS[name]
    extra = f"{src}->{dst}.topics = {ctx.topic}\ntasks.max = {args.tasks}\n" + settings.format(
        interval=args.interval_ms
    )
    path = properties(ctx.tmp / f"{src}.properties", ctx.source, ctx.target, src, dst, extra)
    reader = LagReader(ctx.target.bootstrap, f"{src}.{ctx.topic}", args.partitions)
    reader.start()
    warm = RateProducer(ctx.source.bootstrap, ctx.topic, args.partitions, args.partitions, 1.0, args.size)
    warm.run()
    replicator = start(ctx, src, dst, path)
    try:
        deadline = time.monotonic() + READY_S
        while len(reader.lags) < warm.sent:
            if time.monotonic() > deadline:
                raise SystemExit(f"{name}: nothing copied within {READY_S:.0f}s; logs in {ctx.tmp}")
            time.sleep(0.2)
        producer = RateProducer(
            ctx.source.bootstrap,
            ctx.topic,
            args.partitions,
            rate,
            args.warmup + args.seconds,
            args.size,
            warm.producer,
        )
        producer.start()
        # The first --warmup seconds at the rate warm the brokers' and replicator's code paths
        # (JIT, buffers, connections) and are not measured; their records must still arrive.
        time.sleep(args.warmup)
        cutoff_ms, sent_before = int(time.time() * 1000), producer.sent
        cpu = CpuMeter(replicator.processes)
        producer.join()
        cpu_s = cpu.now()
        measured = producer.sent - sent_before
        wanted = warm.sent + producer.sent
        ended = time.monotonic()
        while len(reader.lags) < wanted and time.monotonic() - ended < DRAIN_S:
            time.sleep(0.1)
        arrived = len(reader.lags) >= wanted
    finally:
        replicator.stop()
        reader.halt.set()
        reader.join(30)
    remote_stamps(ctx.target.bootstrap, f"{src}.{ctx.topic}", name)
    measured_lags = [
        (stamp, lag) for stamp, lag in zip(reader.stamps, reader.lags, strict=True) if stamp >= cutoff_ms
    ]
    lags = [lag for _, lag in measured_lags]
    last_seen_ms = max((stamp + lag for stamp, lag in measured_lags), default=cutoff_ms)
    quarter = max(1, len(lags) // 4)
    growing = statistics.median(lags[-quarter:]) > 2 * statistics.median(lags[:quarter]) + 1000
    note = "" if arrived else f"{wanted - len(reader.lags):,} records missing {DRAIN_S:.0f}s after the end"
    if producer.behind_s > 1:
        note += f" (the producer fell {producer.behind_s:.1f}s behind its rate)"
    note += f" {replicator.note()}"
    return Row(
        name,
        rate,
        measured,
        quantile(lags, 0.5),
        quantile(lags, 0.99),
        max(lags) / 1000,
        cpu_s * 1e6 / max(1, measured) if replicator.metered else None,
        len(lags) / max(0.001, (last_seen_ms - cutoff_ms) / 1000),
        arrived and not growing,
        note.strip(),
    )


def main() -> int:
    args = parse_args()
    chosen = [n for n in REPLICATORS if not args.only or any(part in n for part in args.only.split(","))]
    rates = [int(r) for r in args.rates.split(",")]
    print(machine())
    print(
        f"load average at the start: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f}"
    )
    print(
        f"{len(rates)} rate(s) x {len(chosen)} replicator(s): {args.seconds:g}s each, {args.size} B records, "
        f"{args.partitions} partitions, tasks.max {args.tasks}"
    )
    rows = []
    with tempfile.TemporaryDirectory(prefix="mirrorflow-lag-") as tmp_dir:
        tmp = Path(tmp_dir)
        source = LocalKafka(tmp / "source", overrides=QUICK_CLUSTER)
        target = LocalKafka(tmp / "target", overrides=QUICK_CLUSTER)
        try:
            source.launch()
            target.launch()
            source.start()
            target.start()
            ctx = Context(args, source, target, tmp)
            for rate in rates:
                for name in chosen:
                    row = measure(ctx, name, rate)
                    rows.append(row)
                    print(
                        f"  {row.name} at {rate:,}/s: p50 {row.p50_s:.2f}s p99 {row.p99_s:.2f}s max {row.max_s:.2f}s",
                        flush=True,
                    )
        finally:
            source.stop()
            target.stop()
    print()
    print(
        f"{'replicator':<42} {'rate/s':>8} {'records':>9} {'p50 s':>7} {'p99 s':>7} {'max s':>7} "
        f"{'CPU µs/rec':>10} {'copied/s':>9}  keeps up"
    )
    for row in rows:
        print(
            f"{row.name:<42} {row.rate:>8,} {row.records:>9,} {row.p50_s:>7.2f} {row.p99_s:>7.2f} {row.max_s:>7.2f} "
            f"{'-' if row.cpu_us is None else f'{row.cpu_us:.1f}':>10} {row.copied_per_s:>9,.0f}  {'yes' if row.keeps_up else 'no'}{'  ' + row.note if row.note else ''}"
        )
    print(f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
