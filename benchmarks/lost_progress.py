"""A plan that finds no progress for partitions whose remote partitions hold the flow's copies.

After the flow's progress topic is deleted or emptied, the plan reads the last committed record of
every such remote partition, and the source record its provenance names, to go on after the
copies instead of copying everything again (replicate/found_copies.py). This script measures what
that costs a plan, in one run on the same two local clusters (benchmarks/_clusters.py, the Kafka
pinned in kafka/pom.xml):

- *with progress*: a plan of the flow as every scheduled run makes it (nothing read on the target
  but progress);
- *progress deleted*: the same plan after the progress topic was deleted (one batched read of the
  remote partitions' tails, one of the source records);
- *naive loop* (baseline): the same reads made partition by partition with a consumer each, as a
  check written per partition would make them (not a plan: only the reads), over the first
  --naive-sample partitions, and the figure scaled to all of them (it is linear: one partition
  after another).

A has --topics topics of 10 partitions with --records records each, copied once with
`mirrorflow replicate` (tasks.max 2). Printed: the median wall and CPU seconds of each
(in this process: Python and librdkafka's threads) over --repeats, alternating.

    python benchmarks/lost_progress.py                  # 1,000 partitions
    python benchmarks/lost_progress.py --topics 500     # 5,000 partitions
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections import deque
from pathlib import Path

from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient

sys.path[:0] = [str(Path(__file__).resolve().parents[1] / "include"), str(Path(__file__).resolve().parent)]

from _clusters import SINGLE_NODE_REPLICATION, create_topics, two_clusters  # noqa: E402

from mirrorflow.clients import FlowClients  # noqa: E402
from mirrorflow.config import load_config  # noqa: E402
from mirrorflow.kafka import read_partition, reader  # noqa: E402
from mirrorflow.policy.provenance import read_provenance  # noqa: E402
from mirrorflow.replicate import service  # noqa: E402
from mirrorflow.replicate.copy.recovery.landed import landed_check  # noqa: E402

MIRRORFLOW = str(Path(sys.executable).parent / "mirrorflow")


def config_text(source: str, target: str) -> str:
    return (
        f"clusters = A, B\nA.bootstrap.servers = {source}\nB.bootstrap.servers = {target}\n"
        "A->B.enabled = true\nA->B.topics = lp-.*\ntasks.max = 2\n" + SINGLE_NODE_REPLICATION
    )


def fill(source: str, parts: list[tuple[str, int]], records: int) -> None:
    producer = Producer({"bootstrap.servers": source, "linger.ms": 20, "log_level": 3})
    for topic, partition in parts:
        for i in range(records):
            producer.produce(topic, key=b"%d" % i, value=b"v" * 100, partition=partition)
        producer.poll(0)
    if producer.flush(120):
        raise RuntimeError("source records were not all written")


def delete_progress(target: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": target})
    for future in admin.delete_topics([topic]).values():
        future.result(60)
    deadline = time.monotonic() + 60
    while topic in admin.list_topics(timeout=10).topics:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{topic} still listed a minute after its deletion")
        time.sleep(0.2)


def timed(call) -> tuple[float, float]:
    wall, cpu = time.monotonic(), time.process_time()
    call()
    return time.monotonic() - wall, time.process_time() - cpu


def plan(config) -> None:
    service.plan_run(config, "A", "B", run_id=f"bench__{uuid.uuid4().hex[:12]}")


def _last_committed(config: dict, topic: str, partition: int):
    """The partition's last committed record, a consumer for its watermarks and one per read
    window (200 offsets back from the last stable offset, then ten times more)."""
    consumer = reader(config)
    try:
        low, end = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=15)
    finally:
        consumer.close()
    window = 200
    while end > low:
        start = max(low, end - window)
        tail = deque(read_partition(config, topic, partition, start=start, idle_timeout_s=15), 1)
        if tail:
            return tail[0]
        end, window = start, window * 10
    return None


def _record_at(config: dict, topic: str, partition: int, offset: int):
    read = read_partition(config, topic, partition, start=offset, end=offset + 1, idle_timeout_s=15)
    with contextlib.closing(read):
        return next(read, None)


def naive(flow, parts: list[tuple[str, int]]) -> None:
    """Each partition's remote tail and the source record it names, a consumer per read."""
    clients = FlowClients.resolve(flow)
    source, target = clients.source_consumer, clients.target_consumer
    for topic, partition in parts:
        last = _last_committed(target, f"A.{topic}", partition)
        if not last:
            raise RuntimeError(f"A.{topic}-{partition}: no committed record read")
        stamp = read_provenance(last.headers())
        if _record_at(source, topic, partition, stamp.source_offset) is None:
            raise RuntimeError(f"{topic}-{partition}: no source record at {stamp.source_offset}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--topics", type=int, default=100, help="source topics of 10 partitions (default 100)"
    )
    parser.add_argument("--records", type=int, default=5, help="records per partition (default 5)")
    parser.add_argument("--repeats", type=int, default=3, help="plans made each way (default 3)")
    parser.add_argument(
        "--naive-sample", type=int, default=50, help="partitions the naive loop reads (0: none; default 50)"
    )
    args = parser.parse_args()
    with (
        tempfile.TemporaryDirectory(prefix="lost-progress-") as tmp,
        two_clusters(Path(tmp)) as (source, target),
    ):
        names = [f"lp-{i:05d}" for i in range(args.topics)]
        create_topics(source.bootstrap, names, 10)
        parts = [(name, p) for name in names for p in range(10)]
        fill(source.bootstrap, parts, args.records)
        path = Path(tmp) / "mm2.properties"
        path.write_text(config_text(source.bootstrap, target.bootstrap))
        config = load_config(path.read_text())
        flow = config.flow("A", "B")
        copied = subprocess.run(
            [MIRRORFLOW, "replicate", str(path), "--flow", "A->B", "--output", "json"],
            capture_output=True,
            text=True,
            timeout=1800,
        )
        if copied.returncode != 0:
            raise SystemExit(f"the first copy failed:\n{copied.stdout[-3000:]}\n{copied.stderr[-3000:]}")
        ways: dict[str, list[tuple[float, float]]] = {
            "with progress": [],
            "progress deleted": [],
            "landed check, all": [],
        }
        clients = FlowClients.resolve(flow)
        check = landed_check(
            clients.source_consumer, clients.target_consumer, lambda t: f"A.{t}", source="A", target="B"
        )

        def landed_all() -> None:
            # What a sweep asks of a hanging progress transaction that holds every partition's
            # progress at its last copied offset: every copy landed.
            answers = check([(t, p, args.records - 1) for t, p in parts])
            wrong = [where for where, answer in answers.items() if answer is not True]
            if wrong or len(answers) != len(parts):
                raise RuntimeError(
                    f"landed check: {len(wrong)} partition(s) not told landed, e.g. {wrong[:3]}"
                )

        sample = parts[: args.naive_sample]
        if sample:
            ways[f"naive loop, x{len(parts) / len(sample):g}"] = []
        for _ in range(args.repeats):
            ways["with progress"].append(timed(lambda: plan(config)))
        delete_progress(target.bootstrap, flow.offset_storage_topic)
        for _ in range(args.repeats):
            ways["progress deleted"].append(timed(lambda: plan(config)))
            ways["landed check, all"].append(timed(landed_all))
            if sample:
                wall, cpu = timed(lambda: naive(flow, sample))
                scale = len(parts) / len(sample)
                ways[f"naive loop, x{scale:g}"].append((wall * scale, cpu * scale))
    print(
        f"{len(parts):,} source partitions with {args.records} records each, copied once; "
        f"medians of {args.repeats}; load average at the end {os.getloadavg()[0]:.2f}"
    )
    print(f"{'plan':<26}{'wall s':>9}{'CPU s':>9}")
    medians = {}
    for way, runs in ways.items():
        medians[way] = (statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs))
        print(f"{way:<26}{medians[way][0]:>9.2f}{medians[way][1]:>9.2f}")
    base, lost = medians["with progress"], medians["progress deleted"]
    print(f"progress deleted / with progress: wall {lost[0] / base[0]:.2f}, CPU {lost[1] / base[1]:.2f}")
    if sample:
        loop = medians[f"naive loop, x{len(parts) / len(sample):g}"]
        print(f"naive loop / the plan's batched reads: wall {loop[0] / max(lost[0] - base[0], 0.01):.1f}")
        print(f"naive loop / the landed check: wall {loop[0] / medians['landed check, all'][0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
