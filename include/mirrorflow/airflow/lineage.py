"""OpenLineage for mirrorflow's Spark steps: what the copy (batch or micro-batch window) and the
verification read and write, for the apache-airflow-providers-openlineage listener, which calls
the operators' get_openlineage_facets_on_start / _on_complete / _on_failure (operators.py).

A topic is a dataset by OpenLineage's Kafka naming: namespace `kafka://<first bootstrap
host:port>`, name the topic, the same as the topic's Asset (assets.py). A copy's inputs are the
source topics of its plan, its outputs their remote topics; on completion each output carries
the records and bytes the run wrote into it as an `outputStatistics` facet. A verification reads
both sides: both are its inputs. The job gets a `mirrorflow_flow` facet (the flow, its clusters'
namespaces, replication policy and delivery), the run a `mirrorflow_run` facet.

One event names at most DATASETS topics per side, those with the most records copied (on
completion) or pending (at the start) first: a flow of thousands of topics would otherwise send
an event of megabytes each run. `mirrorflow_run` says how many topics the run had, how many the
event names and how many it left out, with their records.

The plan and the report are read from the run-records topic, where the plan and copy steps
stored them; nothing but host:port of a cluster goes into an event.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import attr
from airflow.providers.openlineage.extractors import OperatorLineage
from openlineage.client.generated.base import InputDataset, JobFacet, OutputDataset, RunFacet
from openlineage.client.generated.output_statistics_output_dataset import OutputStatisticsOutputDatasetFacet

from mirrorflow.airflow.assets import cluster_address
from mirrorflow.clients import FlowClients
from mirrorflow.config import FlowConfig, load_config

DATASETS = 100  # topics per side (inputs, outputs) one event names
FLOW_FACET, RUN_FACET = "mirrorflow_flow", "mirrorflow_run"
STATISTICS_FACET = "outputStatistics"


@attr.define
class FlowJobFacet(JobFacet):
    """The mirrorflow flow (MirrorMaker 2's source->target pair) a job belongs to."""

    flow: str
    source: str
    target: str
    sourceNamespace: str  # noqa: N815 - OpenLineage's camelCase
    targetNamespace: str  # noqa: N815
    replicationPolicy: str  # noqa: N815
    delivery: str


@attr.define
class RunTopicsRunFacet(RunFacet):
    """How many topics the run had and how many of them this event names; the records of the
    run in all and of the topics left out (0 at the start, before anything was copied)."""

    runId: str  # noqa: N815 - mirrorflow's run id (the Airflow run id)
    mode: str
    topics: int
    topicsInEvent: int  # noqa: N815
    topicsLeftOut: int  # noqa: N815
    records: int = 0
    bytes: int = 0
    recordsLeftOut: int = 0  # noqa: N815


@dataclass
class TopicRow:
    topic: str
    remote_topic: str
    weight: int = 0  # pending offsets at the start, records copied at the end: the first named
    records: int | None = None  # None: not known yet (the start)
    bytes: int | None = None


@dataclass(frozen=True)
class StepRun:
    """What a Spark step's rendered arguments say about its run."""

    config_path: str
    source: str
    target: str
    plan_offset: int

    @classmethod
    def from_args(cls, args: Iterable[Any]) -> StepRun:
        given = [str(a) for a in args]

        def value(name: str) -> str:
            return given[given.index(name) + 1]

        source, _, target = value("--flow").partition("->")
        return cls(value("--config"), source, target, int(value("--plan-offset")))

    def flow(self) -> FlowConfig:
        return load_config(self.config_path).flow(self.source, self.target)


def namespaces(clients: FlowClients) -> tuple[str, str]:
    return (
        f"kafka://{cluster_address(clients.source_admin.get('bootstrap.servers'))}",
        f"kafka://{cluster_address(clients.target_admin.get('bootstrap.servers'))}",
    )


def flow_facet(flow: FlowConfig, source_ns: str, target_ns: str) -> FlowJobFacet:
    return FlowJobFacet(
        flow=flow.name,
        source=flow.source,
        target=flow.target,
        sourceNamespace=source_ns,
        targetNamespace=target_ns,
        replicationPolicy=flow.replication_policy_class,
        delivery=flow.delivery,
    )


def copy_lineage(
    flow: FlowConfig,
    source_ns: str,
    target_ns: str,
    rows: Iterable[TopicRow],
    *,
    run_id: str,
    mode: str,
    limit: int = DATASETS,
) -> OperatorLineage:
    """Inputs (source topics) and outputs (remote topics) of the `limit` heaviest rows, outputs
    with their statistics once known; the run facet counts what was left out."""
    rows = list(rows)
    named = heapq.nsmallest(limit, rows, key=lambda r: (-r.weight, r.topic))
    kept = {id(r) for r in named}
    left = [r for r in rows if id(r) not in kept]
    named.sort(key=lambda r: r.topic)
    outputs = []
    for row in named:
        facets = {}
        if row.records is not None:
            facets[STATISTICS_FACET] = OutputStatisticsOutputDatasetFacet(
                rowCount=row.records, size=row.bytes
            )
        outputs.append(OutputDataset(namespace=target_ns, name=row.remote_topic, outputFacets=facets))
    return OperatorLineage(
        inputs=[InputDataset(namespace=source_ns, name=row.topic) for row in named],
        outputs=outputs,
        job_facets={FLOW_FACET: flow_facet(flow, source_ns, target_ns)},
        run_facets={
            RUN_FACET: RunTopicsRunFacet(
                runId=run_id,
                mode=mode,
                topics=len(rows),
                topicsInEvent=len(named),
                topicsLeftOut=len(left),
                records=sum(r.records or 0 for r in rows),
                bytes=sum(r.bytes or 0 for r in rows),
                recordsLeftOut=sum(r.records or 0 for r in left),
            )
        },
    )


def planned_rows(plan: Any) -> dict[str, TopicRow]:
    """Per source topic of a copy plan: its remote name and pending offsets."""
    rows: dict[str, TopicRow] = {}
    for span in plan.spans:
        row = rows.setdefault(span.topic, TopicRow(span.topic, span.remote_topic))
        row.weight += span.pending
    return rows


def copied_rows(plan: Any, report: Any) -> list[TopicRow]:
    """The plan's topics and those the run took up since (a window's new topics), each with
    the records and bytes the run copied into its remote topic."""
    rows = planned_rows(plan)
    for row in rows.values():
        row.weight, row.records, row.bytes = 0, 0, 0
    for unit in report.units:
        row = rows.setdefault(unit["topic"], TopicRow(unit["topic"], unit["remote_topic"], 0, 0, 0))
        row.remote_topic = unit["remote_topic"]
        row.records = (row.records or 0) + unit["records"]
        row.bytes = (row.bytes or 0) + unit["bytes"]
        row.weight = row.records
    return list(rows.values())


def _read_plan(run: StepRun) -> tuple[FlowConfig, FlowClients, Any]:
    from mirrorflow.replicate import run_reading
    from mirrorflow.replicate.plan import Plan

    flow = run.flow()
    clients = FlowClients.resolve(flow)
    return (
        flow,
        clients,
        Plan.from_json(run_reading.read_run_record(clients.target_consumer, run.plan_offset)[3]),
    )


def copy_on_start(run: StepRun) -> OperatorLineage:
    """The copy's datasets as its plan has them: what it is about to read and write."""
    flow, clients, plan = _read_plan(run)
    source_ns, target_ns = namespaces(clients)
    return copy_lineage(
        flow, source_ns, target_ns, planned_rows(plan).values(), run_id=plan.run_id, mode=plan.mode
    )


def copy_on_complete(run: StepRun) -> OperatorLineage:
    """The copy's datasets with what the run wrote into each (its report, every attempt's)."""
    from mirrorflow.replicate import run_reading
    from mirrorflow.replicate.report import RunReport

    flow, clients, plan = _read_plan(run)
    bodies = run_reading.wait_for_run_records(
        clients.target_consumer, flow.name, plan.run_id, "report", start=run.plan_offset
    )
    report = RunReport.merge([RunReport.from_json(body) for body in bodies])
    source_ns, target_ns = namespaces(clients)
    return copy_lineage(
        flow, source_ns, target_ns, copied_rows(plan, report), run_id=plan.run_id, mode=plan.mode
    )


def verify_lineage(run: StepRun, *, limit: int = DATASETS) -> OperatorLineage:
    """A verification reads the source topics and their copies: both are inputs, the `limit`
    largest topics (by offsets compared) of each side."""
    from mirrorflow.ops.verification.plan import PLAN_KIND, VerifyPlan
    from mirrorflow.replicate import run_reading

    flow = run.flow()
    clients = FlowClients.resolve(flow)
    record = run_reading.read_run_record_at(clients.target_consumer, run.plan_offset)
    if record.kind != PLAN_KIND:
        raise ValueError(f"offset {run.plan_offset} holds a {record.kind}, not a {PLAN_KIND}")
    plan = VerifyPlan.from_json(record.body)
    rows: dict[str, TopicRow] = {}
    for span in plan.spans:
        row = rows.setdefault(span.topic, TopicRow(span.topic, span.remote_topic))
        row.weight += span.offsets
    source_ns, target_ns = namespaces(clients)
    named = heapq.nsmallest(limit, rows.values(), key=lambda r: (-r.weight, r.topic))
    named.sort(key=lambda r: r.topic)
    return OperatorLineage(
        inputs=[InputDataset(namespace=source_ns, name=r.topic) for r in named]
        + [InputDataset(namespace=target_ns, name=r.remote_topic) for r in named],
        job_facets={FLOW_FACET: flow_facet(flow, source_ns, target_ns)},
        run_facets={
            RUN_FACET: RunTopicsRunFacet(
                runId=plan.run_id,
                mode="verify",
                topics=len(rows),
                topicsInEvent=len(named),
                topicsLeftOut=len(rows) - len(named),
            )
        },
    )
