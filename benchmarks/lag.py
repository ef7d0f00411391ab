"""Replication lag, window start, CPU and transactions at fixed rates over many partitions.

mirrorflow micro-batch against mirrorflow batch in a tight loop and MirrorMaker 2, on the same
brokers in one run.

Two single-node Apache Kafka clusters (localkafka, the version pinned in kafka/pom.xml). For each
rate in --rates and each replicator, topics of its own (--topics topics of --partitions
partitions, created in batched CreateTopics requests) are written at that rate, records of
--size bytes (key and value), spread evenly over the share --active of all their partitions (the
rest stay quiet, as most of a DR flow's partitions are), for --seconds, while the replicator
copies them (every replicator is told the same topics, by one regex) with tasks.max = --tasks:

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
  nothing that makes a copy safe to resume: the lag no replicator built that way gets under. They
  copy one topic, so they run only with --topics 1.

A record's lag is the time from its source timestamp until a read_committed consumer of the target
(one consumer assigned every partition of every remote topic) sees it. The source topics have
message.timestamp.type = LogAppendTime, so that timestamp is when the source broker appended the
record, not when the benchmark's own producer queued it; every replicator keeps it (remote_stamps
checks the remote topics' type). Before the replicator starts, every partition, quiet or not, gets
one record; the window start is the time from the replicator's start until the first record of
every partition is readable on the target. Then the rate runs for --warmup seconds (the brokers'
and the replicator's code paths warm up; not measured, but those records must arrive too) and the
clock starts after that. Figures: p50, p99 and max lag of the records appended after the warm-up;
the rate they were copied at (copied/s: those records over the time until the last of them was
readable); CPU per record of the replicator's processes while they were written (the whole tree:
JVM, workers, Spark; from /proc, and from wait4 for processes that ended; what each process used
before is left out); for mirrorflow the transactions per second that committed progress while
they were written (the distinct `mirrorflow.commit` tokens of the progress records its offsets
topic took in that span; MM2's records carry no such token: "-"); and whether the replicator keeps
up: every record readable within DRAIN_S of the last one written, and the lag of the last quarter
of the records not more than twice the first quarter's plus a second (a lag that grows is a
replicator falling behind). Each measurement's topics are deleted on both clusters after it;
with --fresh-clusters each measurement gets a new source and target instead (at 10,000
partitions a broker that held the last measurement's topics is slow to take the next one's).

Run: `.venv/bin/python benchmarks/lag.py` (--seconds and --rates for a short run; --topics 100
--partitions 10 for 1,000 partitions; --help). --timeline DIR keeps each measurement's lag second
by second and the replicators' logs (and when the handovers row submitted each window), which
benchmarks/handover_timeline.py reads to say where a handover's lag falls.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from _clusters import create_topics, delete_topics, two_clusters
from _lag_costs import Commits, CpuMeter
from _lag_load import Context, LagReader, Layout, RateProducer, one_each, producer
from _lag_replicators import FLOORS, REPLICATORS
from confluent_kafka.admin import AdminClient, ConfigResource
from vs_mm2 import machine, properties

from mirrorflow.config.mirrorflow_keys import MICROBATCH_INTERVAL_MS

DRAIN_S = 30.0
READY_S = 180.0
READY_PER_PARTITION_S = 0.05
"""How long a replicator may take to show every partition's first record: READY_S and this much
more for each partition (a window's first batch opens every writer slot: 75 s at 10,000)."""


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=300.0, help="how long each rate is written")
    parser.add_argument("--rates", default="1000,10000", help="records per second, comma-separated")
    parser.add_argument(
        "--warmup", type=float, default=10.0, help="seconds at the rate before measuring (not measured)"
    )
    parser.add_argument("--size", type=int, default=1024, help="bytes per record (key and value)")
    parser.add_argument("--topics", type=int, default=1, help="source topics per measurement")
    parser.add_argument("--partitions", type=int, default=8, help="partitions per topic")
    parser.add_argument(
        "--active",
        type=float,
        default=1.0,
        help="share of all partitions that receive the load, evenly spread (0 < x <= 1); the rest stay quiet",
    )
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
    parser.add_argument(
        "--timeline",
        type=Path,
        default=None,
        help="a directory to keep each measurement's lag second by second (CSV, by source append "
        "time) and the replicators' logs in, to see where a spike falls (a handover, a batch)",
    )
    parser.add_argument("--heap", default=None, help="heap of each Kafka broker (default: localkafka's)")
    parser.add_argument(
        "--fresh-clusters",
        action="store_true",
        help="a new source and target for each measurement (at 10,000 partitions a broker that held "
        "the previous measurement's topics does not take the next one's first records in time)",
    )
    parser.add_argument(
        "--remote-topics-made",
        action="store_true",
        help="create the remote topics on the target before each replicator starts (MM2 4.3 sends all "
        "of them in one CreateTopics request, which the controller refuses past 10,000 metadata "
        "records, e.g. 1,000 topics of 10 partitions: KAFKA-19327)",
    )
    args = parser.parse_args()
    if not 0 < args.active <= 1:
        parser.error("--active must be more than 0 and at most 1")
    if args.topics < 1 or args.partitions < 1:
        parser.error("--topics and --partitions must be at least 1")
    return args


