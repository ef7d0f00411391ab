"""`mirrorflow replicate` on a micro-batch flow: one window with local workers.

The same window a DAG run's Spark application runs (replicate/window), its tasks in local
processes: plan, copy every interval for the window's length (mirrorflow.microbatch.window.seconds,
or --window), store the report and the summary beside the DAG runs'. Nothing takes over from a
window run by hand, so it ends at its end, with exit 0 when every partition is copied. Instead of a
progress bar it prints a line (records, lag) every few seconds while records move and once a minute
while none do, and the window's summary in sentences at the end (run_display.print_outcome);
Ctrl-C ends it after the batch in flight, which commits whole.
"""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape

from mirrorflow.clients import FlowClients
from mirrorflow.commands.outcome import RunOutcome, finish_run
from mirrorflow.commands.run_display import print_plan
from mirrorflow.config import FlowConfig, MirrorConfig
from mirrorflow.replicate import run_reading, service
from mirrorflow.replicate.plan import Plan
from mirrorflow.replicate.window.announced import window_copy_job
from mirrorflow.replicate.window.driver import WindowDriver
from mirrorflow.replicate.window.local import LocalTasks
from mirrorflow.replicate.window.settings import window_settings
from mirrorflow.replicate.window.share import task_count


def run_window(
    console: Console,
    config: MirrorConfig,
    flow: FlowConfig,
    clients: FlowClients,
    *,
    run_id: str,
    window_s: float | None,
    connect_timeout_s: float | None,
) -> RunOutcome:
    planned = service.plan_run(
        config, flow.source, flow.target, run_id=run_id, connect_timeout_s=connect_timeout_s
    )
    plan_offset = planned["plan_offset"]
    plan = Plan.from_json(run_reading.read_run_record(clients.target_consumer, plan_offset)[3])
    print_plan(console, planned, plan)
    settings = window_settings(flow, started_ms=plan.created_ms, length_s=window_s, handover=False)
    count = task_count(plan)
    job = window_copy_job(flow, clients, plan, settings, workers=count)
    tasks = LocalTasks(job, settings)
    console.print(
        f"[bold]micro-batch[/bold] window of {(settings.ends_ms - plan.created_ms) / 1000:g}s, a batch every "
        f"{settings.interval_s:g}s, {count} task(s); Ctrl-C ends it after the batch in flight",
        highlight=False,
    )
    driver = WindowDriver(
        flow,
        clients,
        plan,
        plan_offset,
        settings,
        log_line=lambda line: console.print(escape(line), highlight=False),
    )
    result = driver.run(tasks, count)
    if tasks.interrupted:
        console.print("stopped by Ctrl-C after the batch in flight", highlight=False)
    if not result.stored:
        return RunOutcome(planned, plan, result.report.summary(), 1, result.error)
    return finish_run(config, flow, clients, planned, plan, plan_offset, 1, result.error)
