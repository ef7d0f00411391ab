"""What a flow command's arguments and configuration mean: the flow, topic and time options shared
by `mirrorflow replicate`, `migrate` and `verify`, loading the flow's config (every problem named
with its fix), and the errors a plan step may end with."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

import click
from confluent_kafka import KafkaError, KafkaException
from rich.console import Console
from rich.markup import escape

from mirrorflow.clients import FlowClients
from mirrorflow.config import ConfigError, FlowConfig, MirrorConfig, Problem, load_config
from mirrorflow.config.mirrorflow_keys import DELIVERY_CHOICES
from mirrorflow.kafka import ClusterUnreachable, KafkaCallError
from mirrorflow.replicate import runs
from mirrorflow.replicate.progress import ProgressReadError
from mirrorflow.replicate.topics import InternalTopicError
from mirrorflow.replicate.until import parse_until

PLAN_ERRORS = (
    ClusterUnreachable,
    KafkaException,
    KafkaCallError,
    InternalTopicError,
    ProgressReadError,
    runs.RunRecordMissing,
)


def cli_run_id(now: datetime | None = None) -> str:
    """`cli__<UTC time>`, shaped like Airflow's `manual__<time>` so run lists sort together."""
    moment = (now or datetime.now(UTC)).astimezone(UTC)
    return f"cli__{moment.isoformat(timespec='microseconds')}"


def parse_flow(_ctx: click.Context, _param: click.Parameter, value: str) -> tuple[str, str]:
    source, arrow, target = value.partition("->")
    if not arrow or not source.strip() or not target.strip():
        raise click.BadParameter(
            f"{value!r} is not a flow; write SOURCE->TARGET, for example primary->backup"
        )
    return source.strip(), target.strip()


def parse_topics(_ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    if value is None:
        return None
    try:
        re.compile(value)
    except re.error as exc:
        raise click.BadParameter(
            f"{value!r} is not a regular expression ({exc}); it must match whole topic names, e.g. 'orders|payments-.*'"
        ) from exc
    return value


def parse_until_option(_ctx: click.Context, _param: click.Parameter, value: str) -> int | None:
    try:
        return parse_until(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from exc


def config_failure(err: Console, where: str, problems: list[Problem]) -> click.ClickException:
    errors = [p for p in problems if p.is_error]
    for problem in errors:
        err.print(f"  [red]error[/red] {escape(problem.key)}: {escape(problem.message)}", highlight=False)
        err.print(f"        fix: {escape(problem.fix)}", highlight=False)
    return click.ClickException(
        f"{where}: {len(errors)} configuration error(s); `mirrorflow validate` shows them all"
    )


def load_flow(
    err: Console, config_file: Path, source: str, target: str, *, require_enabled: bool
) -> tuple[MirrorConfig, FlowConfig]:
    try:
        config = load_config(str(config_file))
    except ConfigError as exc:
        raise config_failure(err, str(config_file), exc.problems) from exc
    for alias in (source, target):
        if alias not in config.clusters:
            raise click.BadParameter(
                f"{alias!r} is not a cluster of {config_file} (clusters = {', '.join(config.clusters)})",
                param_hint="'--flow'",
            )
    if source == target:
        raise click.BadParameter(
            f"{source}->{target} copies a cluster onto itself; name two clusters", param_hint="'--flow'"
        )
    try:
        flow = config.flow(source, target)
    except ConfigError as exc:
        raise config_failure(err, f"{config_file} ({source}->{target})", exc.problems) from exc
    if require_enabled and not config.replication_enabled(source, target):
        raise click.ClickException(
            f"{source}->{target} is not enabled in {config_file}: set {source}->{target}.enabled = true, "
            f"or copy once with `mirrorflow migrate {config_file} --flow {source}->{target}`"
        )
    return config, flow


def resolve_clients(err: Console, flow: FlowConfig) -> FlowClients:
    try:
        return FlowClients.resolve(flow)
    except ConfigError as exc:
        raise config_failure(err, flow.name, exc.problems) from exc


def describe_kafka_error(exc: KafkaException) -> str:
    error = exc.args[0] if exc.args else None
    if isinstance(error, KafkaError):
        return f"{error.name()}: {error.str()}"
    return str(exc)


FLOW_OPTION = click.option(
    "--flow",
    "flow_pair",
    required=True,
    metavar="SOURCE->TARGET",
    callback=parse_flow,
    help="The flow to run, by its cluster aliases.",
)


DELIVERY_OPTION = click.option(
    "--delivery",
    type=click.Choice(DELIVERY_CHOICES),
    default=None,
    help="Overrides mirrorflow.delivery for this run.",
)


TIMEOUT_OPTION = click.option(
    "--connect-timeout",
    type=click.FloatRange(min=0.1),
    default=None,
    metavar="SECONDS",
    help="How long each cluster may take to answer before the run gives up "
    "(default: mirrorflow.cluster.unreachable.timeout.ms, 15 s unless set).",
)


CONFIG_ARGUMENT = click.argument(
    "config_file", metavar="CONFIG", type=click.Path(dir_okay=False, path_type=Path)
)