@dataclass
class Row:
    name: str
    rate: int
    records: int
    start_s: float
    """From the replicator's start until every partition's first record was readable."""
    p50_s: float
    p99_s: float
    max_s: float
    cpu_us: float | None
    copied_per_s: float
    """The measured records over the time from the warm-up's end until the last of them was
    readable on the target: the rate the replicator sustained (the producer's rate when it kept up)."""
    transactions_per_s: float | None
    keeps_up: bool
    note: str


def quantile(ordered: np.ndarray, q: float) -> float:
    if not len(ordered):
        return float("nan")
    return float(ordered[min(len(ordered) - 1, int(q * len(ordered)))]) / 1000


def remote_stamps(bootstrap: str, topics: list[str], name: str) -> None:
    """Stop the benchmark if a remote topic stamps records itself: its lags would then measure
    the target's append time, not the replicator. One DescribeConfigs for all of them."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    described = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, t) for t in topics])
    for resource, future in described.items():
        kind = future.result(60)["message.timestamp.type"].value
        if kind != "CreateTime":
            raise SystemExit(
                f"{name}: remote topic {resource.name} has message.timestamp.type={kind}; its lags mean nothing"
            )


def measure(ctx: Context, name: str, rate: int) -> Row:
    args = ctx.args
    ctx.counter += 1
    src, dst = f"l{ctx.counter}src", f"l{ctx.counter}dst"
    layout = ctx.layout = Layout(f"lag-{ctx.counter}", args.topics, args.partitions, args.active)
    # The source stamps each record when it appends it: a record's lag is then the time from
    # its append on the source, as the replicators see it, not from when the benchmark's own
    # producer queued it. Every replicator here keeps the stamp and leaves message.timestamp.type
    # out of the topic configs it copies (MM2's default config.properties.exclude); remote_stamps
    # checks that after each run.
    create_topics(
        ctx.source.bootstrap, layout.names, layout.partitions, {"message.timestamp.type": "LogAppendTime"}
    )
    start, settings = REPLICATORS[name]
    extra = f"{src}->{dst}.topics = {layout.pattern}\ntasks.max = {args.tasks}\n" + settings.format(
        interval=args.interval_ms
    )
    path = properties(ctx.tmp / f"{src}.properties", ctx.source, ctx.target, src, dst, extra)
    remotes = [f"{src}.{topic}" for topic in layout.names]
    if args.remote_topics_made:
        create_topics(ctx.target.bootstrap, remotes, layout.partitions)
    reader = LagReader(ctx.target.bootstrap, remotes, layout.partitions)
    reader.start()
    writer = producer(ctx.source.bootstrap)
    first = one_each(writer, layout.every(), args.size)
    started = time.monotonic()
    replicator = start(ctx, src, dst, path)
    commits = None
    try:
        ready_s = READY_S + READY_PER_PARTITION_S * layout.total
        while reader.covered_at is None:
            if time.monotonic() - started > ready_s:
                raise SystemExit(
                    f"{name}: {reader.covered:,} of {layout.total:,} partitions readable on the target "
                    f"{ready_s:.0f}s after the start; logs in {ctx.tmp}"
                )
            time.sleep(0.1)
        start_s = reader.covered_at - started
        print(f"  {name}: every partition's first record readable after {start_s:.1f}s", flush=True)
        load = RateProducer(writer, layout.loaded(), rate, args.warmup + args.seconds, args.size)
        load.start()
        # The first --warmup seconds at the rate warm the brokers' and replicator's code paths
        # (JIT, buffers, connections) and are not measured; their records must still arrive.
        time.sleep(args.warmup)
        cutoff_ms, sent_before, span_started = int(time.time() * 1000), load.sent, time.monotonic()
        if replicator.progress_topic:
            commits = Commits(ctx.target.bootstrap, replicator.progress_topic)
        cpu = CpuMeter(replicator.processes)
        load.join()
        cpu_s = cpu.now()
        if commits:
            commits.end()
        span_s = time.monotonic() - span_started
        measured = load.sent - sent_before
        wanted = first + load.sent
        ended = time.monotonic()
        while len(reader.lags) < wanted and time.monotonic() - ended < DRAIN_S:
            time.sleep(0.1)
        arrived = len(reader.lags) >= wanted
    finally:
        replicator.stop()
        reader.halt.set()
        reader.join(30)
    remote_stamps(ctx.target.bootstrap, remotes, name)
    if args.timeline:
        keep_timeline(args.timeline, ctx, name, reader, cutoff_ms)
    transactions = commits.count() / span_s if commits else None
    count = min(len(reader.stamps), len(reader.lags))
    stamps, lags = np.array(reader.stamps[:count]), np.array(reader.lags[:count])
    after = stamps >= cutoff_ms
    stamps, lags = stamps[after], lags[after]
    ordered = np.sort(lags)
    last_seen_ms = int((stamps + lags).max()) if len(lags) else cutoff_ms
    quarter = max(1, len(lags) // 4)
    growing = len(lags) > 0 and np.median(lags[-quarter:]) > 2 * np.median(lags[:quarter]) + 1000
    note = "" if arrived else f"{wanted - len(reader.lags):,} records missing {DRAIN_S:.0f}s after the end"
    if load.behind_s > 1:
        note += f" (the producer fell {load.behind_s:.1f}s behind its rate)"
    note += f" {replicator.note()}"
    delete_topics(ctx.source.bootstrap, layout.names, layout.partitions)
    delete_topics(
        ctx.target.bootstrap, [*remotes, *(f"{remote}.positions" for remote in remotes)], layout.partitions
    )
    return Row(
        name,
        rate,
        measured,
        start_s,
        quantile(ordered, 0.5),
        quantile(ordered, 0.99),
        quantile(ordered, 1.0),
        cpu_s * 1e6 / max(1, measured) if replicator.metered else None,
        len(lags) / max(0.001, (last_seen_ms - cutoff_ms) / 1000),
        transactions,
        arrived and not growing,
        note.strip(),
    )


def keep_timeline(into: Path, ctx: Context, name: str, reader: LagReader, cutoff_ms: int) -> None:
    """Write the measured records' lag second by second (from the warm-up's end, by when the
    source appended them) and copy the replicator's logs, both named after the measurement."""
    into.mkdir(parents=True, exist_ok=True)
    label = f"{ctx.counter}-{''.join(c if c.isalnum() else '-' for c in name)}"
    count = min(len(reader.stamps), len(reader.lags))
    stamps, lags = np.array(reader.stamps[:count]), np.array(reader.lags[:count])
    seconds = (stamps - cutoff_ms) // 1000
    with open(into / f"{label}.csv", "w") as out:
        out.write(f"# epoch ms of second 0: {cutoff_ms}\nsecond,records,p50_s,p99_s,max_s\n")
        for second in np.unique(seconds):
            ordered = np.sort(lags[seconds == second])
            out.write(
                f"{second},{len(ordered)},{quantile(ordered, 0.5):.3f},{quantile(ordered, 0.99):.3f},"
                f"{quantile(ordered, 1.0):.3f}\n"
            )
    for kept in [*ctx.tmp.glob("*.log"), *ctx.tmp.glob("*.tsv")]:
        shutil.copyfile(kept, into / f"{label}-{kept.name}")


