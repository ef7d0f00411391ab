"""mirrorflow's Airflow plugin and what it mounts: the status app wired to the api-server's config,
login and connections. Airflow loads MirrorflowPlugin through the package's `airflow.plugins`
entry point (pyproject.toml), so an installed wheel brings it to every component; no file in a
plugins folder is needed.

The config is read on each status refresh, so edits show up without a restart;
MIRRORFLOW_STATUS_REFRESH_S (default 15) sets how often the status is read and
MIRRORFLOW_STATUS_TIMEOUT_S (default 5) how long one Kafka call of a refresh may wait;
MIRRORFLOW_STATUS_AMBER_FACTOR / MIRRORFLOW_STATUS_RED_FACTOR (3 and 10) set the page's health
thresholds (mirrorflow.control.status_health). The page learns from Airflow's metadata DB which
of its DAGs are paused and which run ids are Airflow's (`airflow_facts`)."""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from typing import Any

from airflow.plugins_manager import AirflowPlugin
from fastapi import FastAPI

from mirrorflow.airflow.settings import config_path
from mirrorflow.airflow.status_app import READ_TIMEOUT_S, create_app
from mirrorflow.airflow.status_links import AirflowFacts, DagRunFacts
from mirrorflow.config import MirrorConfig, load_config
from mirrorflow.control.status_snapshots import REFRESH_S

REFRESH_ENV = "MIRRORFLOW_STATUS_REFRESH_S"
TIMEOUT_ENV = "MIRRORFLOW_STATUS_TIMEOUT_S"


def _load() -> MirrorConfig:
    return load_config(str(config_path()))


def _connection_extra(conn_id: str) -> dict[str, Any]:
    # The api-server has the metadata DB and the secrets backends, but no task context.
    from airflow.models.connection import Connection

    return Connection.get_connection_from_secrets(conn_id).extra_dejson


def airflow_facts(dag_ids: Sequence[str], runs: Sequence[tuple[str, str]]) -> AirflowFacts:
    """Which of `dag_ids` Airflow has (parsed and not stale) and which are paused, each one's
    newest run, newest finished run and newest successful run and how many of its runs failed,
    and the state of each (dag_id, run_id) of `runs` that Airflow has: nine queries of the
    api-server's metadata DB, whatever the number of DAGs."""
    from airflow.models.dag import DagModel
    from airflow.models.dagrun import DagRun
    from airflow.utils.session import create_session
    from sqlalchemy import and_, func, or_, select

    wanted_dags = list(dag_ids)
    with create_session() as session:
        dags = session.execute(
            select(DagModel.dag_id, DagModel.is_paused).where(
                DagModel.dag_id.in_(wanted_dags), DagModel.is_stale.is_(False)
            )
        ).all()
        wanted = set(runs)
        found = session.execute(
            select(DagRun.dag_id, DagRun.run_id, DagRun.state).where(
                DagRun.dag_id.in_({dag for dag, _ in wanted}), DagRun.run_id.in_({run for _, run in wanted})
            )
        ).all()

        def newest(*conditions: Any) -> dict[str, DagRunFacts]:
            latest = session.execute(
                select(DagRun.dag_id, func.max(DagRun.run_after))
                .where(DagRun.dag_id.in_(wanted_dags), *conditions)
                .group_by(DagRun.dag_id)
            ).all()
            if not latest:
                return {}
            rows = session.execute(
                select(DagRun.dag_id, DagRun.run_id, DagRun.state, DagRun.start_date, DagRun.end_date).where(
                    or_(*(and_(DagRun.dag_id == dag, DagRun.run_after == after) for dag, after in latest)),
                    *conditions,
                )
            ).all()
            return {
                dag: DagRunFacts(str(run_id), str(state), _ms(start), _ms(end))
                for dag, run_id, state, start, end in rows
            }

        last_run = newest()
        last_finished = newest(DagRun.state.in_(["success", "failed"]))
        last_success = newest(DagRun.state == "success")
        failed = session.execute(
            select(DagRun.dag_id, func.count())
            .where(DagRun.dag_id.in_(wanted_dags), DagRun.state == "failed")
            .group_by(DagRun.dag_id)
        ).all()
    return AirflowFacts(
        dags=frozenset(dag for dag, _ in dags),
        paused=frozenset(dag for dag, paused in dags if paused),
        runs={(dag, run): str(state) for dag, run, state in found if (dag, run) in wanted},
        last_run=last_run,
        last_finished=last_finished,
        last_success=last_success,
        failed_runs={dag: int(count) for dag, count in failed},
    )


def _ms(moment: Any) -> int | None:
    return None if moment is None else int(moment.timestamp() * 1000)


def seconds_from_env(name: str, default: float) -> float:
    raw = os.environ.get(name)
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = 0.0
    if not (value > 0 and math.isfinite(value)):
        raise ValueError(f"{name}={raw!r}: give a number of seconds above 0 (default {default:g})")
    return value


def status_fastapi_app() -> FastAPI:
    from airflow.api_fastapi.core_api.security import requires_authenticated

    return create_app(
        _load,
        connection_extra=_connection_extra,
        login_required=requires_authenticated(),
        refresh_s=seconds_from_env(REFRESH_ENV, REFRESH_S),
        timeout_s=seconds_from_env(TIMEOUT_ENV, READ_TIMEOUT_S),
        airflow_facts=airflow_facts,
    )


class MirrorflowPlugin(AirflowPlugin):
    """The status page, JSON and Prometheus metrics under /mirrorflow (/mirrorflow/ui,
    /mirrorflow/status, /mirrorflow/metrics), linked from the UI's Browse menu."""

    name = "mirrorflow"
    fastapi_apps = [{"app": status_fastapi_app(), "url_prefix": "/mirrorflow", "name": "mirrorflow status"}]
    external_views = [
        {
            "name": "Replication status",
            "href": "mirrorflow/ui",
            "url_route": "mirrorflow-status",
            "destination": "nav",
            "category": "browse",
        }
    ]
