"""The `mirrorflow` command. Subcommands are thin: each calls one library function and prints."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click
from rich.markup import escape
from rich.table import Table

from mirrorflow.commands.console import make_console
from mirrorflow.config import ConfigError, FlowConfig, MirrorConfig, Problem, parse_config, validate
from mirrorflow.config.flow_checks import nothing_replicated
from mirrorflow.config.replicate_mode import MICRO_BATCH
from mirrorflow.logs import LEVEL_ENV, LEVELS
from mirrorflow.logs import configure as configure_logs
from mirrorflow.ops.cluster_versions import ClusterVersion, cluster_versions, slow_link_problems
from mirrorflow.ops.preflight import preflight


@click.group()
@click.option(
    "--log-level",
    type=click.Choice(LEVELS, case_sensitive=False),
    default="WARNING",
    show_default=True,
    envvar=LEVEL_ENV,
    show_envvar=True,
    help="Log lines of this level and above go to stderr, each with its time, level and logger, "
    "from the command and from the worker processes it starts. INFO adds lines such as where a "
    "plan read the flow's progress on from and each micro-batch window task's end; DEBUG adds "
    "each retried call.",
)
def main(log_level: str) -> None:
    """mirrorflow: Kafka replication with MirrorMaker 2 semantics, run by Airflow and Spark."""
    configure_logs(log_level)


# Modules under mirrorflow.commands whose COMMANDS join `main`.
COMMAND_MODULES: tuple[str, ...] = ("maintenance", "replicate", "control", "failover", "verify", "airflow_files")


def _register_commands() -> None:
    import importlib

    for name in COMMAND_MODULES:
        for command in importlib.import_module(f"mirrorflow.commands.{name}").COMMANDS:
            main.add_command(command)


@main.command(name="validate")
@click.argument("config_file", metavar="CONFIG", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--connect",
    is_flag=True,
    help="Also connect to every cluster of the enabled flows: clusters that do not answer (and why: "
    "down, wrong protocol, TLS or SASL refused), topic and group filters that match nothing, remote "
    "topic names written from two sources, and every topic the flows write on a target that could "
    "lose acknowledged records or stop taking writes when one broker fails.",
)
@click.option(
    "--connect-timeout",
    type=click.FloatRange(min=0.1),
    default=15.0,
    show_default=True,
    metavar="SECONDS",
    help="With --connect: how long each cluster may take to answer.",
)
@click.option(
    "--output",
    type=click.Choice(["table", "json"]),
    default="table",
    show_default=True,
    help="json: one object with every problem (key, severity, problem, fix) and the counts, for CI.",
)
def validate_command(config_file: Path, connect: bool, connect_timeout: float, output: str) -> None:
    """Check an MM2 properties file: every problem with its fix, then the clusters and flows.
    Offline unless --connect is given. Exits 1 if there is any error."""
    console = make_console()
    config: MirrorConfig | None = None
    try:
        config = parse_config(config_file)
    except ConfigError as exc:
        problems = exc.problems
    else:
        problems = validate(config) + nothing_replicated(config)
    connected = ""
    versions: list[ClusterVersion] = []
    if connect and config is not None:
        if any(p.is_error for p in problems):
            connected = "--connect skipped: fix the errors first"
        else:
            problems += preflight(config, timeout_s=connect_timeout)
            versions = cluster_versions(config, timeout_s=connect_timeout)
            problems += slow_link_problems(config, versions)
            connected = (
                f"--connect: checked the clusters, filters and written topics of {len(config.flows)} flow(s)"
            )
    errors = sum(p.is_error for p in problems)
    warnings = sum(p.is_warning for p in problems)
    notes = len(problems) - errors - warnings
    if output == "json":
        body = {
            "command": "validate",
            "ok": not errors,
            "config": str(config_file),
            "errors": errors,
            "warnings": warnings,
            "notes": notes,
            "connected": connect and bool(connected) and not connected.startswith("--connect skipped"),
            "clusters": [v.as_json() for v in versions],
            "problems": [
                {"key": p.key, "severity": p.severity.value, "problem": p.message, "fix": p.fix}
                for p in sorted(problems, key=lambda p: (not p.is_error, p.key))
            ],
        }
        click.echo(json.dumps(body, indent=2))
        sys.exit(1 if errors else 0)
    if problems:
        console.print(_problems_table(problems))
    if config is not None:
        console.print(_clusters_table(config))
        console.print(_flows_table(config))
    if versions:
        console.print(_versions_table(versions))
    if connected:
        console.print(connected)
    style = "bold red" if errors else "bold green"
    told = f"{errors} error(s), {warnings} warning(s)" + (f", {notes} note(s)" if notes else "")
    console.print(f"[{style}]{config_file}: {told}[/{style}]")
    sys.exit(1 if errors else 0)


def _problems_table(problems: list[Problem]) -> Table:
    table = Table(title="Problems", show_lines=True)
    for column in ("key", "severity", "problem", "fix"):
        table.add_column(column, overflow="fold")
    for problem in sorted(problems, key=lambda p: (not p.is_error, p.key)):
        color = "red" if problem.is_error else "yellow" if problem.is_warning else "blue"
        # A key or value read from the file may hold "[...]", which rich would take as markup.
        table.add_row(
            escape(problem.key),
            f"[{color}]{problem.severity.value}[/{color}]",
            escape(problem.message),
            escape(problem.fix),
        )
    return table


def _versions_table(versions: list[ClusterVersion]) -> Table:
    table = Table(title="Cluster versions", show_lines=True)
    for column in ("alias", "asked", "metadata.version", "round trip", "what it means for the flows"):
        table.add_column(column, overflow="fold")
    for version in versions:
        trip = "-" if version.round_trip_ms is None else f"{version.round_trip_ms:.1f} ms"
        notes = "\n".join(f"- {note}" for note in version.notes) or "-"
        table.add_row(version.alias, version.address, escape(version.release), trip, escape(notes))
    return table


def _clusters_table(config: MirrorConfig) -> Table:
    table = Table(title="Clusters")
    for column in ("alias", "bootstrap.servers", "airflow connection"):
        table.add_column(column, overflow="fold")
    for alias in config.clusters:
        cluster = config.cluster(alias)
        bootstrap = cluster.redacted().get("bootstrap.servers", "-")
        table.add_row(alias, bootstrap, cluster.airflow_connection_id or "-")
    return table


def _flows_table(config: MirrorConfig) -> Table:
    table = Table(title="Flows")
    columns = (
        "flow",
        "replicates",
        "heartbeats",
        "policy",
        "topics",
        "groups",
        "mode",
        "schedule",
        "delivery",
    )
    for column in columns:
        table.add_column(column, overflow="fold")
    for source, target in config.pairs():
        replicates = config.replication_enabled(source, target)
        heartbeats = config.heartbeats_enabled(source, target)
        if not (replicates or heartbeats):
            continue
        flow, _ = config.resolved_flow(source, target)
        table.add_row(
            flow.name,
            "yes" if replicates else "no",
            "yes" if heartbeats and flow.emit_heartbeats_interval is not None else "no",
            type(flow.policy).__name__,
            ", ".join(flow.topics) if replicates else "-",
            ", ".join(flow.groups) if replicates else "-",
            flow.replicate_mode if replicates else "-",
            _schedule(flow) if replicates else "-",
            flow.delivery if replicates else "-",
        )
    return table


def _schedule(flow: FlowConfig) -> str:
    """A micro-batch flow copies a batch every mirrorflow.microbatch.interval.ms within windows of
    mirrorflow.microbatch.window.seconds; mirrorflow.replicate.schedule is not used for it, so its
    cron would name a schedule the flow does not run on."""
    if flow.replicate_mode == MICRO_BATCH:
        return f"every {flow.microbatch_interval_ms:,} ms, in windows of {flow.microbatch_window_seconds:,} s"
    return flow.replicate_schedule


_register_commands()
