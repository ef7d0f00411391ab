"""MM2's periodic jobs beside the copy, each on its MM2 interval.

* `mirrorflow_heartbeats`: one DAG for every pair MM2 gives a heartbeat herder
  (`MirrorConfig.heartbeat_flows`: with only A->B enabled, B->A too, which is what puts
  `A.heartbeats` on B). Each run emits for every pair at its own interval for
  `mirrorflow.heartbeats.run.seconds` (an hour), so the metadata database gets 24 runs a day
  for all pairs instead of a run a minute per pair.
* `mirrorflow__<A>__<B>__refresh_topics`, `..__sync_topic_configs`, `..__sync_topic_acls` for
  every replication flow whose `refresh.topics.*`, `sync.topic.configs.*`, `sync.topic.acls.*`
  settings leave the job on, every `*.interval.seconds` (at least a minute: Airflow schedules no
  faster usefully).

A job MM2's settings disable gets no DAG. Runs never overlap (max_active_runs=1) and never
catch up. The topic jobs are not retried: like MM2's scheduler, the next run on the interval is
the retry, and a failed run shows in the UI with every topic or ACL it could not sync. The
heartbeat run, an hour long, is retried when it was stopped early or could not start (see
EmitHeartbeatsOperator), so that a stop of Airflow leaves no hour without heartbeats.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from typing import Any

from airflow.sdk import DAG, BaseOperator, task
from airflow.sdk.exceptions import AirflowException, AirflowFailException

from mirrorflow.airflow.replicate import START
from mirrorflow.airflow.tags import dag_tags
from mirrorflow.airflow.task_stop import StopRequest
from mirrorflow.config import FlowConfig, MirrorConfig
from mirrorflow.control.heartbeats import FLUSH_TIMEOUT_S, MIN_PERIOD, HeartbeatError, heartbeat_period
from mirrorflow.control.topic_sync import TOPIC_JOBS, TopicJob

log = logging.getLogger(__name__)

HEARTBEATS = "heartbeats"
HEARTBEATS_DAG_ID = "mirrorflow_heartbeats"


def dag_id(source: str, target: str, job: str) -> str:
    return f"mirrorflow__{source}__{target}__{job}"


def job_schedule(interval: timedelta) -> timedelta:
    """MM2's interval, but at least a minute apart."""
    return max(interval, MIN_PERIOD)


def _heartbeat_pair_line(config: MirrorConfig, flow: FlowConfig) -> str:
    interval = flow.emit_heartbeats_interval
    assert interval is not None
    if config.replication_enabled(flow.source, flow.target):
        why = "replicates"
    else:
        onward = [f.target for f in config.replication_flows if f.source == flow.target]
        reach = (
            "its heartbeats show up as " + ", ".join(f"`{flow.target}.heartbeats` on {c}" for c in onward)
            if onward
            else "no enabled flow carries its heartbeats on"
        )
        why = (
            f"heartbeats only, as in MM2: {reach}; `{flow.name}.emit.heartbeats.enabled = false` turns it off"
        )
    return (
        f"| {flow.source} → {flow.target} | `{flow.heartbeats_topic}` on {flow.target} | "
        f"{interval.total_seconds():g} s | {why} |"
    )


HEARTBEAT_RETRIES = 10
HEARTBEAT_RETRY_DELAY = timedelta(seconds=30)
"""A heartbeat run stopped early (Airflow stopping), or whose task died or could not start, is
retried this many times this far apart, each retry emitting for what is left of the run's window:
a stop or a restart of Airflow must not leave the clusters without heartbeats until the next
hourly run."""


class HeartbeatsStopped(AirflowException):
    """The window ended early because Airflow asked the task to stop: up for retry, not failed."""


