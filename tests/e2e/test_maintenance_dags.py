"""The heartbeat and topic sync DAGs under `airflow dags test`, against real Kafka clusters."""

from __future__ import annotations

from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ConfigResource,
    ResourcePatternType,
    ResourceType,
)

from mirrorflow.mm2.formats import Heartbeat

from ..integration.kafkatools import create_topics, read_all

# Heartbeats every minute and runs a minute long: a run emits once per pair and exits, which
# keeps `dags test` short.
CONFIG = """\
clusters = A, B
A.bootstrap.servers = {a}
B.bootstrap.servers = {b}
A->B.enabled = true
emit.heartbeats.interval.seconds = 60
mirrorflow.heartbeats.run.seconds = 60
replication.factor = 1
heartbeats.topic.replication.factor = 1
{extra}"""


def run_dag(airflow_home, tmp_path, a, b, dag_id: str, extra: str = ""):
    path = tmp_path / "mm2.properties"
    path.write_text(CONFIG.format(a=a.bootstrap, b=b.bootstrap, extra=extra))
    return airflow_home.dags_test(dag_id, env={"MIRRORFLOW_CONFIG": str(path)})


def test_one_heartbeat_dag_emits_for_every_pair(airflow_home, kafka_clusters, tmp_path) -> None:
    a, b = kafka_clusters(2)
    # Only A->B replicates, yet B->A emits too: it writes into A what A->B then replicates to B
    # as A.heartbeats. One DAG run serves both pairs.
    result = run_dag(airflow_home, tmp_path, a, b, "mirrorflow_heartbeats")
    assert result.succeeded, result.log[-4000:]
    (beat,) = [Heartbeat.decode(r.key, r.value) for r in read_all(a.bootstrap, "heartbeats")]
    assert (beat.source_alias, beat.target_alias) == ("B", "A")
    (beat,) = [Heartbeat.decode(r.key, r.value) for r in read_all(b.bootstrap, "heartbeats")]
    assert (beat.source_alias, beat.target_alias) == ("A", "B")


def test_refresh_topics_dag_creates_remote_topics_and_fails_loudly(
    airflow_home, kafka_clusters, tmp_path
) -> None:
    a, b = kafka_clusters(2)
    create_topics(a.bootstrap, ("orders", 3))
    result = run_dag(airflow_home, tmp_path, a, b, "mirrorflow__A__B__refresh_topics")
    assert result.succeeded, result.log[-4000:]
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    assert len(admin.list_topics("A.orders", timeout=10).topics["A.orders"].partitions) == 3

    create_topics(a.bootstrap, ("payments", 1))
    failed = run_dag(
        airflow_home, tmp_path, a, b, "mirrorflow__A__B__refresh_topics", "A->B.replication.factor = 3\n"
    )
    assert not failed.succeeded
    assert "replication.factor is 3" in failed.log


def test_sync_topic_configs_dag(airflow_home, kafka_clusters, tmp_path) -> None:
    a, b = kafka_clusters(2)
    create_topics(a.bootstrap, ("orders", 1, {"retention.ms": "1234567"}))
    create_topics(b.bootstrap, ("A.orders", 1, {"retention.ms": "1000", "segment.ms": "999999"}))
    result = run_dag(airflow_home, tmp_path, a, b, "mirrorflow__A__B__sync_topic_configs")
    assert result.succeeded, result.log[-4000:]
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    resource = ConfigResource(ResourceType.TOPIC, "A.orders")
    entries = admin.describe_configs([resource])[resource].result()
    assert entries["retention.ms"].value == "1234567"
    assert entries["segment.ms"].is_default


def test_sync_topic_acls_dag(airflow_home, kafka_clusters, tmp_path) -> None:
    a, b = kafka_clusters(2)
    source = AdminClient({"bootstrap.servers": a.bootstrap})
    allow_all = AclBinding(
        ResourceType.TOPIC,
        "orders",
        ResourcePatternType.LITERAL,
        "User:alice",
        "*",
        AclOperation.ALL,
        AclPermissionType.ALLOW,
    )
    for future in source.create_acls([allow_all]).values():
        future.result()
    result = run_dag(airflow_home, tmp_path, a, b, "mirrorflow__A__B__sync_topic_acls")
    assert result.succeeded, result.log[-4000:]
    target = AdminClient({"bootstrap.servers": b.bootstrap})
    any_topic = AclBindingFilter(
        ResourceType.TOPIC, None, ResourcePatternType.ANY, None, None, AclOperation.ANY, AclPermissionType.ANY
    )
    assert target.describe_acls(any_topic).result() == [
        AclBinding(
            ResourceType.TOPIC,
            "A.orders",
            ResourcePatternType.LITERAL,
            "User:alice",
            "*",
            AclOperation.READ,
            AclPermissionType.ALLOW,
        )
    ]
