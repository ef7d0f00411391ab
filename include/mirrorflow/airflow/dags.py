"""Every mirrorflow DAG, built from the active MM2 properties file.

Each DAG family lives in its own module with a `build(path, config, wanted)` function; the DAG
file in dags/ only calls `build_dags`. Nothing here touches the network at parse time, and when
Airflow parses the file to run one task only that task's DAG is built.
"""

from __future__ import annotations

import importlib

from airflow.sdk import DAG, get_parsing_context

from mirrorflow.airflow.settings import config_path
from mirrorflow.config import load_config

# Modules under mirrorflow.airflow that contribute DAGs.
FAMILIES = ("replicate", "migrate", "maintenance", "control", "failover", "verify")


def build_dags(path: str | None = None) -> dict[str, DAG]:
    """All DAGs for the config at `path` (default: MIRRORFLOW_CONFIG), or only the one being run."""
    resolved = str(path or config_path())
    config = load_config(resolved)
    wanted = get_parsing_context().dag_id
    dags: dict[str, DAG] = {}
    for family in FAMILIES:
        module = importlib.import_module(f"mirrorflow.airflow.{family}")
        dags.update(module.build(resolved, config, wanted))
    return dags
