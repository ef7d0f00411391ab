"""The copy job: `spark-submit spark_apps/mirrorflow_copy.py --config F --flow A->B --plan-offset N`.

The driver reads the plan the Airflow plan task stored in the run-records topic, deals the
plan's partitions over at most tasks.max Spark tasks (one writer per partition, as the copy
engine requires), collects the results, stores the run report and exits non-zero if any
partition failed: with spark/outcome.LOST_EXIT and the plan's sentence for it when a cluster was
lost (the report is then stored if the target still takes it). Credentials an Airflow connection holds reach the driver in the
MIRRORFLOW_CONNECTION_EXTRAS environment variable (set by the operator, never in arguments)
and travel to executors inside the task closure, never through Spark conf or the UI.

The verify job (mirrorflow.spark.verify_job) takes the same arguments and credentials, and
fans out the same way: it uses parse_args, flow_and_clients and run_slices from here.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from functools import partial
from typing import Any, TypeVar

from confluent_kafka import KafkaException

from mirrorflow.clients import FlowClients, lost_cluster, unreachable_now
from mirrorflow.config import FlowConfig, load_config
from mirrorflow.kafka import ClusterUnreachable, KafkaCallError
from mirrorflow.logs import LOG_FORMAT
from mirrorflow.replicate.copy import copy_slice
from mirrorflow.replicate.plan import Plan
from mirrorflow.replicate.report import RunReport
from mirrorflow.replicate.run_reading import read_run_record
from mirrorflow.replicate.runner import copy_job_for, store_report
from mirrorflow.replicate.runs import RunRecordNotStored
from mirrorflow.replicate.watch import ProgressLog, ProgressWatcher, RunProgress, log_interval_s
from mirrorflow.spark.executor import log_python
from mirrorflow.spark.outcome import LOST_EXIT, lost_line

CONNECTION_EXTRAS_ENV = "MIRRORFLOW_CONNECTION_EXTRAS"
log = logging.getLogger("mirrorflow.spark.copy")

Work = TypeVar("Work")


def connection_extras_from_env() -> dict[str, dict]:
    raw = os.environ.pop(CONNECTION_EXTRAS_ENV, "")
    return json.loads(raw) if raw else {}


def parse_args(
    argv: list[str] | None,
    prog: str = "mirrorflow_copy.py",
    description: str = "Copy the ranges of one plan.",
) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("--config", required=True, help="the mirrorflow / MM2 properties file")
    parser.add_argument("--flow", required=True, help="SOURCE->TARGET")
    parser.add_argument(
        "--plan-offset", required=True, type=int, help="offset of the plan in the run-records topic"
    )
    return parser.parse_args(argv)


def flow_and_clients(args: argparse.Namespace) -> tuple[FlowConfig, FlowClients]:
    """The flow named by --flow in --config, its clients built with the credentials the operator
    put in the environment (taken out of it at once, so no child process inherits them)."""
    source, _, target = args.flow.partition("->")
    extras = connection_extras_from_env()
    flow = load_config(args.config).flow(source, target)
    clients = FlowClients.resolve(
        flow, connection_extra=(lambda conn_id: extras[conn_id]) if extras else None
    )
    return flow, clients


def read_plan(flow: FlowConfig, clients: FlowClients, plan_offset: int) -> Plan:
    """The plan the plan task stored at `plan_offset` (an error naming what is there instead)."""
    flow_name, _, kind, body = read_run_record(clients.target_consumer, plan_offset)
    if (flow_name, kind) != (flow.name, "plan"):
        raise SystemExit(f"offset {plan_offset} holds the {kind} of {flow_name}, not a plan of {flow.name}")
    return Plan.from_json(body)


def run_slices(
    app_name: str, slices: list[list[Work]], work: Callable[[list[Work]], Iterable[Any]]
) -> list[Any]:
    """Each slice in a Spark task of its own, the results collected on the driver; no Spark
    session at all when there is nothing to do."""
    if not slices:
        return []
    context = spark_context(app_name)
    try:

        def run_slice(dealt: Iterator[list[Work]]) -> Iterator[Any]:
            log_python()  # on the executor, once per task: its Python and its mirrorflow
            for one in dealt:
                yield from work(one)

        return context.parallelize(slices, len(slices)).mapPartitions(run_slice).collect()
    finally:
        context.stop()


def spark_context(app_name: str | None = None) -> Any:
    """The application's SparkContext (made once). mirrorflow's jobs use only Spark's core API
    (parallelize, mapPartitions, collect), so no SparkSession: its SQL state cost each
    application about a quarter more CPU at its start (benchmarks/spark_start.py: a small job in
    local[2], 13.1 s and 18.3 CPU-s with a SparkContext, 16.4 s and 24.7 CPU-s with a
    SparkSession), on the cores the window before it copies on at a handover."""
    from pyspark import SparkConf, SparkContext

    conf = SparkConf()
    if app_name:
        conf.setAppName(app_name)
    return SparkContext.getOrCreate(conf)


def configure_logging() -> None:
    """The driver's own lines at INFO, py4j's (a line per gateway connection closed) at WARN:
    spark-submit's output is the Airflow task's log."""
    logging.basicConfig(level=logging.INFO, format=LOG_FORMAT)
    logging.getLogger("py4j").setLevel(logging.WARNING)


@contextmanager
def progress_logged(flow: FlowConfig, clients: FlowClients, plan: Plan, interval_s: float) -> Iterator[None]:
    """Log the run's progress per topic every `interval_s` while the block runs, when it moved (watch.ProgressLog:
    at most watch.LOG_TOPICS topics, the most behind first, and a total), as read from the
    flow's progress topic on the target: the executors report nothing before their share is
    done, and the copy writes that topic with every committed chunk anyway."""
    if interval_s <= 0 or not plan.units():
        yield
        return
    progress = RunProgress(plan)
    told = ProgressLog(flow.name, progress)

    def observed(stored: dict[tuple[str, int], int]) -> None:
        progress.observed(stored)
        for line in told.lines():
            log.info("%s", line)

    watcher = ProgressWatcher(
        clients.target_consumer,
        flow.offset_storage_topic,
        flow.source,
        progress.keys,
        observed,
        interval_s=interval_s,
    )
    watcher.start()
    try:
        yield
    finally:
        watcher.stop()


def summary_line(report: RunReport) -> str:
    """The copy's outcome in one line, the figures first and the long run id last: a log viewer
    that does not wrap (Airflow's, by default) cuts the end of a long line, not its start."""
    totals = report.totals()
    return (
        f"copied {report.flow}: {totals['records']:,} records, {totals['bytes']:,} bytes, "
        f"{totals['transactions']:,} transactions, {totals['partitions']:,} partitions, "
        f"{totals['failed_partitions']:,} failed, {totals['lost_to_retention']:,} lost to retention; "
        f"{(report.finished_ms - report.started_ms) / 1000:.1f}s (run {report.run_id})"
    )


def lost(flow: FlowConfig, clients: FlowClients, seen: str) -> int:
    """Say that a cluster was lost, in the plan's sentence, as the line the task reads
    (spark/outcome.py); the job's exit code."""
    log.error("%s", lost_line(lost_cluster(flow, clients, seen)))
    return LOST_EXIT


def read_plan_or_lost(flow: FlowConfig, clients: FlowClients, plan_offset: int) -> Plan | int:
    """The plan, or LOST_EXIT (said) when the target does not answer: reading it failed with
    "stopped before offset None" where the target was gone."""
    try:
        return read_plan(flow, clients, plan_offset)
    except (KafkaCallError, KafkaException, ClusterUnreachable) as exc:
        now = unreachable_now(flow, clients)
        if now is None:
            raise
        log.error("%s", lost_line(f"{now} (the plan could not be read: {exc})"))
        return LOST_EXIT


def main(argv: list[str] | None = None) -> int:
    configure_logging()
    args = parse_args(argv)
    interval_s = log_interval_s()
    flow, clients = flow_and_clients(args)
    plan = read_plan_or_lost(flow, clients, args.plan_offset)
    if isinstance(plan, int):
        return plan
    run_id = plan.run_id
    job = copy_job_for(flow, clients, plan)
    started_ms = int(time.time() * 1000)
    slices = plan.slices()
    log.info("run %s of %s: %d partitions over %d tasks", run_id, flow.name, len(plan.units()), len(slices))
    with progress_logged(flow, clients, plan, interval_s):
        results = run_slices(f"mirrorflow {flow.name} {run_id}", slices, partial(copy_slice, job))
    gone = next((r for r in results if r.unreachable), None)
    try:
        report = store_report(clients, plan, results, started_ms)
    except (RunRecordNotStored, KafkaCallError, KafkaException, ClusterUnreachable) as exc:
        if gone is None:
            raise
        log.warning("the run's report was not stored: %s", exc)
        return lost(flow, clients, gone.error or f"cluster {gone.unreachable} is unreachable")
    log.info("%s", summary_line(report))
    if gone is not None:
        log.error("%s", report.failure_message())
        return lost(flow, clients, gone.error or f"cluster {gone.unreachable} is unreachable")
    if not report.ok:
        log.error("%s", report.failure_message())
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
