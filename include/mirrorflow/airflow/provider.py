"""mirrorflow as an Airflow provider (entry point `apache_airflow_provider` in pyproject.toml), in
the shape Airflow's ProvidersManager validates (airflow/provider_info.schema.json): it registers
the `mirrorflow_kafka` connection type and its hook, so the Connections UI shows its form and its
Test button runs `MirrorflowKafkaHook.test_connection`, and names the plugin the package's
`airflow.plugins` entry point loads (`airflow providers plugins` lists it).

Nothing here imports Airflow: ProvidersManager calls get_provider_info in every Airflow process
that lists providers, before it imports any hook."""

from __future__ import annotations

from importlib.metadata import version
from typing import Any

PACKAGE = "mirrorflow"


def get_provider_info() -> dict[str, Any]:
    return {
        "package-name": PACKAGE,
        "name": "mirrorflow",
        "description": "Kafka cluster replication with MirrorMaker 2 semantics, run by Airflow and Spark.",
        "versions": [version(PACKAGE)],
        "connection-types": [
            {
                "connection-type": "mirrorflow_kafka",
                "hook-class-name": "mirrorflow.airflow.hooks.MirrorflowKafkaHook",
                "hook-name": "Kafka cluster (mirrorflow)",
            }
        ],
        "plugins": [{"name": "mirrorflow", "plugin-class": "mirrorflow.airflow.plugin.MirrorflowPlugin"}],
    }
