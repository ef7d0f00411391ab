"""A plain exactly-once copy loop on librdkafka: the floor for benchmarks/lag.py.

One process copies some partitions of a topic: a read_committed consumer, one transactional
producer, and a loop that takes whatever the consumer has, writes it and the source positions
(one record of a compacted topic, as Connect stores a source task's offsets) in one transaction,
and commits. No fencing of other writers, no offset-syncs, no check of what landed, no retries:
nothing of what makes a copy safe to resume, only its transactions. It is how fast an
exactly-once copy can be made visible with librdkafka's transactions on this machine: a replicator
that commits as often and does more in each transaction is not quicker.

With --per-partition, each partition has a loop, a consumer and a transactional producer of its
own, in a thread: the shape of a copy whose writers (and so its transactions) are per partition,
as mirrorflow's slot writers are when a flow has fewer partitions than slots.

Run by lag.py: `txn_loop.py SOURCE TARGET TOPIC REMOTE PARTITIONS [--per-partition]` (PARTITIONS
comma-separated); it copies until SIGINT or SIGTERM.
"""

from __future__ import annotations

import json
import signal
import sys
import threading
import uuid

from confluent_kafka import Consumer, Producer, TopicPartition

BATCH = 10_000


def main() -> int:
    source, target, topic, remote, listed = sys.argv[1:6]
    halt: list[bool] = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: halt.append(True))
    if sys.argv[6:] == ["--per-partition"]:
        lanes = [
            threading.Thread(target=copy, args=(source, target, topic, remote, p, halt))
            for p in listed.split(",")
        ]
        for lane in lanes:
            lane.start()
        for lane in lanes:
            lane.join()
        return 0
    copy(source, target, topic, remote, listed, halt)
    return 0


def copy(source: str, target: str, topic: str, remote: str, listed: str, halt: list) -> None:
    partitions = [int(p) for p in listed.split(",")]
    consumer = Consumer(
        {
            "bootstrap.servers": source,
            "group.id": f"txn-loop-{uuid.uuid4().hex}",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "enable.partition.eof": False,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
    producer = Producer(
        {"bootstrap.servers": target, "transactional.id": f"txn-loop-{remote}-{listed}", "linger.ms": 5}
    )
    producer.init_transactions(60)
    positions: dict[int, int] = {}
    while not halt:
        first = consumer.poll(0.1)
        if first is None:
            continue
        messages = [first, *consumer.consume(BATCH, 0)]
        producer.begin_transaction()
        for message in messages:
            if message.error() is not None:
                raise RuntimeError(message.error().str())
            producer.produce(
                remote,
                key=message.key(),
                value=message.value(),
                headers=message.headers(),
                timestamp=message.timestamp()[1],
                partition=message.partition(),
            )
            positions[message.partition()] = message.offset() + 1
        producer.produce(f"{remote}.positions", key=listed.encode(), value=json.dumps(positions).encode())
        producer.commit_transaction(60)
    consumer.close()


if __name__ == "__main__":
    sys.exit(main())
