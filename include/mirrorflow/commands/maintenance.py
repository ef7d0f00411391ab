"""`mirrorflow heartbeats | refresh-topics | sync-topic-configs | sync-topic-acls | status`.

Each job command runs MM2's periodic job once for every flow that has it on (or the flows named
with --flow), through the same function its Airflow DAG calls; `status` prints what MirrorClient
would report per cluster plus each flow's last run and last verification.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from mirrorflow.commands.console import make_console, output_option, print_json
from mirrorflow.config import ConfigError, FlowConfig, MirrorConfig, load_config
from mirrorflow.control.heartbeats import HeartbeatError, emit_heartbeats
from mirrorflow.control.mirror_status import mirror_status
from mirrorflow.control.topic_sync import TOPIC_JOBS, TopicSyncFailed
from mirrorflow.ops.acl_check import MissingAcl

CONFIG = click.argument(
    "config_file", metavar="CONFIG", type=click.Path(exists=True, dir_okay=False, path_type=Path)
)
FLOWS = click.option(
    "--flow",
    "flow_names",
    multiple=True,
    metavar="SOURCE->TARGET",
    help="Run only this flow (repeatable); default: every flow that has the job on.",
)


def _console() -> Console:
    return make_console()


def _load(config_file: Path) -> MirrorConfig:
    try:
        return load_config(str(config_file))
    except ConfigError as exc:
        raise click.ClickException(f"{exc}\nRun `mirrorflow validate {config_file}` for the fixes.") from exc


def _select(
    config: MirrorConfig, names: Sequence[str], candidates: Iterable[FlowConfig], job: str, keys: str
) -> list[FlowConfig]:
    """The flows to run: all candidates, or the named ones, each of which must have the job on."""
    available = {flow.name: flow for flow in candidates}
    if not names:
        return list(available.values())
    chosen = []
    for name in names:
        source, arrow, target = name.partition("->")
        if not arrow or source not in config.clusters or target not in config.clusters or source == target:
            raise click.BadParameter(
                f"{name!r} is not a flow: write SOURCE->TARGET with two aliases from clusters "
                f"({', '.join(config.clusters)})",
                param_hint="--flow",
            )
        if name not in available:
            raise click.BadParameter(
                f"{job} is off for {name} in {config.source}; MM2's settings for it: {keys}",
                param_hint="--flow",
            )
        chosen.append(available[name])
    return chosen


def _time(ms: int | None) -> str:
    if ms is None:
        return "-"
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + "Z"


def _age(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds:.1f} s"


@click.command(name="heartbeats")
@CONFIG
@FLOWS
@click.option(
    "--for",
    "duration",
    type=click.FloatRange(min=0),
    default=0.0,
    show_default=True,
    metavar="SECONDS",
    help="Keep emitting every emit.heartbeats.interval.seconds for this long (0: one heartbeat each).",
)
def heartbeats_command(config_file: Path, flow_names: tuple[str, ...], duration: float) -> None:
    """Write MM2 heartbeats for every pair MM2 runs a heartbeat herder for (once, or --for SECONDS)."""
    config = _load(config_file)
    flows = _select(
        config,
        flow_names,
        config.heartbeat_flows,
        "heartbeats",
        "emit.heartbeats.enabled, emit.heartbeats.interval.seconds",
    )
    try:
        runs = emit_heartbeats(flows, duration_s=duration)
    except (HeartbeatError, MissingAcl) as exc:
        raise click.ClickException(str(exc)) from exc
    table = Table(title="Heartbeats")
    for column in ("flow", "topic", "cluster", "emitted", "first", "last"):
        table.add_column(column)
    for run in runs:
        table.add_row(
            run.flow, run.topic, run.cluster, str(run.emitted), _time(run.first_ms), _time(run.last_ms)
        )
    _console().print(table)


def _topic_job_command(
    job_name: str, command_name: str, render: Callable[[dict[str, Any]], Table]
) -> click.Command:
    job = TOPIC_JOBS[job_name]

    @click.command(name=command_name, help=f"Run MM2's {job_name} job once: {job.description}.")
    @CONFIG
    @FLOWS
    def command(config_file: Path, flow_names: tuple[str, ...]) -> None:
        config = _load(config_file)
        candidates = [f for f in config.replication_flows if job.interval(f) is not None]
        console = _console()
        failures = []
        for flow in _select(config, flow_names, candidates, job_name, job.keys):
            try:
                result = job.run(flow)
            except TopicSyncFailed as exc:
                result = exc.result
                failures.append(str(exc))
            except MissingAcl as exc:  # refused before anything ran: nothing to show
                failures.append(str(exc))
                continue
            console.print(render(result))
        if not candidates and not flow_names:
            console.print(f"No replication flow has {job_name} on ({job.keys}).")
        for failure in failures:
            console.print(f"[bold red]{failure}[/bold red]")
        sys.exit(1 if failures else 0)

    return command


def _refresh_table(result: dict[str, Any]) -> Table:
    table = Table(title=f"{result['flow']}: topics ({result['replicated_topics']} replicated)")
    for column in ("remote topic", "change"):
        table.add_column(column, overflow="fold")
    for remote in result["created"]:
        table.add_row(remote, "created")
    for remote, (before, after) in result["grown"].items():
        table.add_row(remote, f"partitions {before} -> {after}")
    for topic, error in result["errors"].items():
        table.add_row(topic, f"[red]{error}[/red]")
    if not table.row_count:
        table.add_row("-", "nothing to create or grow")
    return table


def _configs_table(result: dict[str, Any]) -> Table:
    table = Table(title=f"{result['flow']}: topic configs")
    for column in ("remote topic", "set", "deleted (the target's default applies)"):
        table.add_column(column, overflow="fold")
    for remote, ops in result["topics"].items():
        settings = ", ".join(f"{k}={v}" for k, v in sorted(ops["set"].items()))
        table.add_row(remote, settings or "-", f"{len(ops['deleted'])} default-valued source settings")
    for remote, error in result["errors"].items():
        table.add_row(remote, f"[red]{error}[/red]", "")
    return table


def _acls_table(result: dict[str, Any]) -> Table:
    table = Table(title=f"{result['flow']}: topic ACLs")
    table.add_column("ACL on the target", overflow="fold")
    table.add_column("result", overflow="fold")
    if result["skipped"]:
        table.add_row("-", f"skipped: {result['skipped']}")
    for acl in result["synced"]:
        table.add_row(acl, "present")
    for acl, error in result["errors"].items():
        table.add_row(acl, f"[red]{error}[/red]")
    if not table.row_count:
        table.add_row("-", "no source ACL to sync")
    return table


@click.command(name="status")
@CONFIG
@click.option("--cluster", "clusters", multiple=True, metavar="ALIAS", help="Only this cluster (repeatable).")
@output_option(
    "json: the status as one JSON object on stdout (keys: clusters, flows; see docs/reference/cli.md)."
)
@click.option("--json", "as_json", is_flag=True, help="Same as --output json.")
def status_command(config_file: Path, clusters: tuple[str, ...], output: str, as_json: bool) -> None:
    """Replication paths per cluster, read from heartbeat topics as MM2's MirrorClient reads them,
    the age of the newest heartbeat from each upstream cluster, each flow's last run and last
    verification, and each flow's lag now (from the source offsets MM2 and mirrorflow both store)."""
    config = _load(config_file)
    unknown = [alias for alias in clusters if alias not in config.clusters]
    if unknown:
        raise click.BadParameter(
            f"{', '.join(unknown)} not in clusters ({', '.join(config.clusters)})", param_hint="--cluster"
        )
    status = mirror_status(config, clusters=clusters or None).to_dict()
    if as_json or output == "json":
        print_json(status)
        return
    console = _console()
    for table in (
        _paths_table(status),
        _remote_table(status),
        _runs_table(status),
        _verifications_table(status),
    ):
        console.print(table)


