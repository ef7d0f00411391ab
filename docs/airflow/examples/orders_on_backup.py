"""A DAG scheduled on a replicated topic: it runs after each mirrorflow run that copied records
into `primary.orders` on the backup cluster, and reads exactly those records.

Each event's `extra` holds the run's figures for the topic: records, bytes and, per partition,
the last source offset copied and the offset of its copy on the target (`last_offsets`). The
task reads every partition from where its consumer group stopped up to that target offset and
commits, so a run of this DAG processes what the copies brought, once.

Put it in your DAGs folder next to mirrorflow's DAG file and unpause it: an event reaches the
DAGs that are unpaused when it is emitted. The Airflow connection `kafka_backup` (type kafka)
holds the backup cluster's client settings as its extra.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from airflow.sdk import DAG, Connection, task

from mirrorflow.airflow.assets import remote_topic_asset

# kafka://<first host:port of backup's bootstrap.servers>/primary.orders, read from the
# properties file in MIRRORFLOW_CONFIG (no cluster is asked while the file is parsed). Where the
# address is in an Airflow connection instead, name it: topic_asset("kafka-b1:9092", "primary.orders").
ORDERS = remote_topic_asset("primary", "backup", "orders")
GROUP = "orders-on-backup"

with DAG(
    dag_id="orders_on_backup",
    schedule=[ORDERS],
    start_date=datetime(2024, 1, 1),
    catchup=False,
    tags=["example", "mirrorflow"],
):

    @task
    def read_new_orders(*, triggering_asset_events: Any = None) -> dict[str, Any]:
        """Read the copies the triggering runs brought, up to the last target offset of each."""
        from confluent_kafka import Consumer, TopicPartition

        runs, ends = [], {}
        for event in triggering_asset_events[ORDERS]:
            runs.append({"run_id": event.extra["run_id"], "records": event.extra["records"]})
            for partition, last in event.extra["last_offsets"].items():
                ends[int(partition)] = max(ends.get(int(partition), -1), last["target"])
        topic = ORDERS.uri.rsplit("/", 1)[1]
        settings = Connection.get("kafka_backup").extra_dejson
        consumer = Consumer({**settings, "group.id": GROUP, "enable.auto.commit": False})
        try:
            committed = consumer.committed([TopicPartition(topic, p) for p in ends], timeout=30)
            starts = {tp.partition: max(tp.offset, 0) for tp in committed}
            wanted = {p: end for p, end in ends.items() if end >= starts[p]}
            consumer.assign([TopicPartition(topic, p, starts[p]) for p in wanted])
            records, positions = 0, {}
            while any(positions.get(p, starts[p] - 1) < end for p, end in wanted.items()):
                message = consumer.poll(10)
                if message is None:
                    raise TimeoutError(f"{topic}: no record within 10 s before the event's offsets")
                if message.error():
                    raise RuntimeError(message.error())
                if message.offset() <= wanted[message.partition()]:
                    records += 1
                positions[message.partition()] = message.offset()
            consumer.commit(
                offsets=[TopicPartition(topic, p, end + 1) for p, end in wanted.items()], asynchronous=False
            )
        finally:
            consumer.close()
        return {"runs": runs, "records": records, "read_up_to": {str(p): e for p, e in sorted(ends.items())}}

    read_new_orders()
