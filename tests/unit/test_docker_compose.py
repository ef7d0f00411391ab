"""docker-compose.yaml cannot be started here (no Docker engine), so its structure is checked:
the services a user needs exist, Kafka is the official image in KRaft mode, the project is
mounted, and every preset connection points at a service that exists."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from localkafka import kafka_version

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load((ROOT / "docker-compose.yaml").read_text())


def test_services_present(compose: dict) -> None:
    expected = {
        "kafka-primary",
        "kafka-backup",
        "postgres",
        "airflow-init",
        "airflow-apiserver",
        "airflow-scheduler",
        "airflow-dag-processor",
        "airflow-triggerer",
        "spark-master",
        "spark-worker",
    }
    assert expected <= set(compose["services"])


def test_kafka_clusters_are_official_kraft_images(compose: dict) -> None:
    for name in ("kafka-primary", "kafka-backup"):
        service = compose["services"][name]
        assert re.fullmatch(r"apache/kafka:\d+\.\d+\.\d+", service["image"]), service["image"]
        env = service["environment"]
        assert env["KAFKA_PROCESS_ROLES"] == "broker,controller"
        node_id = env["KAFKA_NODE_ID"]
        assert env["KAFKA_CONTROLLER_QUORUM_VOTERS"] == f"{node_id}@{name}:9093"
        assert f"INTERNAL://{name}:9092" in env["KAFKA_ADVERTISED_LISTENERS"]
        # A single broker cannot host the default RF 3 internal topics.
        assert env["KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR"] == 1
        assert env["KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR"] == 1
    ids = {compose["services"][n]["environment"]["CLUSTER_ID"] for n in ("kafka-primary", "kafka-backup")}
    assert len(ids) == 2, "the two clusters must have distinct cluster ids"


def test_kafka_image_is_the_version_tests_run_on(compose: dict) -> None:
    for name in ("kafka-primary", "kafka-backup"):
        assert compose["services"][name]["image"] == f"apache/kafka:{kafka_version()}"


def _airflow_services(compose: dict) -> list[str]:
    return [name for name in compose["services"] if name.startswith("airflow-") or name.startswith("spark-")]


def test_project_is_mounted_everywhere(compose: dict) -> None:
    for name in _airflow_services(compose):
        mounts = {m.split(":")[0]: m.split(":")[1] for m in compose["services"][name]["volumes"]}
        for folder in ("dags", "plugins", "spark_apps", "include"):
            assert f"./{folder}" in mounts, f"{name} does not mount {folder}/"
            assert (ROOT / folder).is_dir()
        assert compose["services"][name]["build"]["dockerfile"] == "docker/Dockerfile"
    assert (ROOT / "docker" / "Dockerfile").is_file()


def test_connections_name_services_that_exist(compose: dict) -> None:
    services = set(compose["services"])
    env = compose["services"]["airflow-scheduler"]["environment"]
    conns = {k: json.loads(v) for k, v in env.items() if k.startswith("AIRFLOW_CONN_")}
    assert {"AIRFLOW_CONN_PRIMARY_KAFKA", "AIRFLOW_CONN_BACKUP_KAFKA", "AIRFLOW_CONN_SPARK_DEFAULT"} <= set(
        conns
    )
    for key in ("AIRFLOW_CONN_PRIMARY_KAFKA", "AIRFLOW_CONN_BACKUP_KAFKA"):
        assert conns[key]["conn_type"] == "kafka"
        for server in conns[key]["extra"]["bootstrap.servers"].split(","):
            host, port = server.rsplit(":", 1)
            assert host in services, f"{key} points at {host}, which is not a service"
            assert (
                f"INTERNAL://{host}:{port}"
                in compose["services"][host]["environment"]["KAFKA_ADVERTISED_LISTENERS"]
            )
    spark = conns["AIRFLOW_CONN_SPARK_DEFAULT"]
    assert spark["conn_type"] == "spark"
    assert spark["host"].removeprefix("spark://") in services
    master_cmd = compose["services"]["spark-master"]["command"]
    assert str(spark["port"]) in master_cmd
    assert f"spark://spark-master:{spark['port']}" in compose["services"]["spark-worker"]["command"]


def test_config_file_exists_and_names_connections(compose: dict) -> None:
    env = compose["services"]["airflow-scheduler"]["environment"]
    path = env["MIRRORFLOW_CONFIG"].replace("/opt/airflow/", "")
    text = (ROOT / path).read_text()
    for conn in ("primary_kafka", "backup_kafka"):
        assert f"airflow.connection.id = {conn}" in text
