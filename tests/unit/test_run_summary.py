"""What goes to XCom, the UI and the status page stays small at 20,000 partitions (issue 12):
per-topic rows, the worst first, bounded lists with their counts, totals over everything."""

from __future__ import annotations

import json

from mirrorflow.replicate.copy import UnitResult
from mirrorflow.replicate.plan import PartitionSpan, Plan
from mirrorflow.replicate.planner import PlanOutcome
from mirrorflow.replicate.report import ERROR_CHARS, PARTITION_ROWS, TOPIC_ROWS, RunReport
from mirrorflow.replicate.service import NAMES_LIMIT, TOPIC_ERRORS_LIMIT, plan_overview
from mirrorflow.replicate.topics import RemoteTopics

# The stated bounds: a summary (XCom of the report task, the status page's last run) and the plan
# task's XCom, whatever the partition count. Topic names here are 40 characters, errors longer
# than ERROR_CHARS; longer names grow the bound by at most (TOPIC_ROWS + 3 * PARTITION_ROWS)
# times the extra length.
SUMMARY_BOUND = 64 * 1024
PLAN_XCOM_BOUND = 64 * 1024
TOPICS, PARTITIONS = 2_000, 10


def topic_name(t: int) -> str:
    return f"orders.eu-west-1.payments.{t:05d}.v2-events"[:40]


def plan_of(topics: int, partitions: int, **span: object) -> Plan:
    spans = tuple(
        PartitionSpan(
            topic_name(t),
            p,
            f"A.{topic_name(t)}",
            1_000,
            1_100,
            progress=999,
            incarnation="AAAAAAAAAAAAAAAAAAAAAA,BBBBBBBBBBBBBBBBBBBBBB",
            progress_incarnation="AAAAAAAAAAAAAAAAAAAAAA,BBBBBBBBBBBBBBBBBBBBBB",
            **span,  # type: ignore[arg-type]
        )
        for t in range(topics)
        for p in range(partitions)
    )
    return Plan(
        "scheduled__2026-01-01T00:00:00+00:00",
        "A",
        "B",
        "replicate",
        1,
        10_000,
        1 << 20,
        "exactly-once",
        8,
        spans,
    )


def worst_case_report() -> RunReport:
    """20,000 partitions that all went wrong in every way a summary lists: failed with a long
    error, offsets lost, records retimed, copied again from the start, lag left on every topic."""
    plan = plan_of(
        TOPICS, PARTITIONS, restarted="the source topic was deleted and created again (new topic ID)"
    )
    results = []
    for i, span in enumerate(plan.spans):
        unit = UnitResult(
            span.topic,
            span.partition,
            span.remote_topic,
            span.start,
            span.end,
            progress=span.start + i % 50,
            records=i % 50,
            bytes=100 * (i % 50),
            retimed=1 + i % 7,
            error=f"{span.topic}-{span.partition} offset {span.start}: "
            + "the target refuses the record " * 40,
        )
        unit.count_lost(span.start - 20 - span.partition, span.start)
        results.append(unit)
    report = RunReport.from_results(plan, results, 0, 60_000)
    report.lag_left = {topic_name(t): 100 * PARTITIONS + t for t in range(TOPICS)}
    return report


def test_the_summary_of_20000_failed_partitions_is_bounded_and_worst_first() -> None:
    report = worst_case_report()

    summary = report.summary()
    size = len(json.dumps(summary))

    assert size < SUMMARY_BOUND, f"{size} bytes"
    totals = summary["totals"]
    assert totals["partitions"] == totals["failed_partitions"] == TOPICS * PARTITIONS
    assert totals["lag_left"] == sum(report.lag_left.values())
    assert summary["topics_count"] == TOPICS and len(summary["topics"]) == TOPIC_ROWS
    assert len(summary["failed"]) == len(summary["lost"]) == len(summary["retimed"]) == PARTITION_ROWS
    assert summary["lost_partitions"] == summary["retimed_partitions"] == TOPICS * PARTITIONS
    assert all(len(f["error"]) <= ERROR_CHARS for f in summary["failed"])
    # Every topic failed all its partitions and lost as much: the most lag decides, and the
    # shown topics' lag is there beside them.
    expected = [topic_name(t) for t in range(TOPICS - 1, TOPICS - 1 - TOPIC_ROWS, -1)]
    assert list(summary["topics"]) == expected
    assert summary["lag_left"] == {t: report.lag_left[t] for t in expected}
    # Failed partitions: those that copied least of their plan first; lossy: most offsets lost.
    lefts = [report_left(report, f["topic"], f["partition"]) for f in summary["failed"]]
    assert lefts == sorted(lefts, reverse=True) and lefts[0] == 100 - 1
    lost = [sum(e - s for s, e in row["offsets"]) for row in summary["lost"]]
    assert lost == sorted(lost, reverse=True) and lost[0] == 20 + PARTITIONS - 1
    assert summary["restarted_count"] == TOPICS * PARTITIONS and len(summary["restarted"]) <= 100


