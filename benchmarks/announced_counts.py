"""What a window's driver pays to learn which writer-slot counts may still be writing.

Before a window's tasks start, its driver reads the takeovers of the flow's windows stored in the
run-records topic over the last hour and six minutes (replicate/window/announced.py): one
ListOffsets for the first record of that time, then one read to the topic's end. The topic keeps a
month of every flow's run records, most of them the status records each window task stores every
5 s. This script fills it on one local broker (the Kafka pinned in kafka/pom.xml) with --hours of
records at --rate records a second (status records of --flows flows, and the takeovers of one flow's
hourly windows, tasks.max changing every window), with their timestamps spread over those hours,
and measures in one run, alternating, over --repeats:

- *the driver's read*: announced_counts as a window's driver calls it;
- *a read from the topic's start* (baseline): the same filter over every record the topic holds,
  what a reader without the time lookup would read.

Printed: records in the topic and in the read, and the median wall and CPU seconds of each (in this
process: Python and librdkafka's threads), and their ratio.

    python benchmarks/announced_counts.py                       # 24 h at 20 records/s
    python benchmarks/announced_counts.py --hours 72 --rate 40
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

sys.path[:0] = [str(Path(__file__).resolve().parents[1] / "include"), str(Path(__file__).resolve().parent)]

from localkafka import QUICK_CLUSTER, LocalKafka  # noqa: E402
from mirrorflow.replicate.run_history import read_ranges, runs_bounds  # noqa: E402
from mirrorflow.replicate.run_reading import parse_key  # noqa: E402
from mirrorflow.replicate.runs import RUNS_TOPIC, ensure_runs_topic  # noqa: E402
from mirrorflow.replicate.window.announced import LIVE_S, announced_counts  # noqa: E402

FLOW = "A->B"
STATUS = json.dumps(
    {
        "task": 3,
        "tasks": 8,
        "attempt": "0" * 32,
        "batches": 12345,
        "partitions": 125,
        "records": 987654,
        "bytes": 123456789,
        "lag_ms": {"p50": 120, "p99": 850, "max": 1300},
        "topics": {"orders": 850},
    }
)


def fill(bootstrap: str, *, hours: float, rate: float, flows: int) -> int:
    """The run-records topic with `hours` of records at `rate` a second, timestamps spread over
    them, ending now; returns how many."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50, "compression.type": "zstd"})

    def send(key: str, value: str, at: int) -> None:
        while True:
            try:
                producer.produce(RUNS_TOPIC, key=key, value=value, timestamp=at)
                return
            except BufferError:
                producer.poll(0.5)

    now_ms = int(time.time() * 1000)
    count = int(hours * 3600 * rate)
    step_ms = 1000.0 / rate
    first_ms = now_ms - int(hours * 3600 * 1000)
    hour = 0
    for i in range(count):
        at = first_ms + int(i * step_ms)
        if (at - first_ms) // 3_600_000 >= hour:
            # The takeover of the hour's window of the measured flow (tasks.max 2, 3, 4, 2, ...).
            body = {"plan_offset": i, "attempt": f"{hour}", "slots": [0], "writer_slots": 2 + hour % 3}
            send(f"{FLOW}|window-{hour}|takeover", json.dumps(body), at)
            hour += 1
        send(f"F{i % flows}->X|window-{hour}|window", STATUS, at)
        if i % 1_000 == 0:
            producer.poll(0)
    producer.flush(120)
    return count + hour


def full_read(consumer: dict) -> set[int]:
    low, end = runs_bounds(consumer, 30) or (0, 0)
    counts = set()
    for message in read_ranges(consumer, {(RUNS_TOPIC, 0): (low, end)}, 30):
        name, _, kind, _ = parse_key(message)
        if name == FLOW and kind == "takeover":
            counts.add(json.loads(message.value())["writer_slots"])
    return counts


def measure(call) -> tuple[float, float, object]:
    wall, cpu = time.perf_counter(), time.process_time()
    out = call()
    return time.perf_counter() - wall, time.process_time() - cpu, out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hours", type=float, default=24.0)
    parser.add_argument("--rate", type=float, default=20.0)
    parser.add_argument("--flows", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="announced-") as tmp:
        kafka = LocalKafka(Path(tmp) / "target", overrides=QUICK_CLUSTER)
        try:
            kafka.launch()
            kafka.start()
            ensure_runs_topic(AdminClient({"bootstrap.servers": kafka.bootstrap}), 1)
            started = time.perf_counter()
            total = fill(kafka.bootstrap, hours=args.hours, rate=args.rate, flows=args.flows)
            print(
                f"filled {RUNS_TOPIC} with {total:,} records in {time.perf_counter() - started:.1f}s",
                flush=True,
            )
            config = {"bootstrap.servers": kafka.bootstrap}
            since_ms = int(time.time() * 1000) - int(LIVE_S * 1000)
            in_read = int(min(args.hours * 3600, LIVE_S) * args.rate)
            scans, fulls = [], []
            for _ in range(args.repeats):
                scans.append(measure(lambda: announced_counts(config, config, FLOW, since_ms=since_ms)))
                fulls.append(measure(lambda: full_read(config)))
            print(f"driver's read counts {sorted(scans[0][2])}, whole topic's {sorted(fulls[0][2])}")
            scan_wall = statistics.median(s[0] for s in scans)
            scan_cpu = statistics.median(s[1] for s in scans)
            full_wall = statistics.median(f[0] for f in fulls)
            full_cpu = statistics.median(f[1] for f in fulls)
            print("| read | records | wall s | CPU s |")
            print("|---|---|---|---|")
            print(
                f"| the driver's (last {LIVE_S / 3600:.2f} h) | ~{in_read:,} | {scan_wall:.2f} | {scan_cpu:.2f} |"
            )
            print(f"| from the topic's start (baseline) | {total:,} | {full_wall:.2f} | {full_cpu:.2f} |")
            print(
                f"ratio (baseline / driver's): wall {full_wall / scan_wall:.1f}x, CPU {full_cpu / max(scan_cpu, 1e-3):.1f}x"
            )
        finally:
            kafka.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
