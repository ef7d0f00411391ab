"""docker-compose.yaml cannot be started here (no Docker engine), so its structure is checked:
the services a user needs exist, Kafka is the official image in KRaft mode, every image and version
is the one the suite pins (Kafka in kafka/pom.xml, Airflow, Python and Spark in requirements.txt),
the image installs mirrorflow from the wheel it builds (only the configs are mounted), and every
preset connection points at a service that exists."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
import yaml

from localkafka import kafka_version

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = (ROOT / "docker" / "Dockerfile").read_text()


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


def test_only_the_configs_are_mounted_the_code_is_the_wheel(compose: dict) -> None:
    for name in _airflow_services(compose):
        service = compose["services"][name]
        assert service["build"]["dockerfile"] == "docker/Dockerfile"
        assert service["volumes"] == ["./include/config:/opt/airflow/include/config:ro"], name
        assert "PYTHONPATH" not in service["environment"]
    assert (ROOT / "include" / "config").is_dir()
    assert "PYTHONPATH" not in DOCKERFILE


def pin(name: str) -> str:
    found = re.search(rf"^{re.escape(name)}==(\S+)$", (ROOT / "requirements.txt").read_text(), re.M)
    assert found, f"requirements.txt does not pin {name}"
    return found.group(1)


def test_the_images_are_the_pinned_airflow_and_python() -> None:
    args = dict(re.findall(r"^ARG (\w+)=(\S+)$", DOCKERFILE, re.M))
    assert args["AIRFLOW_VERSION"] == pin("apache-airflow")
    assert args["PYTHON_VERSION"] == f"{sys.version_info.major}.{sys.version_info.minor}"
    stages = re.findall(r"^FROM (\S+)", DOCKERFILE, re.M)
    assert stages == ["apache/airflow:${AIRFLOW_VERSION}-python${PYTHON_VERSION}"] * 2


def test_the_image_installs_the_wheel_with_spark_under_the_pins() -> None:
    """The wheel the first stage builds, with [spark] (pyspark: Spark's master, workers and
    spark-submit), beside the pinned Airflow, under requirements.txt; the pinned pyspark last,
    over pyspark-client's files; the DAG file from the installed package."""
    build = re.search(r"python -m build --no-isolation --outdir /dist \.", DOCKERFILE)
    assert build, "the first stage does not build the sdist and wheel as make dist does"
    install = re.search(
        r'pip install [^\n]*"\$\(echo /tmp/dist/mirrorflow-\*\.whl\)\[spark\]"[^\n]*', DOCKERFILE
    )
    assert install and '"apache-airflow==${AIRFLOW_VERSION}"' in install.group(0)
    assert "--constraint /tmp/requirements.txt" in DOCKERFILE
    assert "--no-deps --force-reinstall \"$(grep -E '^pyspark==' /tmp/requirements.txt)\"" in DOCKERFILE
    assert pin("pyspark")
    assert "mirrorflow install-dags /opt/airflow/dags" in DOCKERFILE


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
