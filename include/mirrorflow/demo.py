"""`make demo`: the main job end to end on the embedded default.

Two devbroker clusters (primary and backup) are started on free ports, primary is seeded with
the data shapes that make replication hard (keys, headers, nulls, a compacted topic with
offset gaps, committed and aborted transactions), and the result is printed per topic.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from rich.console import Console
from rich.table import Table

from devbroker.launcher import DevBroker

ROOT = Path(__file__).resolve().parents[2]
DEMO_DIR = ROOT / ".demo"


@dataclass(frozen=True)
class SeedTopic:
    name: str
    partitions: int
    description: str
    configs: dict[str, str]


SEED_TOPICS = (
    SeedTopic("orders", 6, "keyed records with headers", {}),
    SeedTopic("payments", 3, "null values and tombstones", {}),
    SeedTopic("customers", 2, "compacted: offsets with gaps", {"cleanup.policy": "compact"}),
    SeedTopic("ledger", 2, "transactional: committed and aborted", {}),
)


def create_topics(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics(
        [NewTopic(t.name, t.partitions, 1, config=t.configs) for t in SEED_TOPICS], operation_timeout=10
    )
    for future in futures.values():
        future.result()


def seed(broker: DevBroker) -> dict[str, int]:
    """Write the demo data; returns how many records each topic should show a consumer."""
    create_topics(broker.bootstrap)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True, "linger.ms": 5})
    visible: dict[str, int] = {}

    for i in range(3000):
        producer.produce(
            "orders",
            key=f"order-{i % 500}".encode(),
            value=f'{{"order": {i}, "amount": {i * 7 % 1000}}}'.encode(),
            headers=[("source", b"web"), ("trace-id", f"{i:08x}".encode())],
            timestamp=1_700_000_000_000 + i,
        )
    visible["orders"] = 3000

    for i in range(600):
        value = None if i % 5 == 0 else f"payment-{i}".encode()
        producer.produce("payments", key=f"acct-{i % 40}".encode(), value=value)
    producer.produce("payments", key=None, value=None)
    visible["payments"] = 601

    for round_ in range(5):
        for customer in range(50):
            producer.produce("customers", key=f"cust-{customer}".encode(), value=f"v{round_}".encode())
    producer.flush(30)
    broker.compact_now("customers")
    visible["customers"] = _count(broker.bootstrap, "customers")

    txn = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "demo-ledger"})
    txn.init_transactions(30)
    committed = 0
    for batch in range(10):
        txn.begin_transaction()
        for i in range(40):
            txn.produce("ledger", key=f"entry-{batch}-{i}".encode(), value=f"{batch * 40 + i}".encode())
        if batch % 3 == 2:
            txn.abort_transaction(30)
        else:
            txn.commit_transaction(30)
            committed += 40
    visible["ledger"] = committed
    return visible


def _count(bootstrap: str, topic: str, isolation: str = "read_committed") -> int:
    """Records a read_committed consumer sees from the beginning to the end of every partition."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "mirrorflow-demo-reader",
            "enable.auto.commit": False,
            "isolation.level": isolation,
            "enable.partition.eof": True,
        }
    )
    try:
        metadata = consumer.list_topics(topic, timeout=10).topics[topic]
        if metadata.error is not None:
            raise KafkaException(metadata.error)
        partitions = [TopicPartition(topic, p, 0) for p in metadata.partitions]
        consumer.assign(partitions)
        remaining = {p.partition for p in partitions}
        count = 0
        while remaining:
            for message in consumer.consume(500, timeout=5):
                if message.error() is None:
                    count += 1
                elif message.error().code() == -191:  # _PARTITION_EOF
                    remaining.discard(message.partition())
                else:
                    raise KafkaException(message.error())
        return count
    finally:
        consumer.close()


def start_clusters(console: Console) -> tuple[DevBroker, DevBroker]:
    if DEMO_DIR.exists():
        shutil.rmtree(DEMO_DIR)
    DEMO_DIR.mkdir()
    brokers = []
    for alias in ("primary", "backup"):
        broker = DevBroker(
            cluster_id=f"demo-{alias}",
            data_dir=DEMO_DIR / alias,
            log_path=DEMO_DIR / f"{alias}.log",
            overrides={"group.initial.rebalance.delay.ms": 0},
        ).start()
        console.print(f"[bold]{alias}[/bold] devbroker on {broker.bootstrap} (data in {broker.data_dir})")
        brokers.append(broker)
    return brokers[0], brokers[1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mirrorflow.demo", description=__doc__)
    parser.parse_args(argv)
    console = Console()
    primary, backup = start_clusters(console)
    try:
        console.print("Seeding primary ...")
        expected = seed(primary)
        table = Table(title="primary cluster after seeding")
        table.add_column("topic")
        table.add_column("what it exercises")
        table.add_column("records read back", justify="right")
        table.add_column("as expected")
        ok = True
        for topic in SEED_TOPICS:
            read = _count(primary.bootstrap, topic.name)
            good = read == expected[topic.name]
            ok &= good
            table.add_row(topic.name, topic.description, str(read), "yes" if good else "[red]NO[/red]")
        console.print(table)
        return 0 if ok else 1
    finally:
        primary.stop()
        backup.stop()


if __name__ == "__main__":
    sys.exit(main())
