"""Airflow Assets for what mirrorflow's runs produce, so that DAGs can be scheduled on them.

A remote topic is an Asset named by OpenLineage's Kafka dataset naming,
`kafka://<first bootstrap host:port of the target>/<remote topic>`, the URI the Kafka provider
registers for Kafka assets. A run's report task emits one event per remote topic that received
records in the run (a batch copy, a micro-batch window, a migration's copy), its `extra` holding
the run's figures for that topic; a run that copied nothing emits none, so a DAG scheduled on a
topic runs after each copy that brought it records, and only then.

Two per-flow Assets say what happened to the flow as a whole, not that records arrived (a DAG
scheduled on a topic must not run for them): `mirrorflow://<target host:port>/<source>/verified`
after a verification that passed, and `.../cutover` after a migration's cut-over moved consumer
groups to the target.

The topics a regex-driven flow copies are known only when a run lists the source, so no task
declares them as outlets (a declared outlet gets an event on every success, an idle run's too).
Each emitting task declares the flow's AssetAlias instead, and adds the Assets it resolved at run
time to it; Airflow creates the Asset if no DAG named it yet, and queues every DAG scheduled on
it or on the alias. The migration DAG, whose flow comes from its trigger form, declares the
aliases of every pair of the config's clusters and emits through the one the form chose.

Only host:port of a cluster ever goes into a URI or an extra: never a protocol prefix, user info
or any other client setting.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from airflow.sdk import Asset, AssetAlias, get_current_context

from mirrorflow.config import FlowConfig, MirrorConfig, load_config
from mirrorflow.policy.rules import remote_topic

if TYPE_CHECKING:
    from mirrorflow.replicate.report import RunReport
    from mirrorflow.replicate.service import ReportedRun

log = logging.getLogger(__name__)

# Partitions whose last offsets one topic's event lists; `last_offsets_left_out` counts the rest.
OFFSET_ROWS = 100
NAME_ROWS = 50  # topics or groups a per-flow event names; with their count
VERIFIED, CUTOVER = "verified", "cutover"

Event = tuple[Asset, dict[str, Any]]


def cluster_address(bootstrap_servers: object) -> str:
    """host:port of the first server of a `bootstrap.servers` value, without the protocol prefix
    librdkafka accepts (`SASL_SSL://host:port`) or anything before an `@`."""
    first = str(bootstrap_servers or "").split(",")[0].strip()
    address = first.split("://", 1)[-1].rpartition("@")[2].strip("/ ")
    if not address:
        raise ValueError("no bootstrap server to name the cluster's Assets by")
    return address


def topic_uri(address: str, topic: str) -> str:
    return f"kafka://{address}/{topic}"


def topic_asset(address: str, topic: str) -> Asset:
    """The Asset of `topic` on the cluster at `address` (host:port); its name is its URI."""
    uri = topic_uri(address, topic)
    return Asset(name=uri, uri=uri)


def flow_asset(address: str, source: str, what: str) -> Asset:
    """The per-flow Asset `what` (VERIFIED or CUTOVER) of the flow from `source` into the target
    at `address`."""
    uri = f"mirrorflow://{address}/{quote(source, safe='')}/{what}"
    return Asset(name=uri, uri=uri)


def copies_alias(source: str, target: str) -> AssetAlias:
    """Resolves to the remote topics a flow's runs (replicate and migrate) copied records into."""
    return AssetAlias(name=f"mirrorflow {source}->{target} copies")


def verified_alias(source: str, target: str) -> AssetAlias:
    return AssetAlias(name=f"mirrorflow {source}->{target} {VERIFIED}")


def cutover_alias(source: str, target: str) -> AssetAlias:
    return AssetAlias(name=f"mirrorflow {source}->{target} {CUTOVER}")


def every_pair(config: MirrorConfig, alias: Callable[[str, str], AssetAlias]) -> list[AssetAlias]:
    """`alias(source, target)` for every ordered pair of the config's clusters: the outlets of a
    task whose flow is chosen when it runs."""
    return [alias(source, target) for source, target in config.pairs()]


def target_address_in_file(flow: FlowConfig) -> str:
    """The target's host:port as the flow's admin client reads it from the properties file. A
    cluster whose tasks take its address from an Airflow connection has none to read at parse time."""
    servers = flow.file_client_config("target", "admin")[0].get("bootstrap.servers")
    conn_id = flow.airflow_connection_id("target")
    if conn_id or not servers:
        where = f"Airflow connection {conn_id!r}" if conn_id else "nowhere in the properties file"
        raise ValueError(
            f"cluster {flow.target}'s address is in {where}, so its Assets cannot be named at parse time "
            f"from the file: name it yourself, topic_asset('<host:port>', '<remote topic>')"
        )
    return cluster_address(servers)


def remote_topic_asset(source: str, target: str, topic: str, *, config: str | None = None) -> Asset:
    """The Asset of the copy of `topic` (its name on `source`) on `target`, for a DAG to be
    scheduled on: the remote name by the flow's replication policy, the address from the
    properties file (`config`, default MIRRORFLOW_CONFIG). Reads the file only, no cluster."""
    from mirrorflow.airflow.settings import config_path

    flow = load_config(str(config or config_path())).flow(source, target)
    return topic_asset(target_address_in_file(flow), remote_topic(flow, topic))


def verified_asset(source: str, target: str, *, config: str | None = None) -> Asset:
    """The Asset a verification of flow source->target that passed emits an event for."""
    from mirrorflow.airflow.settings import config_path

    flow = load_config(str(config or config_path())).flow(source, target)
    return flow_asset(target_address_in_file(flow), source, VERIFIED)


