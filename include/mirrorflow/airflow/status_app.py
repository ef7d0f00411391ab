"""The replication status page, its JSON and Prometheus metrics, as a FastAPI app.

The plugin (mirrorflow.airflow.plugin, which Airflow loads through the package's airflow.plugins
entry point) mounts it in Airflow's api-server under /mirrorflow. Airflow tasks have no shared
store with the api-server, so everything shown is read from Kafka (heartbeat topics
and the run-records topic, see mirrorflow.control.mirror_status). A daemon thread reads it every
`refresh_s` into a snapshot (mirrorflow.control.status_snapshots) and every request answers from
that snapshot at once: a page view or a scrape never waits on a cluster, a dead one included.
The page (mirrorflow.airflow.status_page, rendered here from the snapshot) shows per flow whether
it copies and its last verification's verdict (a badge each), lag now with a sparkline of the last
reads, the last run linked to its DAG run and task logs, its worst topics and failed partitions,
and the heartbeats written into each cluster; /metrics carries the same badges (status_metrics.
HealthCollector), judged by the same functions; during an outage it
keeps showing them as last read, greyed, under a banner per unreachable cluster that says since
when and how old they are. `ui?fragment=1` is the same content without the page around it, which
the page's script reloads every refresh interval.

/status and /ui need an Airflow login (the api-server's own check); /metrics is for scrapers,
which cannot log in: set MIRRORFLOW_METRICS_TOKEN to require `Authorization: Bearer <token>`,
or keep the endpoint behind network controls.
"""

from __future__ import annotations

import hmac
import logging
import os
import threading
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from fastapi import Depends, FastAPI, Header, HTTPException
from fastapi.responses import HTMLResponse, JSONResponse, Response

from mirrorflow import metrics
from mirrorflow.airflow.status_cells import ago
from mirrorflow.airflow.status_cells import utc as when
from mirrorflow.airflow.status_flows import PageView, flows_health_document
from mirrorflow.airflow.status_heartbeats import heartbeat_run_hints, heartbeats_document
from mirrorflow.airflow.status_links import (
    AirflowFacts,
    AirflowReader,
    airflow_runs_document,
    paused_hints,
    wanted_from_airflow,
)
from mirrorflow.airflow.status_metrics import AirflowRunsCollector, HealthCollector
from mirrorflow.airflow.status_page import render_content, render_page
from mirrorflow.config import MirrorConfig
from mirrorflow.config.airflow_connections import ConnectionExtra
from mirrorflow.control.mirror_status import ClusterStatus, FlowStatus, MirrorStatus, mirror_status
from mirrorflow.control.status_health import Thresholds
from mirrorflow.control.status_snapshots import REFRESH_S, StatusSnapshots

log = logging.getLogger("mirrorflow.status")

READ_TIMEOUT_S = 5.0  # per Kafka call: an unreachable cluster holds a refresh for about this long
# Before the first snapshot exists a request waits this long for it, then says "collecting".
FIRST_SNAPSHOT_WAIT_S = 0.8
TOKEN_ENV = "MIRRORFLOW_METRICS_TOKEN"
FACTS_TTL_S = 5.0  # Airflow's DAG and run states are asked at most this often


def create_app(
    load_config: Callable[[], MirrorConfig],
    *,
    connection_extra: ConnectionExtra | None = None,
    login_required: Callable[..., Any] | None = None,
    refresh_s: float = REFRESH_S,
    timeout_s: float = READ_TIMEOUT_S,
    airflow_facts: AirflowReader | None = None,
    thresholds: Thresholds | None = None,
) -> FastAPI:
    """`login_required` is a FastAPI dependency (Airflow's requires_authenticated in the plugin).
    The config is loaded at every refresh, so edits show without a restart.

    `airflow_facts` tells which DAGs are paused and which run ids are Airflow's (the plugin reads
    Airflow's metadata DB); without it, links are built from names alone and no paused DAG is
    hinted at. `thresholds` colour ages (status_health; from the environment by default).

    The refresh thread starts with the first request (a mounted app gets no startup event) and
    stops with the app's lifespan where it has one; it is a daemon either way. The snapshots are
    `app.state.status_snapshots`."""
    latest: dict[str, MirrorConfig] = {}

    def read() -> MirrorStatus:
        config = load_config()
        latest["config"] = config
        return mirror_status(config, connection_extra=connection_extra, timeout_s=timeout_s)

    snapshots = StatusSnapshots(read, interval_s=refresh_s)
    facts = FactsCache(airflow_facts, ttl_s=min(refresh_s, FACTS_TTL_S))
    limits = thresholds if thresholds is not None else Thresholds.from_env()

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        try:
            yield
        finally:
            snapshots.stop()

    guarded = [Depends(login_required)] if login_required is not None else []
    app = FastAPI(
        title="mirrorflow status", docs_url=None, redoc_url=None, openapi_url=None, lifespan=lifespan
    )
    app.state.status_snapshots = snapshots

    def view() -> PageView:
        now_ms = int(time.time() * 1000)
        current = snapshots.current(FIRST_SNAPSHOT_WAIT_S)
        config = latest.get("config")
        known = AirflowFacts() if current is None else facts.get(current, config)
        return PageView(
            status=current,
            snapshot=snapshots.describe(now_ms),
            banners=[] if current is None else outage_banners(current, now_ms),
            now_ms=now_ms,
            history=snapshots.history,
            facts=known,
            config=config,
            thresholds=limits,
            hints=[]
            if current is None
            else paused_hints(current, config, known) + heartbeat_run_hints(config, known, now_ms),
        )

    @app.get("/status", dependencies=guarded)
    def status() -> JSONResponse:
        return JSONResponse(status_document(view()))

    @app.get("/metrics")
    def prometheus(authorization: str | None = Header(default=None)) -> Response:
        token = os.environ.get(TOKEN_ENV)
        if token and not hmac.compare_digest(authorization or "", f"Bearer {token}"):
            raise HTTPException(status_code=401, detail=f"send Authorization: Bearer <{TOKEN_ENV}>")
        shown = view()
        current, known = shown.status, shown.facts
        extra = [AirflowRunsCollector(current, known), HealthCollector(shown)]
        text = metrics.render(current, now_ms=shown.now_ms, extra=extra)
        return Response(text, media_type="text/plain; version=0.0.4")

    @app.get("/ui", dependencies=guarded)
    def ui(fragment: bool = False, theme: str | None = None) -> HTMLResponse:
        shown = view()
        if fragment:
            return HTMLResponse(render_content(shown), headers={"Cache-Control": "no-store"})
        page = render_page(shown, refresh_s=snapshots.interval_s, theme=theme)
        return HTMLResponse(page, headers={"Cache-Control": "no-store"})

    return app


