"""The OpenLineage a copy reports: source topics in, remote topics out (Kafka naming), records and
bytes as output statistics, the flow as a job facet; a flow of hundreds of topics names at most
DATASETS of them per side, the busiest first, and says how many it left out."""

from __future__ import annotations

import json
from pathlib import Path

from openlineage.client.serde import Serde

from mirrorflow.airflow.lineage import (
    DATASETS,
    FLOW_FACET,
    RUN_FACET,
    STATISTICS_FACET,
    StepRun,
    copied_rows,
    copy_lineage,
    planned_rows,
)
from mirrorflow.config import load_config
from mirrorflow.replicate.copy import UnitResult
from mirrorflow.replicate.plan import PartitionSpan, Plan
from mirrorflow.replicate.report import RunReport

SOURCE_NS, TARGET_NS = "kafka://src-1:9092", "kafka://dr-1:9093"
EVENT_BOUND = 64 * 1024  # bytes of one event's datasets and facets, whatever the topic count


def flow_of(tmp_path: Path):
    path = tmp_path / "mm2.properties"
    path.write_text(
        "clusters = A, B\nA.bootstrap.servers = src-1:9092\nB.bootstrap.servers = dr-1:9093\n"
        "A->B.enabled = true\n"
    )
    return load_config(str(path)).flow("A", "B")


def plan_of(topics: int) -> Plan:
    spans = tuple(PartitionSpan(f"topic-{t:04d}", 0, f"A.topic-{t:04d}", 0, t) for t in range(topics))
    return Plan("manual__1", "A", "B", "replicate", 1, 10_000, 1 << 20, "exactly-once", 2, spans)


def report_of(plan: Plan) -> RunReport:
    results = [
        UnitResult(
            s.topic, 0, s.remote_topic, s.start, s.end, progress=s.end - 1, records=s.end, bytes=3 * s.end
        )
        for s in plan.spans
        if s.end
    ]
    return RunReport.from_results(plan, results, 0, 1)


def as_json(lineage) -> dict:
    """The lineage as the OpenLineage client serializes it into an event."""
    return json.loads(
        json.dumps(
            {
                "inputs": [Serde.to_dict(d) for d in lineage.inputs],
                "outputs": [Serde.to_dict(d) for d in lineage.outputs],
                "job": {k: Serde.to_dict(f) for k, f in lineage.job_facets.items()},
                "run": {k: Serde.to_dict(f) for k, f in lineage.run_facets.items()},
            }
        )
    )


def test_a_small_run_names_every_topic_with_what_was_written_into_it(tmp_path: Path) -> None:
    plan = plan_of(3)  # topic-0000 had nothing pending, and got nothing

    event = as_json(
        copy_lineage(
            flow_of(tmp_path),
            SOURCE_NS,
            TARGET_NS,
            copied_rows(plan, report_of(plan)),
            run_id="r",
            mode="replicate",
        )
    )

    assert [(d["namespace"], d["name"]) for d in event["inputs"]] == [
        (SOURCE_NS, f"topic-{t:04d}") for t in range(3)
    ]
    outputs = {d["name"]: d for d in event["outputs"]}
    assert list(outputs) == [f"A.topic-{t:04d}" for t in range(3)]
    assert {d["namespace"] for d in event["outputs"]} == {TARGET_NS}
    statistics = {name: d["outputFacets"][STATISTICS_FACET] for name, d in outputs.items()}
    assert [(s["rowCount"], s["size"]) for s in statistics.values()] == [(0, 0), (1, 3), (2, 6)]
    flow = event["job"][FLOW_FACET]
    assert (flow["flow"], flow["sourceNamespace"], flow["targetNamespace"]) == ("A->B", SOURCE_NS, TARGET_NS)
    assert flow["replicationPolicy"].endswith("DefaultReplicationPolicy")
    run = event["run"][RUN_FACET]
    assert (run["topics"], run["topicsInEvent"], run["topicsLeftOut"], run["records"]) == (3, 3, 0, 3)


def test_hundreds_of_topics_make_a_bounded_event_naming_the_busiest(tmp_path: Path) -> None:
    plan = plan_of(700)
    flow = flow_of(tmp_path)

    done = copy_lineage(
        flow, SOURCE_NS, TARGET_NS, copied_rows(plan, report_of(plan)), run_id="r", mode="replicate"
    )
    started = copy_lineage(
        flow, SOURCE_NS, TARGET_NS, planned_rows(plan).values(), run_id="r", mode="replicate"
    )

    for lineage in (done, started):
        event = as_json(lineage)
        assert len(json.dumps(event)) < EVENT_BOUND
        assert len(event["inputs"]) == len(event["outputs"]) == DATASETS
        # The busiest topics: at the end the most records copied, at the start the most pending.
        assert {d["name"] for d in event["inputs"]} == {f"topic-{t:04d}" for t in range(600, 700)}
        run = event["run"][RUN_FACET]
        assert (run["topics"], run["topicsInEvent"], run["topicsLeftOut"]) == (700, DATASETS, 600)
    run = as_json(done)["run"][RUN_FACET]
    assert run["records"] == sum(range(700)) and run["recordsLeftOut"] == sum(range(600))
    # Nothing is written yet at the start: no statistics to give.
    assert not any(STATISTICS_FACET in d.get("outputFacets", {}) for d in as_json(started)["outputs"])


def test_topics_a_window_took_up_after_its_plan_are_named_too(tmp_path: Path) -> None:
    plan = plan_of(2)
    report = report_of(plan)
    report.units.append(
        {"topic": "joined", "partition": 0, "remote_topic": "A.joined", "records": 5, "bytes": 50}
    )

    rows = {row.topic: row for row in copied_rows(plan, report)}

    assert rows["joined"].remote_topic == "A.joined" and rows["joined"].records == 5
    assert rows["topic-0000"].records == 0


def test_the_step_reads_its_run_from_its_rendered_arguments() -> None:
    run = StepRun.from_args(["--config", "/c.properties", "--flow", "primary->backup", "--plan-offset", "42"])
    assert run == StepRun("/c.properties", "primary", "backup", 42)
