"""The replicate and migrate steps as plain functions: Airflow tasks, the CLI and tests call these.

plan_run fixes and stores a plan and returns what the UI shows; report_run reads the copy's
report back, measures the lag left, stores the run summary and raises if anything failed.

What they return goes to XCom and the Airflow UI, so it is bounded whatever the flow's size:
per-topic rows, the worst first, and counts; the plan and the report themselves, with every
partition, are in the run-records topic (in chunks, see runs).
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import KafkaException

from mirrorflow.clients import FlowClients, check_reachable, unreachable_now
from mirrorflow.config import FlowConfig, MirrorConfig, load_config
from mirrorflow.config.airflow_connections import ConnectionExtra
from mirrorflow.kafka import KafkaCallError
from mirrorflow.ops.acl_check import require_job_acls
from mirrorflow.replicate import run_reading, runs
from mirrorflow.replicate.plan import Plan
from mirrorflow.replicate.planner import PlanOutcome, make_plan, with_topics
from mirrorflow.replicate.progress import ProgressReadError
from mirrorflow.replicate.progress_records import ProgressSnapshot
from mirrorflow.replicate.report import TOPIC_ROWS, RunReport, worst_rows
from mirrorflow.replicate.run_history import newest_run_records
from mirrorflow.replicate.runner import lag_left
from mirrorflow.replicate.until import parse_until

log = logging.getLogger(__name__)

PLAN_DETAIL_LIMIT = 500  # spans listed in full in XCom; bigger plans show per-topic totals only
NAMES_LIMIT = 100  # created / grown topics named in XCom; the plan record has them all
TOPIC_ERRORS_LIMIT = 50  # topic errors carried in XCom and the summary; with their count
LAST_COPY_TIMEOUT_S = 15.0
PREVIOUS_PLAN_TIMEOUT_S = 15.0


class RunFailed(RuntimeError):
    """The run did not copy everything it planned; the message lists what and why."""


def flow_for(config: MirrorConfig | str, source: str, target: str, topics: str | None) -> FlowConfig:
    loaded = load_config(config) if isinstance(config, str) else config
    flow = loaded.flow(source, target)
    return with_topics(flow, topics) if topics else flow


def plan_run(
    config: MirrorConfig | str,
    source: str,
    target: str,
    *,
    run_id: str,
    mode: str = "replicate",
    until: str | int | None = None,
    topics: str | None = None,
    delivery: str | None = None,
    connection_extra: ConnectionExtra | None = None,
    connect_timeout_s: float | None = None,
) -> dict[str, Any]:
    """Fix and store the plan. A source or target that does not answer within `connect_timeout_s`
    (default: mirrorflow.cluster.unreachable.timeout.ms) raises ClusterUnreachable first."""
    flow = flow_for(config, source, target, topics)
    clients = FlowClients.resolve(flow, connection_extra)
    check_reachable(flow, clients, connect_timeout_s)
    require_job_acls(flow, mode, clients)
    outcome = make_plan(
        flow,
        clients,
        run_id=run_id,
        mode=mode,
        until_ms=parse_until(until),
        delivery=delivery,
        progress_from=previous_progress_read(flow, clients),
    )
    offset = runs.write_run_record(
        clients.target_producer, flow.name, run_id, "plan", outcome.plan.json_pieces()
    )
    # XCom carries the first TOPIC_ERRORS_LIMIT of them; the task's log has every one.
    for topic, why in outcome.topics.errors.items():
        log.warning("%s: %s is not copied: %s", flow.name, topic, why)
    return plan_overview(outcome, offset, until_ms=parse_until(until))


def previous_progress_read(flow: FlowConfig, clients: FlowClients) -> ProgressSnapshot | None:
    """The settled read of progress the flow's newest plan was made from, for this plan to read
    on from instead of reading the progress topic from its start (whose history grows through
    the day until a segment rolls and is compacted). The reader takes it only from the topic it
    was read from (same name and id); without one, or when the runs topic cannot be read, the
    plan reads progress from the start, as before: the answer is the same, only slower."""
    try:
        found = newest_run_records(
            clients.target_consumer, flow.name, {"plan": 1}, timeout_s=PREVIOUS_PLAN_TIMEOUT_S
        )
    except (KafkaCallError, KafkaException) as exc:
        log.warning(
            "%s: the previous plan could not be read (%s); progress is read from its start", flow.name, exc
        )
        return None
    if not found:
        return None
    previous, _ = found["plan"][0]
    data = previous.get("progress_read")
    if data is None:
        return None
    try:
        read = ProgressSnapshot.from_json_data(data)
    except (KeyError, TypeError, ValueError) as exc:
        log.warning(
            "%s: the progress read of plan %s is not readable (%r); progress is read from its start",
            flow.name,
            previous.get("run_id"),
            exc,
        )
        return None
    log.info(
        "%s: progress read on from plan %s: %d source partition(s) found in the first %d offset(s) of %s",
        flow.name,
        previous.get("run_id"),
        len(read.entries),
        sum(read.positions),
        read.topic,
    )
    return read


def _first(mapping: dict[str, Any], limit: int) -> dict[str, Any]:
    return dict(list(mapping.items())[:limit])


def plan_overview(outcome: PlanOutcome, plan_offset: int, *, until_ms: int | None = None) -> dict[str, Any]:
    """What plan_run hands on through XCom: the plan's offset (the copy reads the plan itself),
    the TOPIC_ROWS topics with the most offsets lost and then pending (`topics_count` says how
    many there are), spans in full only for small plans, and bounded lists of what the plan
    changed or could not do, each with its count."""
    plan = outcome.plan
    units = plan.units()
    per_topic = plan.summary()
    topic_errors = outcome.topics.errors
    return {
        "plan_offset": plan_offset,
        "run_id": plan.run_id,
        "flow": plan.flow,
        "mode": plan.mode,
        "delivery": plan.delivery,
        "until_ms": until_ms,
        "created_ms": plan.created_ms,
        "topics": worst_rows(per_topic, ("lost", "pending"), TOPIC_ROWS),
        "topics_count": len(per_topic),
        "partitions": len(plan.spans),
        "pending": sum(s.pending for s in plan.spans),
        "units": len(units),
        "ranges": sum(len(s.ranges(plan.max_records)) for s in plan.spans),
        "spans": [
            {
                "topic": s.topic,
                "partition": s.partition,
                "remote_topic": s.remote_topic,
                "start": s.start,
                "end": s.end,
            }
            for s in units
        ]
        if len(units) <= PLAN_DETAIL_LIMIT
        else f"{len(units)} partitions (see topics)",
        "created_topics": list(outcome.topics.created[:NAMES_LIMIT]),
        "created_topics_count": len(outcome.topics.created),
        "grown_topics": {k: list(v) for k, v in _first(outcome.topics.grown, NAMES_LIMIT).items()},
        "grown_topics_count": len(outcome.topics.grown),
        "internal_topics_created": list(outcome.internal_topics_created),
        "topic_errors": _first(topic_errors, TOPIC_ERRORS_LIMIT),
        "topic_errors_count": len(topic_errors),
        "restarted_partitions": _first(plan.restarted(), PLAN_DETAIL_LIMIT),
        "restarted_count": len(plan.restarted()),
    }


def last_copy(clients: FlowClients, flow: str, summary: dict[str, Any]) -> dict[str, Any] | None:
    """The last run of the flow that copied any record: this one if it did, else what the
    flow's previous summary says (an idle run, and a scheduled flow has many, would otherwise
    hide when records last moved). None before the first copy."""
    totals = summary["totals"]
    if totals["records"]:
        return {
            "run_id": summary["run_id"],
            "mode": summary["mode"],
            "at_ms": int(time.time() * 1000),
            "records": totals["records"],
            "bytes": totals["bytes"],
        }
    try:
        found = newest_run_records(
            clients.target_consumer, flow, {"summary": 1}, timeout_s=LAST_COPY_TIMEOUT_S
        )
    except (KafkaCallError, KafkaException) as exc:  # the figures of this run stand without it
        log.warning("%s: the last run that copied records could not be read: %s", flow, exc)
        return None
    if not found:
        return None
    previous, at_ms = found["summary"][0]
    if previous.get("totals", {}).get("records"):
        return {
            "run_id": previous["run_id"],
            "mode": previous.get("mode"),
            "at_ms": at_ms,
            "records": previous["totals"]["records"],
            "bytes": previous["totals"].get("bytes", 0),
        }
    return previous.get("last_copy")


def _raise_if_lost(flow: FlowConfig, clients: FlowClients, cause: BaseException) -> None:
    """Raise ClusterUnreachable with the plan's sentence when a cluster of the flow does not
    answer now (a short probe: the copy waited out the limit already)."""
    now = unreachable_now(flow, clients)
    if now is not None:
        raise now from cause


@dataclass(frozen=True)
class ReportedRun:
    """What reported_run found: the stored summary, the whole report (every partition) and the
    clients it read them with."""

    summary: dict[str, Any]
    report: RunReport
    clients: FlowClients = field(repr=False)


def report_run(config: MirrorConfig | str, source: str, target: str, **options: Any) -> dict[str, Any]:
    """reported_run's summary: what the CLI and XCom show."""
    return reported_run(config, source, target, **options).summary


