"""Prometheus series of mirrorflow's DAG runs, from Airflow's metadata DB (status_links.AirflowFacts).

A run that fails before it writes anything to Kafka (the plan of a run whose target is down)
leaves the Kafka-side series (mirrorflow.metrics) as they were: the last summary's figures stay
good. These series say what Airflow saw: per DAG the state of its newest run, when its newest
run and its newest successful run ended, and a counter of its failed runs, so an alert fires on
`increase(mirrorflow_dag_runs_failed_total[15m]) > 0` or `mirrorflow_flow_last_run_failed == 1`.
The counter is the count of failed runs in the metadata DB: `airflow db clean` lowers it, which
Prometheus's increase() and rate() read as a counter reset.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from mirrorflow.airflow.status_links import AirflowFacts, replicate_dag_id, verify_dag_id
from mirrorflow.control.mirror_status import MirrorStatus

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
