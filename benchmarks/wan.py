"""Copying over a slow link: mirrorflow and MirrorMaker 2 with a source 0, 25 and 50 ms away.

Two single-node Apache Kafka clusters (localkafka, the version pinned in kafka/pom.xml): the
source also has a SLOW listener behind localkafka's latency proxy, which holds every byte the
given one-way delay (a round trip costs twice that), and each replicator reaches the source only
through it; the target is local, as where a replicator usually runs (remote consume, local
produce). The link is first direct loopback (the baseline), then the proxy at 0 ms (its own
cost), 25 ms and 50 ms one way.

On each link every replicator copies the same topic (--records records of 1 KiB over
--partitions partitions) into a remote topic of its own, measured as benchmarks/vs_mm2.py
measures (a read_committed consumer on the target): steady records/s between 10% and 90% of the
records, time until all are readable, and the steady rate as a share of the same replicator's
rate on direct loopback:

- mirrorflow defaults: `mirrorflow replicate` (exactly-once, local workers), nothing tuned;
- mirrorflow WAN: the same with WAN_MIRRORFLOW (the settings the docs' "Slow links" recommend);
- MM2 defaults: real MirrorMaker 2 in dedicated mode, at-least-once, its defaults;
- MM2 WAN: the same with WAN_MM2, the tuning MM2's WAN guides give (larger fetches per request,
  the OS's socket buffers, more records per poll, larger producer batches).

All get `tasks.max` = --tasks; each runs --repeat times per link, repetitions outermost so that
load from elsewhere drifts over every link alike (medians). Run: `.venv/bin/python benchmarks/wan.py` (--help for options;
`--records 100000` for a quick look, too short for a steady rate: a mirrorflow transaction makes a
whole range of a partition readable at once, and 100,000 records over 8 partitions left two or
three commits inside the 10-90% window).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from vs_mm2 import Context, Measure, fill, machine, mirrorflow_cli, mm2_runner

from localkafka import QUICK_CLUSTER, LocalKafka

SIZE = 1024
TOPIC = "wan"
# What the docs' "Slow links" recommend for a source far away (`<source>.consumer.*`): a copy
# reads one partition at a time, so each round trip brings at most one partition's fetch;
# 32 MiB instead of mirrorflow's 8 MiB default is a quarter of the round trips per partition.
WAN_MIRRORFLOW = "{src}.consumer.max.partition.fetch.bytes = 33554432\n"
# MM2's usual WAN tuning: its source consumer fetches more per request and per poll, with the
# OS's socket buffers; its producer batches more.
WAN_MM2 = (
    "{src}.consumer.max.partition.fetch.bytes = 8388608\n"
    "{src}.consumer.fetch.min.bytes = 1048576\n"
    "{src}.consumer.receive.buffer.bytes = -1\n"
    "{src}.consumer.max.poll.records = 10000\n"
    "{dst}.producer.batch.size = 1048576\n"
    "{dst}.producer.linger.ms = 20\n"
)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=400_000, help="records of 1 KiB to copy")
    parser.add_argument("--repeat", type=int, default=2, help="runs of every replicator per link (medians)")
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--tasks", type=int, default=2, help="tasks.max for every replicator")
    parser.add_argument("--delays", default="0,25,50", help="one-way delays in ms, comma-separated")
    parser.add_argument("--only", default="", help="replicators to run (comma-separated names), default all")
    parser.add_argument("--heap", default="1g", help="heap of each Kafka broker")
    return parser.parse_args()


@dataclass(frozen=True)
class Far:
    """The source as a replicator sees it: its bootstrap is the latency proxy's (or direct)."""

    bootstrap: str


def mirrorflow(settings: str) -> Callable[[Context], Measure]:
    return lambda ctx: mirrorflow_cli(ctx, TOPIC, SIZE, ctx.args.records, settings)


def mm2(settings: str) -> Callable[[Context], Measure]:
    runner = mm2_runner(False, settings)
    return lambda ctx: runner(ctx, TOPIC, SIZE, ctx.args.records)


REPLICATORS: dict[str, Callable[[Context], Measure]] = {
    "mirrorflow defaults": mirrorflow(""),
    "mirrorflow WAN": mirrorflow(WAN_MIRRORFLOW),
    "MM2 defaults": mm2(""),
    "MM2 WAN": mm2(WAN_MM2),
}


def median(measures: list[Measure], attribute: str) -> float:
    return statistics.median(getattr(m, attribute) for m in measures)


def main() -> int:
    args = parse_args()
    delays = [float(d) for d in args.delays.split(",")]
    chosen = [n for n in REPLICATORS if not args.only or any(o.strip() in n for o in args.only.split(","))]
    print(" ".join([".venv/bin/python benchmarks/wan.py", *sys.argv[1:]]))
    print(machine())
    print(
        f"data: {args.records:,} records of {SIZE} B, {args.partitions} partitions; tasks.max {args.tasks}; "
        f"source behind the latency proxy, target local\n",
        flush=True,
    )
    results: dict[tuple[str, str], list[Measure]] = {}
    links = ["loopback", *(f"{d:g} ms" for d in delays)]
    with tempfile.TemporaryDirectory(prefix="mirrorflow-wan-") as tmp:
        source = LocalKafka(
            Path(tmp) / "source", overrides=QUICK_CLUSTER, heap=args.heap, link_delay_ms=0
        ).launch()
        target = LocalKafka(Path(tmp) / "target", overrides=QUICK_CLUSTER, heap=args.heap).launch()
        try:
            source.start()
            target.start()
            fill(source.bootstrap, TOPIC, args.records, SIZE, args.partitions)
            # One context for all links: every run gets aliases (and so a remote topic) of its own.
            ctx = Context(args, Far(source.bootstrap), target, Path(tmp))  # type: ignore[arg-type]
            # Repetitions outermost, then links: load from elsewhere on the machine drifts, and
            # this way it drifts over every link alike. Each run gets aliases (and so a remote
            # topic) of its own.
            for repetition in range(args.repeat):
                for link in links:
                    if link == "loopback":
                        ctx.source = Far(source.bootstrap)  # type: ignore[assignment]
                    else:
                        source.set_link_delay(float(link.split()[0]))
                        ctx.source = Far(source.bootstrap_for("SLOW"))  # type: ignore[assignment]
                    for name in chosen:
                        sys.stderr.write(f"{name}, {link}, run {repetition + 1}\n")
                        measure = REPLICATORS[name](ctx)
                        results.setdefault((name, link), []).append(measure)
                        sys.stderr.write(f"  {measure}\n")
        finally:
            source.stop()
            target.stop()
    header = f"{'replicator':<22} {'link (one way)':<15} {'steady rec/s':>12} {'MB/s':>7} {'caught up s':>11} {'of loopback':>11}"
    print(header)
    print("-" * len(header))
    for name in chosen:
        base = median(results[(name, "loopback")], "steady_rps")
        for link in links:
            steady = median(results[(name, link)], "steady_rps")
            print(
                f"{name:<22} {link:<15} {steady:>12,.0f} {steady * SIZE / 1e6:>7.1f} "
                f"{median(results[(name, link)], 'caught_up_s'):>11.1f} {steady / base:>10.0%}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
