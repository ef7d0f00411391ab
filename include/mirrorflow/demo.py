"""`make demo`: the main job end to end on the embedded default.

Two real Apache Kafka clusters (primary and backup, single KRaft nodes started by localkafka)
are started on free ports, primary is seeded with
the data shapes that make replication hard (keys, headers, nulls, a compacted topic with
offset gaps, committed and aborted transactions), the replicate DAG runs through Airflow
(`airflow dags test`) with the real Spark job, and the result is compared per topic.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from dataclasses import dataclass

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from rich.console import Console
from rich.table import Table

from localkafka import QUICK_CLUSTER, LocalKafka, kafka_version
from localkafka.compaction import compact
from mirrorflow.airflow.local import AirflowHome
from mirrorflow.airflow.settings import PROJECT_ROOT
from mirrorflow.kafka import read_partition
from mirrorflow.policy.provenance import HEADER_PREFIX
from mirrorflow.replicate.run_reading import iter_run_records

DEMO_DIR = PROJECT_ROOT / ".demo"
DEMO_CONFIG = PROJECT_ROOT / "include" / "config" / "demo.properties"
DAG_ID = "mirrorflow__primary__backup__replicate"


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


def seed(broker: LocalKafka) -> dict[str, int]:
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
    # Kafka's log cleaner compacts the five rounds down to the last value of each customer; the
    # record that closes each partition's segment is a customer who joined afterwards.
    compact(broker, "customers", {p: (f"cust-new-{p}".encode(), b"v0") for p in range(2)})
    visible["customers"] = _count(broker.bootstrap, "customers")

    txn = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "demo-ledger"})
    txn.init_transactions(30)
    committed = 0
    for batch in range(10):
        txn.begin_transaction()
        for i in range(40):
            txn.produce("ledger", key=f"entry-{batch}-{i}".encode(), value=f"{batch * 40 + i}".encode())
        if batch % 3 == 2:
            # Aborted records reach the log (flushed first), so readers meet real gaps; an abort
            # of records still queued also trips librdkafka issue #4849 (INVALID_TXN_STATE).
            txn.flush(30)
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


def start_clusters(console: Console) -> tuple[LocalKafka, LocalKafka]:
    if DEMO_DIR.exists():
        shutil.rmtree(DEMO_DIR)
    DEMO_DIR.mkdir()
    brokers: list[LocalKafka] = []
    try:
        for alias in ("primary", "backup"):
            broker = LocalKafka(DEMO_DIR / alias, overrides=QUICK_CLUSTER)
            brokers.append(broker)
            broker.start()
            console.print(
                f"[bold]{alias}[/bold] Apache Kafka {kafka_version()} on {broker.bootstrap} "
                f"(data and server.log in {broker.data_dir})"
            )
    except BaseException:
        for broker in brokers:
            broker.stop()
        raise
    return brokers[0], brokers[1]


def _content(bootstrap: str, topic: str, partition: int) -> list[tuple]:
    """What a copy must keep byte for byte: key, value, headers (mirrorflow's own aside), timestamp."""
    return [
        (
            m.key(),
            m.value(),
            tuple(h for h in (m.headers() or ()) if not h[0].startswith(HEADER_PREFIX)),
            m.timestamp()[1],
        )
        for m in read_partition({"bootstrap.servers": bootstrap}, topic, partition)
    ]


def run_replicate_dag(console: Console, primary: LocalKafka, backup: LocalKafka) -> bool:
    home = AirflowHome(DEMO_DIR / "airflow")
    console.print(f"Preparing Airflow (SQLite metadata in {home.home}) ...")
    home.migrate()
    env = {
        "MIRRORFLOW_CONFIG": str(DEMO_CONFIG),
        "MIRRORFLOW_DEMO_PRIMARY": primary.bootstrap,
        "MIRRORFLOW_DEMO_BACKUP": backup.bootstrap,
    }
    console.print(
        f"Running [bold]{DAG_ID}[/bold] with `airflow dags test` (plan -> Spark copy -> report) ..."
    )
    started = time.monotonic()
    result = home.dags_test(DAG_ID, env=env)
    log_path = DEMO_DIR / "dag-run.log"
    log_path.write_text(result.log)
    console.print(
        f"DAG run finished in {time.monotonic() - started:.0f}s: state={result.state} (log: {log_path})"
    )
    if not result.succeeded:
        console.print(result.log[-3000:], markup=False)
    return result.succeeded


def compare(console: Console, primary: LocalKafka, backup: LocalKafka, expected: dict[str, int]) -> bool:
    summaries = [
        json.loads(body)
        for _, _, _, kind, body in iter_run_records({"bootstrap.servers": backup.bootstrap})
        if kind == "summary"
    ]
    copied = summaries[-1]["topics"] if summaries else {}
    table = Table(title="primary -> backup")
    for column in (
        "topic",
        "what it exercises",
        "remote topic on backup",
        "records on primary",
        "records copied",
        "backup equals primary",
    ):
        table.add_column(column)
    ok = True
    for topic in SEED_TOPICS:
        remote = f"primary.{topic.name}"
        same = all(
            _content(primary.bootstrap, topic.name, p) == _content(backup.bootstrap, remote, p)
            for p in range(topic.partitions)
        )
        records = copied.get(topic.name, {}).get("records", 0)
        ok &= same and records == expected[topic.name]
        table.add_row(
            topic.name,
            topic.description,
            remote,
            str(expected[topic.name]),
            str(records),
            "yes" if same else "[red]NO[/red]",
        )
    console.print(table)
    if summaries:
        totals = summaries[-1]["totals"]
        console.print(
            f"{totals['records']} records in {totals['transactions']} transactions, "
            f"{totals['offset_syncs']} offset-syncs, lag left {summaries[-1]['lag_left']}"
        )
    return ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mirrorflow.demo", description=__doc__)
    parser.parse_args(argv)
    console = Console()
    if not console.is_terminal:
        console = Console(width=140)
    primary, backup = start_clusters(console)
    try:
        console.print("Seeding primary ...")
        expected = seed(primary)
        if not run_replicate_dag(console, primary, backup):
            return 1
        return 0 if compare(console, primary, backup, expected) else 1
    finally:
        primary.stop()
        backup.stop()


if __name__ == "__main__":
    sys.exit(main())
