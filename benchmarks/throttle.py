"""A flow's byte-rate cap (`mirrorflow.replicate.max.bytes.per.second`): the rate achieved against
the cap, at fractions of the uncapped rate, on the same brokers in one run.

Two single-node Apache Kafka clusters (localkafka, the version pinned in kafka/pom.xml). First a
flow copies a topic with no cap (--records records of --size bytes over --partitions partitions,
--tasks local worker processes, as `mirrorflow replicate` runs them): its rate is the uncapped
rate. Then, for each fraction in --fractions, a topic of its own sized for about --seconds of
copying at fraction x uncapped rate is copied with the cap set to that. A rate is the record bytes
(keys and values) the run's report counts over the busiest worker's copying time (its longest
unit's seconds: --partitions / --tasks slots copied side by side, which leave out the workers'
start): what the cap holds the workers to. (Counting
records as they become readable on the target would measure commits, which come in bursts of up
to a quarter of transaction.timeout.ms.) Target: within ±10 % of the cap.

Run: `.venv/bin/python benchmarks/throttle.py` (--help for options).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import uuid
from pathlib import Path

from vs_mm2 import fill, machine

from localkafka import QUICK_CLUSTER, LocalKafka
from mirrorflow.clients import FlowClients
from mirrorflow.config import load_config
from mirrorflow.replicate.planner import make_plan
from mirrorflow.replicate.runner import copy_job_for, run_locally


def copy_rate(
    source: LocalKafka, target: LocalKafka, topic: str, tasks: int, cap: int
) -> tuple[float, float, int]:
    """(bytes per second of copying, seconds of copying, bytes) of one flow copying `topic`."""
    text = "\n".join(
        [
            "clusters = S, T",
            f"S.bootstrap.servers = {source.bootstrap}",
            f"T.bootstrap.servers = {target.bootstrap}",
            "S->T.enabled = true",
            f"S->T.topics = {topic}",
            f"tasks.max = {tasks}",
            f"mirrorflow.replicate.max.bytes.per.second = {cap}",
            "emit.heartbeats.enabled = false",
            "replication.factor = 1",
            "offset-syncs.topic.replication.factor = 1",
            "offset.storage.replication.factor = 1",
            "checkpoints.topic.replication.factor = 1",
        ]
    )
    flow = load_config(text + "\n").flow("S", "T")
    clients = FlowClients.resolve(flow)
    plan = make_plan(flow, clients, run_id=f"throttle-{uuid.uuid4().hex[:8]}").plan
    results = run_locally(copy_job_for(flow, clients, plan), plan)
    failed = [r for r in results if not r.ok]
    if failed:
        raise SystemExit(f"{topic}: {failed[0].topic}-{failed[0].partition}: {failed[0].error}")
    by_unit = {(r.topic, r.partition): r for r in results}
    # A worker copies up to SLOT_THREADS slots side by side (each partition is a slot of its own
    # here): its copying time is that of its longest unit, from the start of its slot's copy.
    seconds = max(max(by_unit[(s.topic, s.partition)].seconds for s in dealt) for dealt in plan.slices())
    copied = sum(r.bytes for r in results)
    return copied / seconds, seconds, copied


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000, help="records of the uncapped copy")
    parser.add_argument("--size", type=int, default=1024, help="bytes per record (key + value)")
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--tasks", type=int, default=2, help="tasks.max: the workers sharing the cap")
    parser.add_argument("--seconds", type=float, default=60.0, help="how long each capped copy should take")
    parser.add_argument("--fractions", default="0.1,0.5", help="caps as fractions of the uncapped rate")
    parser.add_argument("--heap", default="1g", help="maximum heap of each Kafka broker")
    return parser.parse_args()


def main() -> int:
    args = parse_args()
    print(machine())
    print(f"command: {' '.join([sys.executable, *sys.argv])}")
    fractions = [float(f) for f in args.fractions.split(",")]
    with tempfile.TemporaryDirectory(prefix="mirrorflow-throttle-") as tmp_dir:
        tmp = Path(tmp_dir)
        source = LocalKafka(tmp / "source", overrides=QUICK_CLUSTER, heap=args.heap)
        target = LocalKafka(tmp / "target", overrides=QUICK_CLUSTER, heap=args.heap)
        try:
            source.launch()
            target.launch()
            source.start()
            target.start()
            fill(source.bootstrap, "uncapped", args.records, args.size, args.partitions)
            uncapped, seconds, _ = copy_rate(source, target, "uncapped", args.tasks, 0)
            print(f"uncapped: {uncapped / 1e6:.1f} MB/s over {seconds:.1f}s of copying", flush=True)
            rows = []
            for fraction in fractions:
                cap = int(uncapped * fraction)
                records = max(10_000, int(cap * args.seconds / args.size))
                topic = f"capped{int(fraction * 100)}"
                fill(source.bootstrap, topic, records, args.size, args.partitions)
                achieved, seconds, copied = copy_rate(source, target, topic, args.tasks, cap)
                error = achieved / cap - 1
                rows.append((fraction, cap, achieved, error, seconds))
                print(
                    f"cap {fraction:.0%} of uncapped ({cap / 1e6:.2f} MB/s): achieved {achieved / 1e6:.2f} MB/s "
                    f"({error:+.1%}), {copied / 1e6:.0f} MB in {seconds:.1f}s of copying",
                    flush=True,
                )
        finally:
            source.stop()
            target.stop()
    print()
    print(f"{'cap':>8} {'cap MB/s':>9} {'achieved MB/s':>14} {'error':>7} {'seconds':>8}  verdict")
    for fraction, cap, achieved, error, seconds in rows:
        verdict = "met" if abs(error) <= 0.10 else "MISSED"
        print(
            f"{fraction:>8.0%} {cap / 1e6:>9.2f} {achieved / 1e6:>14.2f} {error:>+7.1%} {seconds:>8.1f}  {verdict}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