def report_left(report: RunReport, topic: str, partition: int) -> int:
    unit = next(u for u in report.units if (u["topic"], u["partition"]) == (topic, partition))
    return unit["planned_end"] - 1 - unit["progress"]


def test_summary_rows_put_failed_before_lost_before_lag() -> None:
    plan = plan_of(4, 1)
    names = [topic_name(t) for t in range(4)]
    results = [
        UnitResult(span.topic, 0, span.remote_topic, span.start, span.end, progress=span.end - 1)
        for span in plan.spans
    ]
    results[1].error = "fenced"
    results[2].count_lost(10, 20)
    report = RunReport.from_results(plan, results, 0, 1)
    report.lag_left = {names[0]: 0, names[1]: 0, names[2]: 0, names[3]: 500}

    rows = report.summary()["topics"]

    assert list(rows) == [names[1], names[2], names[3], names[0]]
    assert rows[names[3]]["lag_left"] == 500 and rows[names[1]]["failed"] == 1


def test_a_small_run_still_shows_every_topic_and_its_lag() -> None:
    plan = plan_of(3, 2)
    results = [
        UnitResult(s.topic, s.partition, s.remote_topic, s.start, s.end, progress=s.end - 1)
        for s in plan.spans
    ]
    report = RunReport.from_results(plan, results, 0, 1)
    report.lag_left = {topic_name(t): 0 for t in range(3)}

    summary = report.summary()

    assert set(summary["topics"]) == set(report.lag_left) and summary["topics_count"] == 3
    assert summary["lag_left"] == report.lag_left and summary["failed"] == []


def test_the_failure_message_names_at_most_the_worst_partitions_and_counts_the_rest() -> None:
    message = worst_case_report().failure_message()

    assert message.startswith(f"{TOPICS * PARTITIONS} of {TOPICS * PARTITIONS} partitions of A->B run ")
    assert message.count("\n") == PARTITION_ROWS + 1
    assert f"... and {TOPICS * PARTITIONS - PARTITION_ROWS} more" in message


def test_the_plan_tasks_xcom_for_120000_partitions_is_bounded() -> None:
    plan = plan_of(10_000, 12, lost=5)
    created = [f"A.{topic_name(t)}" for t in range(10_000)]
    topics = RemoteTopics(
        created=created,
        grown={name: (1, 12) for name in created},
        errors={f"x{t}": "cannot create it: " + "no room " * 30 for t in range(10_000)},
    )

    planned = plan_overview(PlanOutcome(plan, topics, ()), 42)
    size = len(json.dumps(planned))

    assert size < PLAN_XCOM_BOUND, f"{size} bytes"
    assert planned["plan_offset"] == 42 and planned["units"] == 120_000 and planned["ranges"] == 120_000
    assert planned["topics_count"] == 10_000 and len(planned["topics"]) == TOPIC_ROWS
    assert planned["spans"] == "120000 partitions (see topics)"
    assert len(planned["created_topics"]) == NAMES_LIMIT and planned["created_topics_count"] == 10_000
    assert len(planned["grown_topics"]) == NAMES_LIMIT and planned["grown_topics_count"] == 10_000
    assert len(planned["topic_errors"]) == TOPIC_ERRORS_LIMIT and planned["topic_errors_count"] == 10_000
    assert len(planned["restarted_partitions"]) == 0
