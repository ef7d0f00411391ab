"""Credentials kept in Airflow connections reach every step (plan, Spark copy, report) and
never show up in the run's logs, the copy task's arguments or what the Spark UI shows: its
Environment page (Spark properties, system properties, classpath) is the event log's
SparkListenerEnvironmentUpdate, which the history server renders, so the test turns the event
log on with spark-defaults.conf, as an operator would, and greps it."""

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

    conf_dir, events = tmp_path / "spark-conf", tmp_path / "spark-events"
    conf_dir.mkdir()
    events.mkdir()
    (conf_dir / "spark-defaults.conf").write_text(
        f"spark.eventLog.enabled true\nspark.eventLog.dir file://{events}\n"
        # One plain file (Spark 4 rolls and compresses event logs by default).
        "spark.eventLog.rolling.enabled false\nspark.eventLog.compress false\n"
    )
    env = {
        "SPARK_CONF_DIR": str(conf_dir),
        "MIRRORFLOW_CONFIG": str(config),
        "AIRFLOW_CONN_PRIMARY_KAFKA": connection(primary.bootstrap),
        "AIRFLOW_CONN_BACKUP_KAFKA": connection(backup.bootstrap),
    }
    result = airflow_home.dags_test("mirrorflow__primary__backup__replicate", env=env)
    assert result.succeeded, result.log[-4000:]
    assert SECRET not in result.log
    (event_log,) = [p for p in events.iterdir() if p.is_file()]
    shown = event_log.read_text()
    assert "SparkListenerEnvironmentUpdate" in shown and "mirrorflow" in shown
    assert SECRET not in shown
    (summary,) = _summaries(backup)
    assert summary["topics"][topic]["records"] == 40
