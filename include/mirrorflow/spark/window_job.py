"""The micro-batch window: `spark-submit spark_apps/mirrorflow_window.py --config F --flow A->B
--plan-offset N [--window SECONDS]`.

One Spark application per window (one replicate DAG run of a micro-batch flow). The driver reads
the plan the plan task stored, deals the writer slots over min(tasks.max, slots in use, the task
slots Spark offers) long-running tasks, each holding a copy worker for the whole window
(replicate/window), logs a line every few seconds with the records copied and the lag, and ends
with the window's summary in sentences (replicate/window/summary.py). A
task slot Spark does not offer would leave a task waiting for the whole window, so the tasks
never outnumber spark.default.parallelism (in local[N] mode, N; on a cluster, its cores).

The window ends at the plan's time plus mirrorflow.microbatch.window.seconds (a retry of the
same DAG run ends at the same time) and then copies on until the next window has taken its
slots over. Arguments and credentials are the copy job's (mirrorflow.spark.copy_job).
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Iterator

from mirrorflow.clients import FlowClients, unreachable_now
from mirrorflow.config import FlowConfig
from mirrorflow.replicate.copy import CopyJob
from mirrorflow.replicate.window.announced import CountsUnread, window_copy_job
from mirrorflow.replicate.window.driver import WindowDriver, WindowResult
from mirrorflow.replicate.window.settings import WindowSettings, clock, window_settings
from mirrorflow.replicate.window.share import Assignment, task_count
from mirrorflow.replicate.window.summary import window_sentences
from mirrorflow.replicate.window.task import TaskOutcome, run_task
from mirrorflow.spark.copy_job import (
    configure_logging,
    flow_and_clients,
    lost,
    read_plan_or_lost,
    run_slices,
    spark_context,
)
from mirrorflow.spark.outcome import LOST_EXIT, lost_line

log = logging.getLogger("mirrorflow.spark.window")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="mirrorflow_window.py", description="Copy one micro-batch window.")
    parser.add_argument("--config", required=True, help="the mirrorflow / MM2 properties file")
    parser.add_argument("--flow", required=True, help="SOURCE->TARGET")
    parser.add_argument(
        "--plan-offset", required=True, type=int, help="offset of the plan in the run-records topic"
    )
    parser.add_argument(
        "--window", type=float, default=None, help="seconds (default: mirrorflow.microbatch.window.seconds)"
    )
    return parser.parse_args(argv)


def spark_task_slots() -> int:
    """Tasks Spark runs at once: spark.default.parallelism as the SparkContext reports it."""
    return spark_context().defaultParallelism


def _copy_window(job: CopyJob, settings: WindowSettings, assigned: list[Assignment]) -> Iterator[TaskOutcome]:
    # On the executor: the tasks' own lines (a handover, in one INFO line per set of slots; how a
    # task ended) at their levels with their names, as the driver's, not only Python's bare
    # warnings that a process without logging set up writes to stderr.
    configure_logging()
    for assignment in assigned:
        yield run_task(job, settings, assignment)


def main(argv: list[str] | None = None) -> int:
    configure_logging()
    args = parse_args(argv)
    flow, clients = flow_and_clients(args)
    plan = read_plan_or_lost(flow, clients, args.plan_offset)
    if isinstance(plan, int):
        return plan
    run_id = plan.run_id
    settings = window_settings(flow, started_ms=plan.created_ms, length_s=args.window)
    slots = spark_task_slots()
    tasks = task_count(plan, slots)
    try:
        job = window_copy_job(flow, clients, plan, settings, workers=tasks)
    except CountsUnread as exc:
        # As when its plan cannot be read: a target that is gone is said so (no retry of the task).
        now = unreachable_now(flow, clients)
        log.error("%s", exc if now is None else lost_line(f"{now} ({exc})"))
        return 1 if now is None else LOST_EXIT
    if tasks < task_count(plan):
        log.warning(
            "Spark offers %d task slots, fewer than the %d tasks this window would run (tasks.max = %d): "
            "running %d; give Spark more cores (docs/concepts/micro-batch.md)",
            slots,
            task_count(plan),
            plan.tasks_max,
            tasks,
        )
    log.info(
        "window %s of %s: %d partitions over %d tasks, a batch every %gs until %s (then until the next "
        "window takes over, %gs at most, %gs once the next window has planned)",
        run_id,
        flow.name,
        len(plan.spans),
        tasks,
        settings.interval_s,
        clock(settings.ends_ms),
        settings.handover_s,
        settings.wait_s(successor=True),
    )
    driver = WindowDriver(
        flow, clients, plan, args.plan_offset, settings, log_line=lambda line: log.info("%s", line)
    )

    def launch(assigned: list[Assignment]) -> list[TaskOutcome]:
        return run_slices(
            f"mirrorflow window {flow.name} {run_id}",
            [[a] for a in assigned],
            lambda share: _copy_window(job, settings, share),
        )

    result = driver.run(launch, tasks)
    for line in window_sentences(result.report.summary(), name=f"Window {run_id} of {flow.name}"):
        log.info("%s", line)
    return window_exit(flow, clients, result)


def window_exit(flow: FlowConfig, clients: FlowClients, result: WindowResult) -> int:
    """The job's exit code for a window that ended, and its last ERROR lines. A window that lost a
    cluster says so in the plan's sentence (no retry of the task, spark/outcome.py): one whose
    tasks found a cluster unreachable, and one that ended on any other error while a cluster does
    not answer a short probe now (a ListOffsets that found no leader, a run record not
    acknowledged, as the fault schedules saw windows end while a node was frozen)."""
    if not result.report.ok:
        log.error("%s", result.report.failure_message())
    gone = next((unit for unit in result.report.units if unit.get("unreachable")), None)
    if gone is not None:
        return lost(
            flow,
            clients,
            result.error or gone.get("error") or f"cluster {gone['unreachable']} is unreachable",
        )
    if result.error:
        now = unreachable_now(flow, clients)
        if now is not None:
            log.error("%s", lost_line(f"{now} (the window ended on: {result.error})"))
            return LOST_EXIT
        log.error("%s", result.error)
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
