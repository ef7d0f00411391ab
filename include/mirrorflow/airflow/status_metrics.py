"""Prometheus series of mirrorflow's DAG runs, from Airflow's metadata DB (status_links.AirflowFacts),
and of the status page's badges (HealthCollector), judged as the page judges them.

A run that fails before it writes anything to Kafka (the plan of a run whose target is down)
leaves the Kafka-side series (mirrorflow.metrics) as they were: the last summary's figures stay
good. These series say what Airflow saw: per DAG the state of its newest run, when its newest
run and its newest successful run ended, and a counter of its failed runs, so an alert fires on
`increase(mirrorflow_dag_runs_failed_total[15m]) > 0` or `mirrorflow_flow_last_run_failed == 1`.
The counter is the count of failed runs in the metadata DB: `airflow db clean` lowers it, which
Prometheus's increase() and rate() read as a counter reset.

HealthCollector gives each flow's copy state (the page's Copy badge, from the same function) with
the age it judged and the interval it expected, and the interval each heartbeat is expected at,
so an alert can use the page's own rule (`age > 10 * expected`) instead of a fixed number.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from mirrorflow.airflow.status_flows import PageView, flow_health
from mirrorflow.airflow.status_heartbeats import heartbeat_jobs
from mirrorflow.airflow.status_links import AirflowFacts, replicate_dag_id, verify_dag_id
from mirrorflow.airflow.status_tables import upstream_health
from mirrorflow.control.mirror_status import MirrorStatus
from mirrorflow.control.status_copy import COPY_STATES

STATES = ("success", "failed", "running", "queued")


def dag_flows(status: MirrorStatus, dag_ids: frozenset[str]) -> dict[str, str]:
    """dag_id -> the flow it belongs to ("" for the DAGs of no one flow: migrate, heartbeats)."""
    out = dict.fromkeys(dag_ids, "")
    for flow in status.flows:
        for dag in (
            replicate_dag_id(str(flow.source), str(flow.target)),
            verify_dag_id(str(flow.source), str(flow.target)),
        ):
            if dag in out:
                out[dag] = flow.flow
    return out


class AirflowRunsCollector(Collector):
    def __init__(self, status: MirrorStatus | None, facts: AirflowFacts) -> None:
        self.status = status
        self.facts = facts

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        facts = self.facts
        if self.status is None or facts.dags is None:
            return
        flows = dag_flows(self.status, facts.dags)
        labels = ["dag_id", "flow"]
        state = GaugeMetricFamily(
            "mirrorflow_dag_last_run_state",
            "1 for the state of the DAG's newest run in Airflow, 0 for the others",
            labels=[*labels, "state"],
        )
        failed = CounterMetricFamily(
            "mirrorflow_dag_runs_failed",
            "Runs of the DAG that failed, as Airflow's metadata DB counts them",
            labels=labels,
        )
        last = GaugeMetricFamily(
            "mirrorflow_dag_last_run_timestamp_seconds",
            "When the DAG's newest run ended (or started, while it runs)",
            labels=labels,
        )
        success = GaugeMetricFamily(
            "mirrorflow_dag_last_success_timestamp_seconds",
            "When the DAG's newest successful run ended",
            labels=labels,
        )
        flow_failed = GaugeMetricFamily(
            "mirrorflow_flow_last_run_failed",
            "1 if the newest finished run of the flow's replication DAG failed, else 0",
            labels=["flow"],
        )
        for dag, flow in sorted(flows.items()):
            failed.add_metric([dag, flow], float(facts.failed_runs.get(dag, 0)))
            run = facts.last_run.get(dag)
            if run is not None:
                for name in STATES:
                    state.add_metric([dag, flow, name], 1.0 if run.state == name else 0.0)
                if run.at_ms:
                    last.add_metric([dag, flow], run.at_ms / 1000)
            good = facts.last_success.get(dag)
            if good is not None and good.at_ms:
                success.add_metric([dag, flow], good.at_ms / 1000)
        for flow_status in self.status.flows:
            dag = replicate_dag_id(str(flow_status.source), str(flow_status.target))
            finished = facts.last_finished.get(dag)
            if finished is not None:
                flow_failed.add_metric([flow_status.flow], 1.0 if finished.state == "failed" else 0.0)
        yield from (state, failed, last, success, flow_failed)


class HealthCollector(Collector):
    """The page's badges as series: per flow its copy state, the age judged and the interval
    expected; per heartbeat the interval it is expected at (and a heartbeat job's age)."""

    def __init__(self, view: PageView) -> None:
        self.view = view

    def collect(self) -> Iterator[GaugeMetricFamily]:
        view, status = self.view, self.view.status
        if status is None:
            return
        state = GaugeMetricFamily(
            "mirrorflow_flow_copy_state",
            "1 for the flow's copy state on the status page (copying, late, failed, unreadable, "
            "no run yet, no schedule, stale), 0 for the others",
            labels=["flow", "state"],
        )
        level = GaugeMetricFamily(
            "mirrorflow_flow_copy_level",
            "The copy badge's colour: 0 green, 1 amber, 2 red, -1 grey",
            labels=["flow"],
        )
        age = GaugeMetricFamily(
            "mirrorflow_flow_copy_age_seconds",
            "Age of the flow's newest sign of copying the page judged (a batch flow's last run, a "
            "micro-batch flow's window status or last window's summary)",
            labels=["flow"],
        )
        expected = GaugeMetricFamily(
            "mirrorflow_flow_copy_expected_seconds",
            "How often that sign is expected: the schedule's period, the window's status interval, "
            "or the window's length",
            labels=["flow"],
        )
        for flow in status.flows:
            health = flow_health(view, flow)
            for name in COPY_STATES:
                state.add_metric([flow.flow, name], 1.0 if health.label == name else 0.0)
            level.add_metric([flow.flow], LEVELS[health.level])
            if health.age_s is not None:
                age.add_metric([flow.flow], round(health.age_s, 3))
            if health.expected_s is not None:
                expected.add_metric([flow.flow], health.expected_s)
        yield from (state, level, age, expected)
        yield from heartbeat_series(view, status)


LEVELS = {"ok": 0.0, "warn": 1.0, "bad": 2.0, "unknown": -1.0}


def heartbeat_series(view: PageView, status: MirrorStatus) -> Iterator[GaugeMetricFamily]:
    upstream_expected = GaugeMetricFamily(
        "mirrorflow_heartbeat_expected_seconds",
        "How often a heartbeat from the upstream cluster is expected to reach the cluster: its emit "
        "interval plus each replication hop's schedule or micro-batch interval",
        labels=["cluster", "upstream"],
    )
    job_age = GaugeMetricFamily(
        "mirrorflow_heartbeat_job_age_seconds",
        "Age of the newest heartbeat the job source->cluster wrote into the cluster's heartbeats topic",
        labels=["cluster", "source"],
    )
    job_expected = GaugeMetricFamily(
        "mirrorflow_heartbeat_job_expected_seconds",
        "The job's emit.heartbeats.interval.seconds",
        labels=["cluster", "source"],
    )
    for cluster in status.clusters:
        for upstream in cluster.upstreams:
            judged = upstream_health(view, cluster, upstream.via, upstream.age_s)
            if judged.expected_s is not None:
                upstream_expected.add_metric([cluster.alias, upstream.alias], judged.expected_s)
    for job in heartbeat_jobs(view, status):
        if job.health.age_s is not None:
            job_age.add_metric([job.target, job.source], round(job.health.age_s, 3))
        if job.health.expected_s is not None:
            job_expected.add_metric([job.target, job.source], job.health.expected_s)
    yield from (upstream_expected, job_age, job_expected)