def command_line() -> str:
    """This run's command, as typed from the project's root."""
    python = os.path.relpath(sys.executable) if sys.executable.startswith(os.getcwd()) else sys.executable
    return shlex.join([python, os.path.relpath(sys.argv[0]), *sys.argv[1:]])


def print_table(rows: list[Row]) -> None:
    print(
        f"{'replicator':<42} {'rate/s':>8} {'records':>9} {'start s':>8} {'p50 s':>7} {'p99 s':>7} "
        f"{'max s':>7} {'CPU µs/rec':>10} {'copied/s':>9} {'txn/s':>7}  keeps up"
    )
    for row in rows:
        cpu = "-" if row.cpu_us is None else f"{row.cpu_us:.1f}"
        txn = "-" if row.transactions_per_s is None else f"{row.transactions_per_s:.1f}"
        print(
            f"{row.name:<42} {row.rate:>8,} {row.records:>9,} {row.start_s:>8.1f} {row.p50_s:>7.2f} "
            f"{row.p99_s:>7.2f} {row.max_s:>7.2f} {cpu:>10} {row.copied_per_s:>9,.0f} {txn:>7}  "
            f"{'yes' if row.keeps_up else 'no'}{'  ' + row.note if row.note else ''}"
        )


def measured(ctx: Context, name: str, rate: int) -> Row:
    row = measure(ctx, name, rate)
    print(
        f"  {row.name} at {rate:,}/s: p50 {row.p50_s:.2f}s p99 {row.p99_s:.2f}s max {row.max_s:.2f}s",
        flush=True,
    )
    return row


