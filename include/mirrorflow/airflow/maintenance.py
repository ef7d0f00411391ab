"""MM2's periodic jobs beside the copy, one DAG per flow and job, each on its MM2 interval.

* `mirrorflow__<A>__<B>__heartbeats` for every pair MM2 gives a heartbeat herder
  (`MirrorConfig.heartbeat_flows`: with only A->B enabled, B->A too, which is what puts
  `A.heartbeats` on B). Scheduled every `heartbeat_period(interval)` (a minute for MM2's 1 s
  default); each run emits every interval until one interval before the next run is due.
* `..__refresh_topics`, `..__sync_topic_configs`, `..__sync_topic_acls` for every replication
  flow whose `refresh.topics.*`, `sync.topic.configs.*`, `sync.topic.acls.*` settings leave the
  job on, every `*.interval.seconds` (at least a minute: Airflow schedules no faster usefully).

A job MM2's settings disable gets no DAG. Runs never overlap (max_active_runs=1), never catch
up and are not retried: like MM2's scheduler, the next run on the interval is the retry, and a
failed run shows in the UI with every topic or ACL it could not sync.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from airflow.sdk import DAG, get_current_context, task

from mirrorflow.airflow.replicate import START, TAGS
from mirrorflow.config import FlowConfig, MirrorConfig
from mirrorflow.control.heartbeats import FLUSH_TIMEOUT_S, MIN_PERIOD, heartbeat_period
from mirrorflow.control.topic_sync import TOPIC_JOBS, TopicJob

HEARTBEATS = "heartbeats"


def dag_id(source: str, target: str, job: str) -> str:
    return f"mirrorflow__{source}__{target}__{job}"


def job_schedule(interval: timedelta) -> timedelta:
    """MM2's interval, but at least a minute apart."""
    return max(interval, MIN_PERIOD)


def heartbeats_dag(path: str, flow: FlowConfig) -> DAG:
    source, target = flow.source, flow.target
    interval = flow.emit_heartbeats_interval
    if interval is None:
        raise ValueError(f"heartbeats are disabled for {flow.name}")
    period = heartbeat_period(interval)
    with DAG(
        dag_id=dag_id(source, target, HEARTBEATS),
        description=f"Heartbeat({source}, {target}) into {flow.heartbeats_topic} on {target} every {interval.total_seconds():g} s",
        schedule=period,
        start_date=START,
        catchup=False,
        max_active_runs=1,
        tags=[*TAGS, HEARTBEATS, f"{source}->{target}"],
        default_args={"retries": 0},
        doc_md=(
            f"Writes MM2 heartbeats **({source}, {target}, now)** into `{flow.heartbeats_topic}` on **{target}** "
            f"every {interval.total_seconds():g} s (`emit.heartbeats.interval.seconds`).\n\n"
            f"The DAG runs every {period.total_seconds():g} s; each run emits one heartbeat at once, then one per "
            "interval until one interval before the next run is due, then exits, so runs never overlap."
        ),
    ) as dag:

        @task(task_id="emit", execution_timeout=period + timedelta(seconds=2 * FLUSH_TIMEOUT_S))
        def emit() -> list[dict[str, Any]]:
            from mirrorflow.config import load_config
            from mirrorflow.control.heartbeats import emit_heartbeats, heartbeat_window

            scheduled = get_current_context()["dag_run"].run_after
            window = heartbeat_window(interval, scheduled, datetime.now(UTC))
            runs = emit_heartbeats([load_config(path).flow(source, target)], duration_s=window)
            return [run.to_dict() for run in runs]

        emit()
    return dag


def topic_job_dag(path: str, flow: FlowConfig, job: TopicJob) -> DAG:
    source, target = flow.source, flow.target
    interval = job.interval(flow)
    if interval is None:
        raise ValueError(f"{job.name} is disabled for {flow.name}")
    with DAG(
        dag_id=dag_id(source, target, job.name),
        description=f"{flow.name}: {job.description}",
        schedule=job_schedule(interval),
        start_date=START,
        catchup=False,
        max_active_runs=1,
        tags=[*TAGS, job.name, f"{source}->{target}"],
        default_args={"retries": 0},
        doc_md=(
            f"**{source} → {target}**: {job.description}.\n\n"
            f"Runs every {job_schedule(interval).total_seconds():g} s ({job.keys}). "
            "Fails, listing every topic or ACL it could not sync, when anything went wrong."
        ),
    ) as dag:

        @task(task_id="sync")
        def sync() -> dict[str, Any]:
            from mirrorflow.config import load_config

            return job.run(load_config(path).flow(source, target))

        sync()
    return dag


def build(path: str, config: MirrorConfig, wanted: str | None) -> dict[str, DAG]:
    dags: dict[str, DAG] = {}
    for flow in config.heartbeat_flows:
        name = dag_id(flow.source, flow.target, HEARTBEATS)
        if wanted in (None, name):
            dags[name] = heartbeats_dag(path, flow)
    for flow in config.replication_flows:
        for job in TOPIC_JOBS.values():
            name = dag_id(flow.source, flow.target, job.name)
            if job.interval(flow) is not None and wanted in (None, name):
                dags[name] = topic_job_dag(path, flow, job)
    return dags
