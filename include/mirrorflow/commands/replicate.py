"""`mirrorflow replicate` and `mirrorflow migrate`: one run of a flow from a terminal.

A CLI run takes the DAG's steps (the plan and the report are stored in the run-records topic,
the summary next to them), so it shows up wherever a DAG run does and shares the flow's
progress: a CLI run and a scheduled run never copy the same offsets twice. Only the copy
differs: local worker processes (at most tasks.max) instead of a Spark job. A worker reports back
only when its whole share of partitions is done, so the progress bar follows the flow's progress
topic instead, which moves with every committed chunk.
"""

from __future__ import annotations

import dataclasses
import re
import time
from collections.abc import Callable
from concurrent.futures.process import BrokenProcessPool
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click
from confluent_kafka import KafkaError, KafkaException
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from mirrorflow.clients import FlowClients
from mirrorflow.commands.console import fail_json, make_console, output_option, print_json
from mirrorflow.config import ConfigError, FlowConfig, MirrorConfig, Problem, load_config
from mirrorflow.config.mirrorflow_keys import DELIVERY_CHOICES
from mirrorflow.kafka import ClusterUnreachable, KafkaCallError
from mirrorflow.replicate import runner, runs, service
from mirrorflow.replicate.copy import CopyJob, UnitResult
from mirrorflow.replicate.plan import Plan
from mirrorflow.replicate.progress import ProgressReadError
from mirrorflow.replicate.report import worst_rows
from mirrorflow.replicate.tables import summary_table
from mirrorflow.replicate.topics import InternalTopicError
from mirrorflow.replicate.until import parse_until
from mirrorflow.replicate.watch import Figures, ProgressWatcher, RunProgress, UnitKey

MIGRATE_PASSES = 3  # a migration re-runs unfinished partitions up to this many times in all
TOPIC_ROWS = 20  # topics with their own progress row; the total row always shows

