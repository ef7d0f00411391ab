"""devbroker produce-only and fetch-only throughput with confluent-kafka clients.

Starts one devbroker (memory only unless --data-dir), writes N records of --size bytes to a
topic of --partitions partitions, then reads them all back with a fresh consumer, and prints
MB/s and records/s for each direction. Run: `.venv/bin/python benchmarks/devbroker_throughput.py`.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import uuid

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from devbroker.launcher import DevBroker


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=300_000)
    parser.add_argument("--size", type=int, default=1024, help="value bytes per record")
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--compression", default="none", help="producer compression.type")
    parser.add_argument("--data-dir", action="store_true", help="use a temporary data dir (disk-backed logs)")
    parser.add_argument("--log", help="broker stderr log file")
    parser.add_argument(
        "--bootstrap",
        help="measure an already running broker instead (e.g. a devbroker under cProfile, or real Kafka)",
    )
    return parser.parse_args()


def produce(bootstrap: str, topic: str, records: int, size: int, compression: str) -> float:
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 20,
            "batch.size": 1_000_000,
            "queue.buffering.max.kbytes": 1_048_576,
            "queue.buffering.max.messages": 1_000_000,
            "compression.type": compression,
            "acks": "all",
        }
    )
    payload = os.urandom(size)
    start = time.perf_counter()
    for i in range(records):
        while True:
            try:
                producer.produce(topic, value=payload, key=str(i % 1000).encode())
                break
            except BufferError:
                producer.poll(0.01)
        if i % 10_000 == 0:
            producer.poll(0)
    left = producer.flush(120)
    elapsed = time.perf_counter() - start
    if left:
        raise SystemExit(f"{left} records were not acknowledged within 120 s")
    return elapsed


def fetch(bootstrap: str, topic: str, partitions: int, records: int) -> float:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "devbroker-bench",
            "enable.auto.commit": False,
            "fetch.max.bytes": 52_428_800,
            "max.partition.fetch.bytes": 10_485_760,
            "queued.max.messages.kbytes": 1_048_576,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    seen = 0
    start = time.perf_counter()
    deadline = start + 120
    while seen < records and time.perf_counter() < deadline:
        for message in consumer.consume(10_000, timeout=1.0):
            if message.error() is None:
                seen += 1
    elapsed = time.perf_counter() - start
    consumer.close()
    if seen < records:
        raise SystemExit(f"consumed only {seen} of {records} records within 120 s")
    return elapsed


def report(label: str, records: int, size: int, seconds: float) -> None:
    mb = records * size / 1_000_000
    sys.stdout.write(
        f"{label:<8} {records:>9} records  {seconds:7.2f} s  {mb / seconds:8.1f} MB/s  {records / seconds:10.0f} records/s\n"
    )


def run(bootstrap: str, label: str, args: argparse.Namespace) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic = f"bench-{uuid.uuid4().hex[:8]}"
    admin.create_topics([NewTopic(topic, args.partitions, 1)])[topic].result(30)
    sys.stdout.write(
        f"{label} {bootstrap}: {args.records} records of {args.size} B, {args.partitions} partitions,"
        f" compression={args.compression}\n"
    )
    report(
        "produce",
        args.records,
        args.size,
        produce(bootstrap, topic, args.records, args.size, args.compression),
    )
    report("fetch", args.records, args.size, fetch(bootstrap, topic, args.partitions, args.records))
    admin.delete_topics([topic])[topic].result(30)


def main() -> None:
    args = parse_args()
    if args.bootstrap:
        run(args.bootstrap, "broker", args)
        return
    with tempfile.TemporaryDirectory() as tmp:
        broker = DevBroker(data_dir=tmp if args.data_dir else None, log_path=args.log)
        with broker:
            run(broker.bootstrap, f"devbroker (data dir: {'yes' if args.data_dir else 'no, memory'})", args)


if __name__ == "__main__":
    main()
