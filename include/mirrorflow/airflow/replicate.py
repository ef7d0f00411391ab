"""The data-plane DAGs: one `mirrorflow__<A>__<B>__replicate` per enabled flow (plan -> copy ->
report, on the flow's schedule); the manual migration DAG is in mirrorflow.airflow.migrate.

A failed plan is the run's one red task: a cluster that does not answer fails it within
mirrorflow.cluster.unreachable.timeout.ms without Airflow retries, and report, which has no plan
to report on then, ends upstream_failed instead of failing on the missing plan.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Any

from airflow.sdk import DAG, get_current_context, task

from mirrorflow.airflow.assets import copies_alias
from mirrorflow.airflow.operators import MirrorflowCopyOperator, MirrorflowWindowOperator
from mirrorflow.airflow.tags import dag_tags
from mirrorflow.airflow.task_errors import failing_at_once
from mirrorflow.config import FlowConfig, MirrorConfig
from mirrorflow.config.replicate_mode import MICRO_BATCH

log = logging.getLogger(__name__)

START = datetime(2024, 1, 1)
# report runs after a failed copy too (it says which partitions failed), but only on a plan that
# succeeded: with both plan and copy upstream, "all done, at least one success" means exactly that.
REPORT_TRIGGER_RULE = "all_done_min_one_success"


def replicate_dag_id(source: str, target: str) -> str:
    return f"mirrorflow__{source}__{target}__replicate"


def _schedule(flow: FlowConfig) -> str | timedelta:
    """A batch flow runs on mirrorflow.replicate.schedule; a micro-batch flow once per window."""
    if flow.replicate_mode == MICRO_BATCH:
        return timedelta(seconds=flow.microbatch_window_seconds)
    return flow.replicate_schedule


def _run_id() -> str:
    return get_current_context()["run_id"]


def plan_and_log(config_path: str, source: str, target: str, **options: Any) -> dict[str, Any]:
    """plan_run for a plan task, failing at once where retrying cannot help (failing_at_once),
    saying first what it asks and then the plan as a table (tables.plan_lines): the task's log
    tells within seconds what it is doing, and a plan in rows, not as one long dict."""
    from mirrorflow.replicate.service import plan_run
    from mirrorflow.replicate.tables import plan_lines

    log.info(
        "planning %s -> %s: reading topics and offsets of %s, progress on %s%s",
        source,
        target,
        source,
        target,
        f" (topics {options['topics']})" if options.get("topics") else "",
    )
    with failing_at_once():
        overview = plan_run(config_path, source, target, run_id=_run_id(), **options)
    for line in plan_lines(overview):
        log.info("%s", line)
    return overview


def report_and_log(path: str, flow: FlowConfig, planned: dict[str, Any], *, run_id: str) -> dict[str, Any]:
    """report_run, then the run's per-topic table in the task's log (also when the run failed,
    from the summary it stored) and an Asset event per remote topic that received records
    (assets.announce_copies; the task declares the flow's copies alias); XCom gets the compact
    report.xcom_summary."""
    from mirrorflow.airflow.assets import announce_copies
    from mirrorflow.replicate.report import xcom_summary
    from mirrorflow.replicate.runs import RunRecordMissing
    from mirrorflow.replicate.service import RunFailed, reported_run

    try:
        reported = reported_run(
            path,
            flow.source,
            flow.target,
            run_id=run_id,
            plan_offset=planned["plan_offset"],
            topic_errors=planned["topic_errors"],
            topic_errors_count=planned.get("topic_errors_count"),
        )
    except RunFailed as exc:
        if not isinstance(exc.__cause__, RunRecordMissing):  # no report, so no summary either
            log_run_table(flow, planned["plan_offset"], None)
        raise
    log_run_table(flow, planned["plan_offset"], reported.summary)
    announce_copies(flow, reported)
    return xcom_summary(reported.summary)


def log_run_table(flow: FlowConfig, plan_offset: int, summary: dict[str, Any] | None) -> None:
    """The per-topic table of the run whose plan is at `plan_offset` (tables.run_table_lines:
    the worst topics first, at most TABLE_ROWS, and a totals line); `summary` None reads the one
    the report stored. A table that cannot be read is said in one line: the report's own
    outcome stands."""
    from mirrorflow.clients import FlowClients
    from mirrorflow.replicate import run_reading
    from mirrorflow.replicate.plan import Plan
    from mirrorflow.replicate.tables import run_table_lines

    try:
        clients = FlowClients.resolve(flow)
        plan = Plan.from_json(run_reading.read_run_record(clients.target_consumer, plan_offset)[3])
        if summary is None:
            summary = run_reading.wait_for_run_records(
                clients.target_consumer, plan.flow, plan.run_id, "summary", start=plan_offset, timeout_s=10
            )[-1]
        lines = run_table_lines(plan, summary)
    except Exception as exc:  # noqa: BLE001 - the table is a courtesy; the run's outcome is the report's
        log.warning("the run's per-topic table could not be shown: %s", exc)
        return
    for line in lines:
        log.info("%s", line)


BATCH_DOC = (
    "* **plan**: creates/grows remote topics, fixes each partition's end offset, stores the plan.\n"
    "* **copy**: a Spark job copies every partition's ranges (exactly-once by default).\n"
    "* **report**: stores and returns the run's figures; fails if any partition failed."
)
WINDOW_DOC = (
    "Micro-batch mode: each run is one window of {seconds} s.\n\n"
    "* **plan**: creates/grows remote topics, stores the plan the window starts from.\n"
    "* **copy**: one Spark application copies a batch every {interval} ms through the window, picks up "
    "new topics and partitions, and runs on until the next window has taken over (so two runs overlap "
    "for a moment); its log has a line every few seconds with the records copied and the lag while "
    "records move, and one a minute while none do.\n"
    "* **report**: stores and returns the window's figures; fails if any partition failed."
)


def replicate_dag(path: str, flow: FlowConfig) -> DAG:
    source, target = flow.source, flow.target
    windows = flow.replicate_mode == MICRO_BATCH
    steps = (
        WINDOW_DOC.format(seconds=flow.microbatch_window_seconds, interval=flow.microbatch_interval_ms)
        if windows
        else BATCH_DOC
    )
    with DAG(
        dag_id=replicate_dag_id(source, target),
        description=f"Copy {source} to {target} ({flow.delivery}{', micro-batch' if windows else ''}), MM2 semantics",
        schedule=_schedule(flow),
        start_date=START,
        catchup=False,
        # A window runs on past its end until the next one has taken over its slots.
        max_active_runs=2 if windows else 1,
        tags=dag_tags("replicate", flow.name),
        default_args={"retries": 2, "retry_delay": timedelta(seconds=30)},
        doc_md=(
            f"Replicates **{source} → {target}** with MirrorMaker 2's topic names, progress and offset-syncs.\n\n"
            + steps
        ),
    ) as dag:

        @task(task_id="plan", show_return_value_in_logs=False)
        def plan() -> dict[str, Any]:
            return plan_and_log(path, source, target)

        operator = MirrorflowWindowOperator if windows else MirrorflowCopyOperator
        copy = operator(
            task_id="copy",
            config_path=path,
            source=source,
            target=target,
            plan_offset="{{ ti.xcom_pull(task_ids='plan')['plan_offset'] }}",
        )

        @task(
            task_id="report",
            trigger_rule=REPORT_TRIGGER_RULE,
            retries=0,
            show_return_value_in_logs=False,
            outlets=[copies_alias(source, target)],
        )
        def report(planned: dict[str, Any]) -> dict[str, Any]:
            with failing_at_once():
                return report_and_log(path, flow, planned, run_id=_run_id())

        planned = plan()
        planned >> copy >> report(planned)
    return dag


def build(path: str, config: MirrorConfig, wanted: str | None) -> dict[str, DAG]:
    dags: dict[str, DAG] = {}
    for flow in config.replication_flows:
        dag_id = replicate_dag_id(flow.source, flow.target)
        if wanted in (None, dag_id):
            dags[dag_id] = replicate_dag(path, flow)
    return dags