_PLAN_ERRORS = (
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


# -- option parsing -------------------------------------------------------------------------


def _parse_flow(_ctx: click.Context, _param: click.Parameter, value: str) -> tuple[str, str]:
    source, arrow, target = value.partition("->")
    if not arrow or not source.strip() or not target.strip():
        raise click.BadParameter(
            f"{value!r} is not a flow; write SOURCE->TARGET, for example primary->backup"
        )
    return source.strip(), target.strip()


def _parse_topics(_ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    if value is None:
        return None
    try:
        re.compile(value)
    except re.error as exc:
        raise click.BadParameter(
            f"{value!r} is not a regular expression ({exc}); it must match whole topic names, e.g. 'orders|payments-.*'"
        ) from exc
    return value


def _parse_until(_ctx: click.Context, _param: click.Parameter, value: str) -> int | None:
    try:
        return parse_until(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from exc


# -- config and clusters --------------------------------------------------------------------


def _config_failure(err: Console, where: str, problems: list[Problem]) -> click.ClickException:
    errors = [p for p in problems if p.is_error]
    for problem in errors:
        err.print(f"  [red]error[/red] {escape(problem.key)}: {escape(problem.message)}", highlight=False)
        err.print(f"        fix: {escape(problem.fix)}", highlight=False)
    return click.ClickException(
        f"{where}: {len(errors)} configuration error(s); `mirrorflow validate` shows them all"
    )


def _load_flow(
    err: Console, config_file: Path, source: str, target: str, *, require_enabled: bool
) -> tuple[MirrorConfig, FlowConfig]:
    try:
        config = load_config(str(config_file))
    except ConfigError as exc:
        raise _config_failure(err, str(config_file), exc.problems) from exc
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
        raise _config_failure(err, f"{config_file} ({source}->{target})", exc.problems) from exc
    if require_enabled and not config.replication_enabled(source, target):
        raise click.ClickException(
            f"{source}->{target} is not enabled in {config_file}: set {source}->{target}.enabled = true, "
            f"or copy once with `mirrorflow migrate {config_file} --flow {source}->{target}`"
        )
    return config, flow


def _resolve_clients(err: Console, flow: FlowConfig) -> FlowClients:
    try:
        return FlowClients.resolve(flow)
    except ConfigError as exc:
        raise _config_failure(err, flow.name, exc.problems) from exc


def _describe_kafka_error(exc: KafkaException) -> str:
    error = exc.args[0] if exc.args else None
    if isinstance(error, KafkaError):
        return f"{error.name()}: {error.str()}"
    return str(exc)


# -- progress while copying -----------------------------------------------------------------


class CopyProgress:
    """The run's progress (watch.RunProgress) shown as a bar per topic and one in total."""

    def __init__(self, progress: Progress, plan: Plan) -> None:
        self._progress = progress
        self._run = RunProgress(plan)
        self._total = progress.add_task("all topics", total=self._run.total().planned, partitions="")
        self._rows: dict[str, TaskID] = {}
        for topic in sorted(self._run.by_topic)[:TOPIC_ROWS]:
            figures = self._run.figures(self._run.by_topic[topic])
            remote = self._run.units[self._run.by_topic[topic][0]].remote_topic
            self._rows[topic] = progress.add_task(f"{topic} → {remote}", total=figures.planned, partitions="")
        self._render()

    @property
    def keys(self) -> list[UnitKey]:
        return self._run.keys

    def observed(self, stored: dict[UnitKey, int]) -> None:
        self._run.observed(stored)
        self._render()

    def finished(self, result: UnitResult) -> None:
        self._run.finished(result)
        self._render()

    @staticmethod
    def _partitions(figures: Figures) -> str:
        text = f"{figures.partitions_done}/{figures.partitions} partitions"
        return text + (f", [red]{figures.failed} failed[/red]" if figures.failed else "")

    def _render(self) -> None:
        total = self._run.total()
        self._progress.update(self._total, completed=total.done, partitions=self._partitions(total))
        for topic, task in self._rows.items():
            figures = self._run.figures(self._run.by_topic[topic])
            self._progress.update(task, completed=figures.done, partitions=self._partitions(figures))


def progress_bar(console: Console) -> Progress:
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed:,.0f}/{task.total:,.0f} offsets"),
        TextColumn("{task.fields[partitions]}"),
        TimeElapsedColumn(),
        console=console,
    )


# -- the run --------------------------------------------------------------------------------


def copy_pass(
    job: CopyJob, plan: Plan, on_result: Callable[[UnitResult], None] | None = None
) -> list[UnitResult]:
    """Copy every unit of `plan` in local workers; a unit whose worker died gets a failed result
    (instead of the whole pass failing), so the report still names every partition."""
    results: list[UnitResult] = []

    def collect(result: UnitResult) -> None:
        results.append(result)
        if on_result is not None:
            on_result(result)

    try:
        runner.run_locally(job, plan, on_result=collect)
    except BrokenProcessPool as exc:
        reported = {(r.topic, r.partition) for r in results}
        for span in plan.units():
            if (span.topic, span.partition) not in reported:
                collect(UnitResult.not_copied(span, f"the worker process copying it died ({exc})"))
    return results


def unfinished(plan: Plan, results: list[UnitResult]) -> Plan | None:
    """The plan narrowed to the partitions that failed or stopped short, or None if all are done."""
    left = {(r.topic, r.partition) for r in results if not r.ok or r.progress < r.planned_end - 1}
    spans = tuple(s for s in plan.units() if (s.topic, s.partition) in left)
    return dataclasses.replace(plan, spans=spans) if spans else None


@dataclasses.dataclass
class RunOutcome:
    planned: dict[str, Any]
    plan: Plan
    summary: dict[str, Any]
    passes: int
    failure: str | None = None


def _stored_summary(clients: FlowClients, plan: Plan, plan_offset: int) -> dict[str, Any]:
    summaries = runs.wait_for_run_records(
        clients.target_consumer, plan.flow, plan.run_id, "summary", start=plan_offset
    )
    return summaries[-1]


def finish_run(
    config: MirrorConfig,
    flow: FlowConfig,
    clients: FlowClients,
    planned: dict[str, Any],
    plan: Plan,
    plan_offset: int,
    passes: int,
    failure: str | None = None,
) -> RunOutcome:
    """The run's outcome with its summary: the one report_run stores, or, when the report finds
    the run failed, the summary it stored anyway (`failure` first, else the report's reason)."""
    try:
        summary = service.report_run(
            config,
            flow.source,
            flow.target,
            run_id=plan.run_id,
            plan_offset=plan_offset,
            topic_errors=planned["topic_errors"],
            topic_errors_count=planned["topic_errors_count"],
        )
    except service.RunFailed as exc:
        return RunOutcome(
            planned, plan, _stored_summary(clients, plan, plan_offset), passes, failure or str(exc)
        )
    return RunOutcome(planned, plan, summary, passes, failure)


def run_flow(
    console: Console,
    config: MirrorConfig,
    flow: FlowConfig,
    clients: FlowClients,
    *,
    run_id: str,
    mode: str,
    passes: int,
    until: int | None = None,
    topics: str | None = None,
    delivery: str | None = None,
    connect_timeout_s: float | None = None,
) -> RunOutcome:
    """Plan, copy (up to `passes` times for what is left), store the reports and the summary."""
    planned = service.plan_run(
        config,
        flow.source,
        flow.target,
        run_id=run_id,
        mode=mode,
        until=until,
        topics=topics,
        delivery=delivery,
        connect_timeout_s=connect_timeout_s,
    )
    plan_offset = planned["plan_offset"]
    plan = Plan.from_json(runs.read_run_record(clients.target_consumer, plan_offset)[3])
    print_plan(console, planned, plan)
    job = runner.copy_job_for(flow, clients, plan)
    pending: Plan | None = plan
    done_passes = 0
    if plan.units():
        progress = progress_bar(console)
        tracker = CopyProgress(progress, plan)
        watcher = ProgressWatcher(
            clients.target_consumer, flow.offset_storage_topic, flow.source, tracker.keys, tracker.observed
        )
        with progress:
            watcher.start()
            try:
                while pending is not None and done_passes < passes:
                    done_passes += 1
                    started_ms = int(time.time() * 1000)
                    results = copy_pass(job, pending, tracker.finished)
                    gone = next((r for r in results if r.unreachable), None)
                    try:
                        runner.store_report(clients, plan, results, started_ms)
                    except runs.RunRecordNotStored as exc:
                        report = exc.report  # type: ignore[attr-defined]
                        failure = f"{report.failure_message()}\nThe run's report could not be stored: {exc}"
                        return RunOutcome(planned, plan, report.summary(), done_passes, failure)
                    if gone is not None:
                        break  # another pass would only meet the same unreachable cluster
                    pending = unfinished(pending, results)
            finally:
                watcher.stop()
    else:
        runner.store_report(clients, plan, [], int(time.time() * 1000))
    return finish_run(config, flow, clients, planned, plan, plan_offset, done_passes)


# -- output ---------------------------------------------------------------------------------


def _print_lines(console: Console, lines: list[str], total: int, what: str) -> None:
    """The first LOST_LINES of `lines`, then how many of `total` were left out."""
    for line in lines[:LOST_LINES]:
        console.print(line, highlight=False)
    shown = min(len(lines), LOST_LINES)
    if total > shown:
        console.print(f"  ... and {total - shown:,} more {what}", highlight=False)


def print_plan(console: Console, planned: dict[str, Any], plan: Plan) -> None:
    """What the plan does and cannot do; every list at most LOST_LINES long, with its count."""
    per_topic = plan.summary()
    pending = sum(s.pending for s in plan.spans)
    console.print(
        f"[bold]{plan.mode}[/bold] {escape(plan.flow)} run [bold]{escape(plan.run_id)}[/bold] "
        f"({plan.delivery}): {len(per_topic)} topic(s), {len(plan.units())} partition(s) to copy, "
        f"{pending:,} offset(s) planned",
        highlight=False,
    )
    created = [f"  created {escape(remote)} on {escape(plan.target)}" for remote in planned["created_topics"]]
    _print_lines(console, created, planned.get("created_topics_count", len(created)), "created")
    grown = [
        f"  grew {escape(remote)} from {before} to {after} partitions"
        for remote, (before, after) in planned["grown_topics"].items()
    ]
    _print_lines(console, grown, planned.get("grown_topics_count", len(grown)), "grown")
    lossy = {topic: row for topic, row in per_topic.items() if row["lost"]}
    deleted = [
        f"  [yellow]{escape(topic)}: {row['lost']:,} offset(s) were deleted from the source "
        "(retention or DeleteRecords) before they were copied; copying from the earliest offset[/yellow]"
        for topic, row in worst_rows(lossy, ("lost",), LOST_LINES).items()
    ]
    _print_lines(console, deleted, len(lossy), "topics with deleted offsets")
    errors = [
        f"  [red]{escape(topic)} is not copied: {escape(why)}[/red]"
        for topic, why in sorted(planned["topic_errors"].items())
    ]
    _print_lines(console, errors, planned.get("topic_errors_count", len(errors)), "topics not copied")
    restarted = [
        f"  [yellow]{escape(partition)}: {escape(why)}[/yellow]"
        for partition, why in planned["restarted_partitions"].items()
    ]
    _print_lines(
        console,
        restarted,
        planned.get("restarted_count", len(restarted)),
        "partitions copied again from the start",
    )
    if not plan.spans:
        console.print(
            f"  nothing to copy: no topic of {escape(plan.source)} passes the flow's topic filter and cycle check",
            highlight=False,
        )
    elif not plan.units():
        console.print("  nothing to copy: every partition is caught up", highlight=False)


LOST_LINES = 20


def _print_outcome(console: Console, err: Console, outcome: RunOutcome) -> None:
    summary = outcome.summary
    if outcome.plan.spans:
        console.print(summary_table(outcome.plan, summary))
    totals = summary["totals"]
    passes = f" in {outcome.passes} passes" if outcome.passes > 1 else ""
    console.print(
        f"{totals['records']:,} record(s), {totals['bytes']:,} bytes, {totals['transactions']:,} transaction(s), "
        f"{totals['offset_syncs']:,} offset-sync(s){passes}; {summary['seconds']:.1f}s",
        highlight=False,
    )
    if "window" in summary:
        from mirrorflow.commands.window import window_line  # it imports this module

        console.print(window_line(summary), highlight=False)
    for gone in summary.get("lost", [])[:LOST_LINES]:
        ranges = ", ".join(f"{start}-{end - 1}" for start, end in gone["offsets"])
        console.print(
            f"[yellow]{escape(gone['topic'])}-{gone['partition']}: offsets {ranges} were deleted from the source "
            "(retention or DeleteRecords) before they could be copied[/yellow]",
            highlight=False,
        )
    lossy = summary.get("lost_partitions", len(summary.get("lost", [])))
    if lossy > LOST_LINES:
        console.print(f"[yellow]... and {lossy - LOST_LINES:,} more partitions with losses[/yellow]")
    if totals.get("retimed"):
        where = ", ".join(f"{r['topic']}-{r['partition']}" for r in summary.get("retimed", [])[:LOST_LINES])
        console.print(
            f"[yellow]{totals['retimed']:,} record(s) with timestamp 0 were written with the copy's time "
            f"instead (librdkafka cannot write a timestamp of 0): {escape(where)}[/yellow]",
            highlight=False,
        )
    if outcome.failure:
        err.print("[bold red]FAILED[/bold red]", highlight=False)
        err.print(escape(outcome.failure), highlight=False)
    else:
        console.print(f"[bold green]OK[/bold green] {escape(outcome.plan.flow)} {outcome.plan.mode} run done")


# -- commands -------------------------------------------------------------------------------


def _execute(
    config_file: Path,
    flow_pair: tuple[str, str],
    *,
    mode: str,
    passes: int,
    connect_timeout: float | None,
    until: int | None = None,
    topics: str | None = None,
    delivery: str | None = None,
    output: str = "table",
    window_s: float | None = None,
) -> None:
    as_json = output == "json"
    err = make_console(stderr=True)
    # With --output json the plan and the progress go to stderr; stdout holds the one JSON object.
    console = err if as_json else make_console()
    source, target = flow_pair
    try:
        config, flow = _load_flow(err, config_file, source, target, require_enabled=mode == "replicate")
        micro_batch = mode == "replicate" and flow.replicate_mode == "micro-batch"
        if window_s is not None and not micro_batch:
            raise click.BadParameter(
                f"{flow.name} replicates in batch mode, which has no windows; set "
                f"{flow.name}.mirrorflow.replicate.mode = micro-batch to copy in windows",
                param_hint="'--window'",
            )
        clients = _resolve_clients(err, flow)
        try:
            if micro_batch:
                from mirrorflow.commands.window import run_window  # it imports this module

                outcome = run_window(
                    console,
                    config,
                    flow,
                    clients,
                    run_id=cli_run_id(),
                    window_s=window_s,
                    connect_timeout_s=connect_timeout,
                )
            else:
                outcome = run_flow(
                    console,
                    config,
                    flow,
                    clients,
                    run_id=cli_run_id(),
                    mode=mode,
                    passes=passes,
                    until=until,
                    topics=topics,
                    delivery=delivery,
                    connect_timeout_s=connect_timeout,
                )
        except _PLAN_ERRORS as exc:
            message = _describe_kafka_error(exc) if isinstance(exc, KafkaException) else str(exc)
            raise click.ClickException(f"{flow.name} {mode} run failed: {message}") from exc
    except click.ClickException as exc:
        if not as_json:
            raise
        fail_json(mode, exc.format_message())
    if as_json:
        print_json(run_json(mode, outcome))
    else:
        _print_outcome(console, err, outcome)
    if outcome.failure:
        raise SystemExit(1)


def run_json(command: str, outcome: RunOutcome) -> dict[str, Any]:
    """`replicate`/`migrate --output json`: the run's stored summary plus what the plan did."""
    plan, planned = outcome.plan, outcome.planned
    return {
        "command": command,
        "ok": outcome.failure is None,
        "error": outcome.failure,
        "flow": plan.flow,
        "run_id": plan.run_id,
        "mode": plan.mode,
        "passes": outcome.passes,
        "plan": {
            "topics": len(plan.summary()),
            "partitions": len(plan.units()),
            "offsets": sum(s.pending for s in plan.spans),
            "created_topics": list(planned["created_topics"]),
            "grown_topics": planned["grown_topics"],
            "topic_errors": planned["topic_errors"],
        },
        "summary": outcome.summary,
    }


_OUTPUT_OPTION = output_option(
    "json: one JSON object on stdout when the run ends (keys: command, ok, error, flow, run_id, mode, "
    "passes, plan, summary); the plan and the progress go to stderr."
)


_FLOW_OPTION = click.option(
    "--flow",
    "flow_pair",
    required=True,
    metavar="SOURCE->TARGET",
    callback=_parse_flow,
    help="The flow to run, by its cluster aliases.",
)
_DELIVERY_OPTION = click.option(
    "--delivery",
    type=click.Choice(DELIVERY_CHOICES),
    default=None,
    help="Overrides mirrorflow.delivery for this run.",
)
_TIMEOUT_OPTION = click.option(
    "--connect-timeout",
    type=click.FloatRange(min=0.1),
    default=None,
    metavar="SECONDS",
    help="How long each cluster may take to answer before the run gives up "
    "(default: mirrorflow.cluster.unreachable.timeout.ms, 15 s unless set).",
)
_CONFIG_ARGUMENT = click.argument(
    "config_file", metavar="CONFIG", type=click.Path(dir_okay=False, path_type=Path)
)


@click.command(name="replicate")
@_CONFIG_ARGUMENT
@_FLOW_OPTION
@_DELIVERY_OPTION
@_TIMEOUT_OPTION
@click.option(
    "--window",
    "window_s",
    type=click.FloatRange(min=1),
    default=None,
    metavar="SECONDS",
    help="Micro-batch flows: how long the window copies (default: mirrorflow.microbatch.window.seconds).",
)
@_OUTPUT_OPTION
def replicate_command(
    config_file: Path,
    flow_pair: tuple[str, str],
    delivery: str | None,
    connect_timeout: float | None,
    window_s: float | None,
    output: str,
) -> None:
    """One run of an enabled flow, as its replicate DAG would do it: plan, copy with local
    workers (at most tasks.max), store the report. A micro-batch flow runs one window: a batch
    every mirrorflow.microbatch.interval.ms until the window's end, a line every few seconds
    (records, lag), Ctrl-C ends it after the batch in flight. Exits 1 if any partition failed."""
    _execute(
        config_file,
        flow_pair,
        mode="replicate",
        passes=1,
        connect_timeout=connect_timeout,
        delivery=delivery,
        output=output,
        window_s=window_s,
    )


@click.command(name="migrate")
@_CONFIG_ARGUMENT
@_FLOW_OPTION
@click.option(
    "--topics",
    default=None,
    metavar="REGEX",
    callback=_parse_topics,
    help="Copy only topics whose whole name matches (default: the flow's topics).",
)
@click.option(
    "--until",
    default="now",
    show_default=True,
    callback=_parse_until,
    help="'now' (the end offsets when the run starts), epoch milliseconds or an ISO-8601 time (UTC if no zone).",
)
@_DELIVERY_OPTION
@_TIMEOUT_OPTION
@_OUTPUT_OPTION
def migrate_command(
    config_file: Path,
    flow_pair: tuple[str, str],
    topics: str | None,
    until: int | None,
    delivery: str | None,
    connect_timeout: float | None,
    output: str,
) -> None:
    """Copy everything up to a point in time (any two clusters of the config): the end offsets are
    fixed when the run starts, unfinished partitions are retried, and the counts are shown per topic."""
    _execute(
        config_file,
        flow_pair,
        mode="migrate",
        passes=MIGRATE_PASSES,
        connect_timeout=connect_timeout,
        until=until,
        topics=topics,
        delivery=delivery,
        output=output,
    )


COMMANDS = [replicate_command, migrate_command]