class EmitHeartbeatsOperator(BaseOperator):
    """Emits every pair's heartbeats for the run's window (control.heartbeats.emit_heartbeats).
    An operator rather than a @task for on_kill: Airflow 3 asks a task to stop (SIGTERM, at
    shutdown or when the run is marked) only by calling on_kill, which here ends the window at
    once, so stopping Airflow does not wait for a worker that emits for an hour. A request that
    comes before the window started is kept: the run then emits nothing (task_stop).

    How a run ends: the whole window emitted, success; stopped early, HeartbeatsStopped, so the
    task is up for retry and the retry (when Airflow runs again) emits the rest of the window;
    heartbeats that failed during a window that ran, failed without a retry (the window is spent:
    a retry would emit one heartbeat and turn the run green); anything before a window started
    (a target down at the start), retried."""

    def __init__(
        self,
        *,
        config_path: str,
        pairs: list[tuple[str, str]],
        intervals: list[timedelta],
        run: timedelta,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.config_path = config_path
        self.pairs = pairs
        self.intervals = intervals
        self.run = run
        self._stop = StopRequest()  # set by on_kill, before execute or during it

    def execute(self, context: Any) -> dict[str, Any]:
        from mirrorflow.config import load_config
        from mirrorflow.control.heartbeats import emit_heartbeats, heartbeat_window

        if self._stop.is_set():  # on_kill came before there was a window to end
            log.info("heartbeats: the task was asked to stop before its window started; none emitted")
            return {"window_s": 0.0, "pairs": {}}
        run_after = context["dag_run"].run_after
        window = heartbeat_window(self.intervals, run_after, datetime.now(UTC), self.run)
        current = load_config(self.config_path)
        try:
            runs = emit_heartbeats(
                [current.flow(s, t) for s, t in self.pairs], duration_s=window, stop=self._stop
            )
        except HeartbeatError as err:
            if err.after_window and not self._stop.is_set():
                raise AirflowFailException(str(err)) from err
            raise
        left = heartbeat_window(self.intervals, run_after, datetime.now(UTC), self.run)
        if self._stop.is_set() and left > 0:
            raise HeartbeatsStopped(
                f"heartbeats stopped early, {left:.0f} s before the end of this run's window, because "
                "Airflow asked the task to stop; the task is up for retry and its retry emits the rest "
                "of the window when Airflow runs again"
            )
        # One compact XCom: counts per pair, not each heartbeat.
        return {
            "window_s": window,
            "pairs": {r.flow: {"emitted": r.emitted, "last_ms": r.last_ms} for r in runs},
        }

    def on_kill(self) -> None:
        # Runs in the task's SIGTERM handler: a lock-free flag, seen by an execute yet to start
        # and by a window under way.
        self._stop.set()


def heartbeats_dag(path: str, config: MirrorConfig) -> DAG:
    flows = config.heartbeat_flows
    if not flows:
        raise ValueError(
            "no pair emits heartbeats (emit.heartbeats.enabled is false or intervals are negative)"
        )
    intervals = [flow.emit_heartbeats_interval for flow in flows if flow.emit_heartbeats_interval is not None]
    run = timedelta(seconds=min(flow.heartbeats_run_seconds for flow in flows))
    period = heartbeat_period(intervals, run)
    pairs = [(flow.source, flow.target) for flow in flows]
    with DAG(
        dag_id=HEARTBEATS_DAG_ID,
        description=f"MM2 heartbeats of {len(flows)} cluster pair(s), each run emitting for {period.total_seconds():g} s",
        schedule=period,
        start_date=START,
        catchup=False,
        max_active_runs=1,
        tags=dag_tags(HEARTBEATS),
        default_args={"retries": 0},
        doc_md=(
            "Writes MM2 heartbeats **(source, target, now)** into each pair's `heartbeats` topic on its "
            "target, every `emit.heartbeats.interval.seconds`:\n\n"
            "| pair | into | every | why |\n|---|---|---|---|\n"
            + "\n".join(_heartbeat_pair_line(config, flow) for flow in flows)
            + f"\n\nEach run emits for {period.total_seconds():g} s (`mirrorflow.heartbeats.run.seconds`), "
            "then exits one interval before the next run is due, so runs never overlap and Airflow's "
            "database gets one run per period for all pairs. A pair whose target fails does not stop the "
            "others; the run fails at its end, naming it. A run stopped early (Airflow stopping) is up "
            f"for retry, not failed: its retry emits the rest of the window when Airflow runs again "
            f"({HEARTBEAT_RETRIES} retries, {HEARTBEAT_RETRY_DELAY.total_seconds():g} s apart)."
        ),
    ) as dag:
        EmitHeartbeatsOperator(
            task_id="emit",
            config_path=path,
            pairs=pairs,
            intervals=intervals,
            run=run,
            execution_timeout=period + timedelta(seconds=2 * FLUSH_TIMEOUT_S),
            retries=HEARTBEAT_RETRIES,
            retry_delay=HEARTBEAT_RETRY_DELAY,
        )
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
        tags=dag_tags(job.name, flow.name),
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
    if config.heartbeat_flows and wanted in (None, HEARTBEATS_DAG_ID):
        dags[HEARTBEATS_DAG_ID] = heartbeats_dag(path, config)
    for flow in config.replication_flows:
        for job in TOPIC_JOBS.values():
            name = dag_id(flow.source, flow.target, job.name)
            if job.interval(flow) is not None and wanted in (None, name):
                dags[name] = topic_job_dag(path, flow, job)
    return dags