def reported_run(
    config: MirrorConfig | str,
    source: str,
    target: str,
    *,
    run_id: str,
    plan_offset: int,
    topic_errors: dict[str, str] | None = None,
    topic_errors_count: int | None = None,
    connection_extra: ConnectionExtra | None = None,
    wait_s: float = 30.0,
) -> ReportedRun:
    """Read the copy's report(s) back, measure the lag left, store the bounded summary and
    return it with the report; RunFailed if a partition failed or a topic could not be replicated.
    `topic_errors` is what the plan handed on (at most TOPIC_ERRORS_LIMIT of them) and
    `topic_errors_count` how many there were in all."""
    flow = flow_for(config, source, target, None)
    clients = FlowClients.resolve(flow, connection_extra)
    # As a plan does: a target that is gone (a copy lost it) is said in one sentence within the
    # flow's limit, not after the run-record reader's own wait. A lost source is the report's to
    # show (the failed partitions, the lag left unknown), not a reason to fail it.
    check_reachable(flow, clients, sides=("target",))
    try:
        _, _, _, plan_body = run_reading.read_run_record(clients.target_consumer, plan_offset)
        plan = Plan.from_json(plan_body)
        bodies = run_reading.wait_for_run_records(
            clients.target_consumer, flow.name, run_id, "report", start=plan_offset, timeout_s=wait_s
        )
    except runs.RunRecordMissing as exc:
        _raise_if_lost(flow, clients, exc)
        raise RunFailed(f"{exc}: the copy job did not finish; see the copy task's log") from exc
    except (KafkaCallError, KafkaException) as exc:
        # A target that went away during the copy: "stopped before offset None" says nothing.
        _raise_if_lost(flow, clients, exc)
        raise
    report = RunReport.merge([RunReport.from_json(b) for b in bodies])
    lag_problem = None
    if any(unit.get("unreachable") == flow.source for unit in report.units):
        # The copy already waited out the limit on it: asking again would only make the run that
        # lost its source end that much later (issue 21, defect 11).
        lag_problem = f"the lag left was not measured: cluster {flow.source} was unreachable during the copy"
    else:
        try:
            # Bounded like the copy: a cluster that stopped answering leaves the lag unknown, not the report.
            report.lag_left = lag_left(
                flow, clients, plan, timeout_s=flow.cluster_unreachable_timeout_ms / 1000
            )
        except (KafkaCallError, KafkaException, ProgressReadError) as exc:
            lag_problem = f"the lag left could not be measured: {exc}"
    summary = report.summary()
    if lag_problem:
        summary["lag_unknown"] = lag_problem
    summary["last_copy"] = last_copy(clients, flow.name, summary)
    shown_errors = _first(dict(topic_errors or {}), TOPIC_ERRORS_LIMIT)
    errors_count = max(len(topic_errors or {}), topic_errors_count or 0)
    summary["topic_errors"] = shown_errors
    summary["topic_errors_count"] = errors_count
    runs.write_run_record(clients.target_producer, flow.name, run_id, "summary", json.dumps(summary))
    problems = []
    if not report.ok:
        problems.append(report.failure_message())
    if errors_count:
        more = errors_count - len(shown_errors)
        problems.append(
            "topics that could not be replicated:\n"
            + "\n".join(f"  {t}: {e}" for t, e in shown_errors.items())
            + (f"\n  ... and {more} more (the plan task's log names them)" if more else "")
        )
    if problems:
        raise RunFailed("\n".join(problems))
    return ReportedRun(summary, report, clients)