class FactsCache:
    """Airflow's answers about the page's DAGs and runs, asked at most every `ttl_s` (a page and
    its script reload ask often; the metadata DB need not answer each time). A reader that fails
    is logged and leaves the page without links checked or hints."""

    def __init__(self, reader: AirflowReader | None, ttl_s: float) -> None:
        self.reader = reader
        self.ttl_s = ttl_s
        self._lock = threading.Lock()
        self._key: tuple | None = None
        self._facts = AirflowFacts()
        self._at = 0.0

    def get(self, status: MirrorStatus, config: MirrorConfig | None) -> AirflowFacts:
        if self.reader is None:
            return AirflowFacts()
        dags, runs = wanted_from_airflow(status, config)
        key = (tuple(dags), tuple(runs))
        with self._lock:
            if key == self._key and time.monotonic() - self._at < self.ttl_s:
                return self._facts
            try:
                self._facts = self.reader(dags, runs)
            except Exception as exc:  # a page without Airflow's facts beats no page
                log.warning("status page: Airflow's DAG states could not be read: %s", exc)
                self._facts = AirflowFacts()
            self._key, self._at = key, time.monotonic()
            return self._facts


def status_document(view: PageView) -> dict[str, Any]:
    """The /status JSON: the snapshot (what `mirrorflow status --json` prints, with stale marks),
    `snapshot` (its state and age), `banners` (one per unreachable cluster or unread flow) and
    `hints` (one per paused DAG the figures wait on, and one when no heartbeat run emits),
    `health` (per flow its copy state and last verification's verdict, each with its cause, as
    the page's badges) and `airflow_runs` (per flow, its
    replication DAG's last run, last successful run and failed runs, as Airflow has them). While
    the first snapshot is collected:
    state "collecting", no clusters and no flows."""
    if view.status is None:
        body: dict[str, Any] = {"generated_ms": None, "clusters": [], "flows": []}
    else:
        body = view.status.to_dict()
    body["snapshot"] = view.snapshot
    body["banners"] = view.banners
    body["hints"] = view.hints
    body["airflow_runs"] = {} if view.status is None else airflow_runs_document(view.status, view.facts)
    body["health"] = {"flows": flows_health_document(view), "heartbeat_jobs": heartbeats_document(view)}
    return body


def outage_banners(status: MirrorStatus, now_ms: int) -> list[dict[str, Any]]:
    """One banner per cluster that did not answer the last refresh (naming the flows it is the
    source or target of) and per flow that could not be read for another reason: since when,
    and how old the values still shown are."""
    banners: list[dict[str, Any]] = []
    down = set()
    for cluster in status.clusters:
        if cluster.error is None:
            continue
        down.add(cluster.alias)
        roles = [f"target of {f.flow}" for f in status.flows if f.target == cluster.alias]
        roles += [f"source of {f.flow}" for f in status.flows if f.source == cluster.alias]
        subject = f"{cluster.alias} ({', '.join(roles)})" if roles else cluster.alias
        banners.append(_banner("cluster", cluster.alias, subject, "unreachable", cluster, status, now_ms))
    for flow in status.flows:
        if flow.error is not None and not {flow.source, flow.target} & down:
            banners.append(
                _banner("flow", flow.flow, f"flow {flow.flow}", "unreadable", flow, status, now_ms)
            )
    return banners


def _banner(
    kind: str,
    name: str,
    subject: str,
    what: str,
    row: ClusterStatus | FlowStatus,
    status: MirrorStatus,
    now_ms: int,
) -> dict[str, Any]:
    since = row.unreachable_since_ms or status.generated_ms
    shown = (
        f"showing values as of {when(row.as_of_ms)}"
        if row.as_of_ms is not None
        else "no values read since the status page started"
    )
    return {
        "kind": kind,
        "name": name,
        "subject": subject,
        "what": what,
        "since_ms": since,
        "as_of_ms": row.as_of_ms,
        "text": f"{subject} {what} since {when(since)} ({ago((now_ms - since) / 1000)}); {shown}",
        "error": row.error,
    }
