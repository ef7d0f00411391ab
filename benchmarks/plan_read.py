"""A plan's read of the flow's progress: on from the previous plan's read, against from the start.

A scheduled flow's progress topic (`mm2-offsets.A.internal`, compacted) keeps every progress
write in its active segment until the segment rolls (a week or 1 GiB by Kafka's defaults), so a
plan that reads it from the start reads more every run. service.plan_run reads on from where the
flow's newest plan stopped (`progress_read` in its plan record, docs/concepts/state-in-kafka.md).

Two local clusters (benchmarks/_clusters.py, the Kafka pinned in kafka/pom.xml). A has --topics
topics of 10 partitions, empty. B's progress topic gets --history rounds of progress for every
source partition, as a day of copies leaves it, and a first plan stores its read. Then --repeats
plans are made each way, alternating, each after one more round (what the copy after the
previous plan wrote): as plan_run makes them (on from the previous plan's read) and from the
topic's start (the same plan_run with no previous read). Printed per way: the median wall and CPU seconds of plan_run
(in this process: Python and librdkafka's threads) and the progress records its reader read.

    python benchmarks/plan_read.py                      # 1,000 partitions x 50 rounds
    python benchmarks/plan_read.py --topics 1000 --history 20
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

from confluent_kafka import Producer

sys.path[:0] = [str(Path(__file__).resolve().parents[1] / "include"), str(Path(__file__).resolve().parent)]

from _clusters import SINGLE_NODE_REPLICATION, create_topics, two_clusters  # noqa: E402

from mirrorflow.config import load_config  # noqa: E402
from mirrorflow.replicate import planner, service  # noqa: E402
from mirrorflow.replicate.progress import ProgressReader  # noqa: E402
from mirrorflow.replicate.progress_records import progress_record  # noqa: E402


def config_text(source: str, target: str) -> str:
    return (
        f"clusters = A, B\nA.bootstrap.servers = {source}\nB.bootstrap.servers = {target}\n"
        "A->B.enabled = true\nA->B.topics = pr-.*\n" + SINGLE_NODE_REPLICATION
    )


def write_rounds(flow, target: str, parts: list[tuple[str, int]], rounds: range) -> None:
    """Progress records for every source partition, one round after another (offset 0: the
    source topics are empty, so every plan finds nothing to copy and only the read differs)."""
    producer = Producer(
        {"bootstrap.servers": target, "linger.ms": 20, "batch.num.messages": 10000, "log_level": 3}
    )
    for _ in rounds:
        for source_topic, partition in parts:
            key, value, where = progress_record(
                "A", source_topic, partition, 0, flow.offset_storage_partitions
            )
            while True:
                try:
                    producer.produce(flow.offset_storage_topic, key=key, value=value, partition=where)
                    break
                except BufferError:  # librdkafka's queue is full: let deliveries drain it
                    producer.poll(0.1)
            producer.poll(0)
    if producer.flush(120):
        raise RuntimeError("progress records were not all written")


class Counted(ProgressReader):
    """The plan's reader, remembered for its records_read."""

    last: ProgressReader | None = None

    def __exit__(self, *exc: object) -> None:
        Counted.last = self
        super().__exit__(*exc)


def one_plan(config, seeded: bool) -> tuple[float, float, int]:
    original = service.previous_progress_read
    if not seeded:
        service.previous_progress_read = lambda _flow, _clients: None
    try:
        wall, cpu = time.monotonic(), time.process_time()
        service.plan_run(config, "A", "B", run_id=f"bench__{uuid.uuid4().hex[:12]}")
        wall, cpu = time.monotonic() - wall, time.process_time() - cpu
    finally:
        service.previous_progress_read = original
    assert Counted.last is not None
    return wall, cpu, Counted.last.records_read


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--topics", type=int, default=100, help="source topics of 10 partitions (default 100)"
    )
    parser.add_argument("--history", type=int, default=50, help="rounds of progress before the first plan")
    parser.add_argument("--repeats", type=int, default=5, help="plans made each way (default 5)")
    args = parser.parse_args()
    planner.ProgressReader = Counted
    with tempfile.TemporaryDirectory(prefix="plan-read-") as tmp, two_clusters(Path(tmp)) as (source, target):
        names = [f"pr-{i:05d}" for i in range(args.topics)]
        create_topics(source.bootstrap, names, 10)
        parts = [(name, p) for name in names for p in range(10)]
        config = load_config(config_text(source.bootstrap, target.bootstrap))
        flow = config.flow("A", "B")
        create_topics(
            target.bootstrap,
            [flow.offset_storage_topic],
            flow.offset_storage_partitions,
            {"cleanup.policy": "compact"},
        )
        write_rounds(flow, target.bootstrap, parts, range(args.history))
        first = one_plan(config, seeded=True)  # no earlier plan: reads from the start, stores its read
        ways: dict[str, list[tuple[float, float, int]]] = {
            "on from the previous plan": [],
            "from the start": [],
        }
        for _ in range(args.repeats):
            for way, seeded in (("on from the previous plan", True), ("from the start", False)):
                # The copy after the previous plan wrote a round (every plan stores its read).
                write_rounds(flow, target.bootstrap, parts, range(1))
                ways[way].append(one_plan(config, seeded=seeded))
    print(
        f"{len(parts):,} source partitions, {args.history} rounds of progress before the first plan "
        f"({len(parts) * args.history:,} records), one more before each plan after; "
        f"first plan (no earlier read): "
        f"{first[0]:.2f} s, {first[2]:,} records read"
    )
    print(f"{'plan read':<28}{'wall s':>9}{'CPU s':>9}{'records read':>15}")
    medians = {}
    for way, runs in ways.items():
        wall = statistics.median(r[0] for r in runs)
        cpu = statistics.median(r[1] for r in runs)
        read = statistics.median(r[2] for r in runs)
        medians[way] = (wall, cpu)
        print(f"{way:<28}{wall:>9.2f}{cpu:>9.2f}{read:>15,.0f}")
    on, full = medians["on from the previous plan"], medians["from the start"]
    print(f"ratio (on / from the start): wall {on[0] / full[0]:.2f}, CPU {on[1] / full[1]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