def main() -> int:
    args = parse_args()
    chosen = [n for n in REPLICATORS if not args.only or any(part in n for part in args.only.split(","))]
    rates = [int(r) for r in args.rates.split(",")]
    print(command_line())
    print(machine())
    print(f"load average at the start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    skipped = [n for n in chosen if n in FLOORS and args.topics > 1]
    if skipped:
        print(f"left out (they copy one topic; run them with --topics 1): {', '.join(skipped)}")
        chosen = [n for n in chosen if n not in skipped]
    layout = Layout("", args.topics, args.partitions, args.active)
    print(
        f"{len(rates)} rate(s) x {len(chosen)} replicator(s): {args.seconds:g}s each after {args.warmup:g}s "
        f"of warm-up, {args.size} B records, {args.topics:,} topic(s) x {args.partitions:,} partitions = "
        f"{layout.total:,} partitions, the load spread over {len(layout.loaded()):,} of them, "
        f"tasks.max {args.tasks}",
        flush=True,
    )
    rows = []
    runs = [(rate, name) for rate in rates for name in chosen]
    with tempfile.TemporaryDirectory(prefix="mirrorflow-lag-") as tmp_dir:
        tmp = Path(tmp_dir)
        if args.fresh_clusters:
            for index, (rate, name) in enumerate(runs):
                with two_clusters(tmp / f"clusters-{index}", heap=args.heap) as (source, target):
                    ctx = Context(args, source, target, tmp, counter=index)
                    rows.append(measured(ctx, name, rate))
        else:
            with two_clusters(tmp, heap=args.heap) as (source, target):
                ctx = Context(args, source, target, tmp)
                rows.extend(measured(ctx, name, rate) for rate, name in runs)
    print()
    print_table(rows)
    print(f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
