"""Credentials kept in Airflow connections reach every step (plan, Spark copy, report) and
never show up in the run's logs or the copy task's arguments."""

from __future__ import annotations

import json

from .test_replicate_dag import _summaries

SECRET = "hunter2-never-logged"


def test_replicate_dag_with_clusters_only_in_airflow_connections(
    airflow_home, kafka_clusters, unique, tmp_path
) -> None:
    primary, backup = kafka_clusters(2)
    topic = unique("orders")
    from ..integration.kafkatools import create_topics, produce

    create_topics(primary.bootstrap, (topic, 2))
    produce(primary.bootstrap, topic, [{"value": f"{i}".encode(), "partition": i % 2} for i in range(40)])
    # The file names unreachable servers: only the connections say where the clusters are.
    config = tmp_path / "mm2.properties"
    config.write_text(
        "clusters = primary, backup\n"
        "primary.bootstrap.servers = 127.0.0.1:1\n"
        "backup.bootstrap.servers = 127.0.0.1:1\n"
        "primary.airflow.connection.id = primary_kafka\n"
        "backup.airflow.connection.id = backup_kafka\n"
        "primary->backup.enabled = true\n"
        f"primary->backup.topics = {topic}\n"
        "replication.factor = 1\noffset-syncs.topic.replication.factor = 1\n"
        "checkpoints.topic.replication.factor = 1\noffset.storage.replication.factor = 1\n"
    )

    def connection(bootstrap: str) -> str:
        # ssl.key.password is unused over PLAINTEXT but is a secret librdkafka accepts.
        return json.dumps(
            {"conn_type": "kafka", "extra": {"bootstrap.servers": bootstrap, "ssl.key.password": SECRET}}
        )

    env = {
        "MIRRORFLOW_CONFIG": str(config),
        "AIRFLOW_CONN_PRIMARY_KAFKA": connection(primary.bootstrap),
        "AIRFLOW_CONN_BACKUP_KAFKA": connection(backup.bootstrap),
    }
    result = airflow_home.dags_test("mirrorflow__primary__backup__replicate", env=env)
    assert result.succeeded, result.log[-4000:]
    assert SECRET not in result.log
    (summary,) = _summaries(backup)
    assert summary["topics"][topic]["records"] == 40
