"""The Asset events a DAG run emitted, as Airflow stored them: read from the metadata DB of a
test's Airflow home (`airflow dags test` runs have no api-server to ask)."""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from mirrorflow.airflow.local import AirflowHome


def stored_asset_events(home: AirflowHome, dag_id: str, run_id: str) -> dict[str, dict[str, Any]]:
    """Asset URI -> the extra of the event run `run_id` of `dag_id` emitted for it."""
    with sqlite3.connect(home.home / "airflow.db") as db:
        rows = db.execute(
            "SELECT asset.uri, asset_event.extra FROM asset_event JOIN asset ON asset.id = asset_event.asset_id "
            "WHERE asset_event.source_dag_id = ? AND asset_event.source_run_id = ?",
            (dag_id, run_id),
        ).fetchall()
    found: dict[str, dict[str, Any]] = {}
    for uri, extra in rows:
        assert uri not in found, f"two events of {dag_id} {run_id} for {uri}"
        found[uri] = json.loads(extra) if isinstance(extra, str) else extra
    return found