def _paths_table(status: dict[str, Any]) -> Table:
    table = Table(title="Replication paths (from heartbeat topics)")
    for column in (
        "cluster",
        "upstream",
        "hops",
        "newest heartbeat",
        "age",
        "via",
        "heartbeat jobs writing here",
    ):
        table.add_column(column, overflow="fold")
    for cluster in status["clusters"]:
        jobs = ", ".join(f"{k} ({_time(v)})" for k, v in cluster["heartbeat_jobs"].items()) or "-"
        if cluster["error"]:
            table.add_row(cluster["alias"], f"[red]unreachable: {cluster['error']}[/red]", "", "", "", "", "")
            continue
        if not cluster["upstreams"]:
            table.add_row(cluster["alias"], "-", "", "", "", "", jobs)
        for i, up in enumerate(cluster["upstreams"]):
            table.add_row(
                cluster["alias"] if i == 0 else "",
                up["alias"],
                str(up["hops"]),
                _time(up["last_heartbeat_ms"]),
                _age(up["age_s"]),
                up["via"] or "-",
                jobs if i == 0 else "",
            )
    return table


def _remote_table(status: dict[str, Any]) -> Table:
    table = Table(title="Remote and checkpoint topics")
    for column in ("cluster", "from", "remote topics", "checkpoint topics"):
        table.add_column(column, overflow="fold")
    for cluster in status["clusters"]:
        if cluster["error"]:
            continue
        checkpoints = ", ".join(cluster["checkpoint_topics"]) or "-"
        if not cluster["remote_topics"]:
            table.add_row(cluster["alias"], "-", "-", checkpoints)
        for i, (source, topics) in enumerate(sorted(cluster["remote_topics"].items())):
            table.add_row(
                cluster["alias"] if i == 0 else "",
                source,
                f"{len(topics)}: {', '.join(topics)}",
                checkpoints if i == 0 else "",
            )
    return table


