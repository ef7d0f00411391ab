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
import time
from collections.abc import Callable
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any

import click
from confluent_kafka import KafkaException
from rich.console import Console

from mirrorflow.clients import FlowClients
from mirrorflow.commands.console import fail_json, make_console, output_option, print_json
from mirrorflow.commands.flow_args import (
    CONFIG_ARGUMENT,
    DELIVERY_OPTION,
    FLOW_OPTION,
    PLAN_ERRORS,
    TIMEOUT_OPTION,
    cli_run_id,
    describe_kafka_error,
    load_flow,
    parse_topics,
    parse_until_option,
    resolve_clients,
)
from mirrorflow.commands.outcome import RunOutcome, finish_run
from mirrorflow.commands.run_display import CopyProgress, print_outcome, print_plan, progress_bar
from mirrorflow.commands.window import run_window
from mirrorflow.config import FlowConfig, MirrorConfig
from mirrorflow.ops.request_check import check_request
from mirrorflow.replicate import run_reading, runner, runs, service
from mirrorflow.replicate.copy import CopyJob, UnitResult
from mirrorflow.replicate.plan import Plan
from mirrorflow.replicate.planner import with_topics
from mirrorflow.replicate.watch import ProgressWatcher

MIGRATE_PASSES = 3  # a migration re-runs unfinished partitions up to this many times in all


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
    plan = Plan.from_json(run_reading.read_run_record(clients.target_consumer, plan_offset)[3])
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


# -- the commands ---------------------------------------------------------------------------


def refuse_empty_migration(
    flow: FlowConfig, clients: FlowClients, topics: str | None, connect_timeout_s: float | None
) -> None:
    """A migration whose topics match nothing would copy nothing and still end OK, as if the
    topics asked for had been moved: it is refused before anything is planned or created, with
    the sentence the Airflow form's check gives (request_check)."""
    asked = with_topics(flow, topics) if topics else flow
    title = "--topics" if topics else f"{flow.name}.topics"
    checked = check_request(asked, clients, topics_title=title, connect_timeout_s=connect_timeout_s)
    if checked.problems:
        raise click.ClickException(f"{flow.name} migrate did not start: " + " ".join(checked.problems))


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
        config, flow = load_flow(err, config_file, source, target, require_enabled=mode == "replicate")
        micro_batch = mode == "replicate" and flow.replicate_mode == "micro-batch"
        if window_s is not None and not micro_batch:
            raise click.BadParameter(
                f"{flow.name} replicates in batch mode, which has no windows; set "
                f"{flow.name}.mirrorflow.replicate.mode = micro-batch to copy in windows",
                param_hint="'--window'",
            )
        clients = resolve_clients(err, flow)
        try:
            if mode == "migrate":
                refuse_empty_migration(flow, clients, topics, connect_timeout)
            if micro_batch:
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
        except PLAN_ERRORS as exc:
            message = describe_kafka_error(exc) if isinstance(exc, KafkaException) else str(exc)
            raise click.ClickException(f"{flow.name} {mode} run failed: {message}") from exc
    except click.ClickException as exc:
        if not as_json:
            raise
        fail_json(mode, exc.format_message())
    if as_json:
        print_json(run_json(mode, outcome))
    else:
        print_outcome(console, err, outcome)
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


@click.command(name="replicate")
@CONFIG_ARGUMENT
@FLOW_OPTION
@DELIVERY_OPTION
@TIMEOUT_OPTION
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
    while records move (records, lag) and once a minute while none do, Ctrl-C ends it after the
    batch in flight. Exits 1 if any partition failed."""
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
@CONFIG_ARGUMENT
@FLOW_OPTION
@click.option(
    "--topics",
    default=None,
    metavar="REGEX",
    callback=parse_topics,
    help="Copy only topics whose whole name matches (default: the flow's topics).",
)
@click.option(
    "--until",
    default="now",
    show_default=True,
    callback=parse_until_option,
    help="'now' (the end offsets when the run starts), epoch milliseconds or an ISO-8601 time (UTC if no zone).",
)
@DELIVERY_OPTION
@TIMEOUT_OPTION
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
    fixed when the run starts, unfinished partitions are retried, and the counts are shown per topic.
    Topics that match no topic of the source are refused before anything runs (exit 1)."""
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
