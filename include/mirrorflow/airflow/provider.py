"""mirrorflow as an Airflow provider (entry point `apache_airflow_provider` in pyproject.toml):
registers the `mirrorflow_kafka` connection type and its hook, so the Connections UI shows its
form and its Test button runs `MirrorflowKafkaHook.test_connection`."""

from __future__ import annotations

from typing import Any


def get_provider_info() -> dict[str, Any]:
    return {
        "package-name": "mirrorflow",
        "name": "mirrorflow",
        "description": "Kafka cluster replication with MirrorMaker 2 semantics, run by Airflow and Spark.",
        "connection-types": [
            {
                "connection-type": "mirrorflow_kafka",
                "hook-class-name": "mirrorflow.airflow.hooks.MirrorflowKafkaHook",
            }
        ],
    }