def cutover_asset(source: str, target: str, *, config: str | None = None) -> Asset:
    """The Asset a migration's cut-over of source->target that moved groups emits an event for."""
    from mirrorflow.airflow.settings import config_path

    flow = load_config(str(config or config_path())).flow(source, target)
    return flow_asset(target_address_in_file(flow), source, CUTOVER)


def copy_events(
    report: RunReport, source_address: str, target_address: str, *, offset_rows: int = OFFSET_ROWS
) -> list[Event]:
    """One event per remote topic that received records in the run: records, bytes, and per
    partition (at most `offset_rows`, the lowest numbers first) the last source offset copied
    and the offset of its copy on the target. None for a run that copied nothing."""
    events = []
    for remote, row in sorted(report.copied_topics().items()):
        partitions = sorted(row["partitions"].items())
        extra: dict[str, Any] = {
            "flow": report.flow,
            "run_id": report.run_id,
            "mode": report.mode,
            "micro_batch": bool(report.window),
            "source": topic_uri(source_address, row["topic"]),
            "records": row["records"],
            "bytes": row["bytes"],
            "partitions": len(partitions),
            "last_offsets": {str(p): dict(offsets) for p, offsets in partitions[:offset_rows]},
        }
        if len(partitions) > offset_rows:
            extra["last_offsets_left_out"] = len(partitions) - offset_rows
        events.append((topic_asset(target_address, remote), extra))
    return events


def verified_event(flow: FlowConfig, target_address: str, summary: Mapping[str, Any]) -> Event:
    """The verified event of a verification that passed: its verdict, how much it compared and
    which topics (their names on the source, at most NAME_ROWS of them)."""
    totals = summary.get("totals", {})
    topics = sorted(summary.get("topics", {}))
    return (
        flow_asset(target_address, flow.source, VERIFIED),
        {
            "flow": flow.name,
            "run_id": summary["run_id"],
            "verdict": summary["verdict"],
            "until_ms": summary.get("until_ms"),
            "sample": summary.get("sample"),
            "partitions": totals.get("partitions", 0),
            "source_records": totals.get("source_records", 0),
            "matched": totals.get("matched", 0),
            "topics": topics[:NAME_ROWS],
            "topics_count": summary.get("topic_count", len(topics)),
        },
    )


def cutover_event(
    flow: FlowConfig, target_address: str, run_id: str, moved: Mapping[str, Any], topics: str
) -> Event | None:
    """The cut-over event of a migration that moved groups to the target; None for a dry run or
    one that moved none (nothing changed for a consumer then)."""
    groups = list(moved.get("committed", []))
    if moved.get("dry_run") or not groups:
        return None
    return (
        flow_asset(target_address, flow.source, CUTOVER),
        {
            "flow": flow.name,
            "run_id": run_id,
            "groups": sorted(groups)[:NAME_ROWS],
            "groups_count": len(groups),
            "partitions": moved.get("partitions", 0),
            "topics": topics,
        },
    )


def target_address(flow: FlowConfig) -> str:
    """The target's host:port as the run's clients resolve it (Airflow connection included)."""
    from mirrorflow.clients import FlowClients

    return cluster_address(FlowClients.resolve(flow).target_admin.get("bootstrap.servers"))


def announce_copies(flow: FlowConfig, reported: ReportedRun) -> int:
    """The copy events of a run that report_run found complete, through the flow's copies alias."""
    clients = reported.clients
    events = copy_events(
        reported.report,
        cluster_address(clients.source_admin.get("bootstrap.servers")),
        cluster_address(clients.target_admin.get("bootstrap.servers")),
    )
    return emit(copies_alias(flow.source, flow.target), events)


def announce_verified(path: str, source: str, target: str, summary: Mapping[str, Any]) -> int:
    """The verified event of a verification whose verdict passed, through the flow's alias."""
    flow = load_config(path).flow(source, target)
    return emit(verified_alias(source, target), [verified_event(flow, target_address(flow), summary)])


def announce_cutover(
    path: str, source: str, target: str, run_id: str, moved: Mapping[str, Any], topics: str
) -> int:
    """The cut-over event of a migration that moved groups (none for a dry run), through the
    flow's alias."""
    flow = load_config(path).flow(source, target)
    event = cutover_event(flow, target_address(flow), run_id, moved, topics)
    return emit(cutover_alias(source, target), [] if event is None else [event])


def emit(alias: AssetAlias, events: Iterable[Event]) -> int:
    """Add the events to the running task's outlet `alias` (which the task must declare); Airflow
    stores them when the task succeeds. Returns how many. Called outside a task (a step run by a
    test or a script), there is no task to carry them: none. A task that did not declare the
    alias fails here: Airflow would drop its events without a word."""
    try:
        context = get_current_context()
    except RuntimeError:  # no Airflow task runs this: nothing stores Asset events
        log.debug("not in an Airflow task: no Asset event through %s", alias.name)
        return 0
    task = context.get("task")
    if task is not None and alias not in (task.outlets or []):
        raise RuntimeError(
            f"task {task.task_id} does not declare the outlet {alias.name}: its Asset events would be lost"
        )
    outlet = context["outlet_events"][alias]
    count = 0
    for asset, extra in events:
        outlet.add(asset, extra=extra)
        count += 1
    if count:
        log.info("%d Asset event(s) through %s, e.g. %s", count, alias.name, asset.uri)
    return count