def _runs_table(status: dict[str, Any]) -> Table:
    table = Table(title="Replication flows: last mirrorflow run and lag now")
    for column in ("flow", "run", "written", "records", "failed partitions", "lag left", "lag now"):
        table.add_column(column, overflow="fold")
    for flow in status["flows"]:
        run = flow["last_run"]
        # Lag now comes from the stored source offsets, which MM2 writes too: shown for MM2-run flows.
        now = "-" if flow["lag"] is None else str(sum(flow["lag"].values()))
        if flow["error"]:
            table.add_row(flow["flow"], f"[red]{flow['error']}[/red]", "", "", "", "", now)
        elif run is None:
            table.add_row(flow["flow"], "no mirrorflow run", "", "", "", "", now)
        else:
            # Summaries name the worst topics only; their totals (when written since) count all.
            lag = run["totals"].get("lag_left", sum(run.get("lag_left", {}).values()))
            table.add_row(
                flow["flow"],
                f"{run['run_id']} ({run['mode']})",
                _time(flow["last_run_ms"]),
                str(run["totals"]["records"]),
                str(run["totals"]["failed_partitions"]),
                str(lag),
                now,
            )
    return table


VERDICT_STYLE = {"verified": "green", "sample passed": "green", "incomplete": "yellow", "failed": "red"}


def _verifications_table(status: dict[str, Any]) -> Table:
    table = Table(title="Replication flows: last verification")
    for column in (
        "flow",
        "verdict",
        "finished",
        "verification",
        "matched",
        "wrong",
        "explained",
        "pending",
        "partitions not read",
        "sample",
    ):
        table.add_column(column, overflow="fold")
    for flow in status["flows"]:
        last = flow["last_verification"]
        if last is None:
            table.add_row(flow["flow"], "-" if flow["error"] else "never verified", *[""] * 8)
            continue
        style = VERDICT_STYLE.get(last["verdict"], "red")
        sample = "all records" if last["sample"] is None else f"{last['sample'] * 100:g}%"
        table.add_row(
            flow["flow"],
            f"[{style}]{escape(str(last['verdict']))}[/{style}]",
            _time(last["finished_ms"] or flow["last_verification_ms"]),
            escape(str(last["run_id"])),
            str(last["matched"]),
            str(last["wrong_total"]),
            str(last["explained_total"]),
            str(last["pending"]),
            str(last["failed_partitions"]),
            sample,
        )
    return table


COMMANDS = [
    heartbeats_command,
    _topic_job_command("refresh_topics", "refresh-topics", _refresh_table),
    _topic_job_command("sync_topic_configs", "sync-topic-configs", _configs_table),
    _topic_job_command("sync_topic_acls", "sync-topic-acls", _acls_table),
    status_command,
]
