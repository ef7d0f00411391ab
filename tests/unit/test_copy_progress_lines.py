"""Issue 10, defect 7: what the copy and report tasks write to their logs stays readable and
bounded at 20,000 partitions: progress lines per topic while the copy runs, the report's
per-topic table unwrapped however long a name, Spark's driver at WARN, one compact XCom value."""

from __future__ import annotations

import json
import re

import pytest

from mirrorflow.airflow.operators import DRIVER_JAVA_OPTIONS, DRIVER_LOG4J2, driver_logging_conf
from mirrorflow.replicate.copy import UnitResult
from mirrorflow.replicate.plan import PartitionSpan, Plan
from mirrorflow.replicate.report import RunReport, xcom_summary
from mirrorflow.replicate.tables import TABLE_ROWS, plan_lines, run_table_lines
from mirrorflow.replicate.watch import (
    INTERVAL_ENV,
    LOG_TOPICS,
    RunProgress,
    log_interval_s,
    progress_lines,
)
from mirrorflow.spark.copy_job import summary_line

TOPICS, PARTITIONS = 2_000, 10


def _plan(*spans: PartitionSpan) -> Plan:
    return Plan("r1", "A", "B", "replicate", 0, 100, 1 << 20, "exactly-once", 4, spans)


def big_plan() -> Plan:
    """20,000 partitions of 1,000 offsets each; topic t's partitions start at offset 0."""
    return _plan(
        *(
            PartitionSpan(f"topic-{t:04d}", p, f"A.topic-{t:04d}", 0, 1_000)
            for t in range(TOPICS)
            for p in range(PARTITIONS)
        )
    )


def test_progress_lines_at_20000_partitions_name_the_most_behind_topics_and_a_total() -> None:
    plan = big_plan()
    progress = RunProgress(plan)
    # Topic t has copied t/2 offsets of each partition; topics from 1,990 on are complete, and
    # topics 0 and 1 tie on offsets left (0 and 1 offset(s) copied: 1 differs), so by name.
    stored = {}
    for t in range(TOPICS):
        for p in range(PARTITIONS):
            stored[(f"topic-{t:04d}", p)] = 999 if t >= 1_990 else t // 2 - 1
    progress.observed(stored)

    lines = progress_lines("A->B", progress)

    assert len(lines) == LOG_TOPICS + 1
    assert all(len(line) < 200 for line in lines), max(lines, key=len)
    assert lines[0] == "progress A->B: topic-0000 0/10,000 offsets (0.0%), 0/10 partitions done"
    assert lines[1] == "progress A->B: topic-0001 0/10,000 offsets (0.0%), 0/10 partitions done"
    assert lines[2] == "progress A->B: topic-0002 10/10,000 offsets (0.1%), 0/10 partitions done"
    assert [line.split()[2] for line in lines[:LOG_TOPICS]] == [f"topic-{t:04d}" for t in range(LOG_TOPICS)]
    done = sum(10 * ((t // 2) if t < 1_990 else 1_000) for t in range(TOPICS))
    assert lines[-1] == (
        f"progress A->B: total {done:,}/20,000,000 offsets ({100 * done / 20_000_000:.1f}%), "
        f"100/20000 partitions done, 10/2000 topics done, {1_990 - LOG_TOPICS:,} more unfinished topics not listed"
    )


def test_progress_only_moves_forward_and_counts_failed_partitions() -> None:
    plan = _plan(
        PartitionSpan("orders", 0, "A.orders", 10, 20, progress=9),
        PartitionSpan("orders", 1, "A.orders", 0, 30),
        PartitionSpan("users", 0, "A.users", 0, 8),
    )
    progress = RunProgress(plan)
    progress.observed({("orders", 0): 14, ("orders", 1): 29, ("other", 0): 5})
    assert progress_lines("A->B", progress) == [
        "progress A->B: users 0/8 offsets (0.0%), 0/1 partitions done",  # 8 left, orders 5
        "progress A->B: orders 35/40 offsets (87.5%), 1/2 partitions done",
        "progress A->B: total 35/48 offsets (72.9%), 1/3 partitions done, 0/2 topics done",
    ]
    progress.observed({("orders", 0): 11})  # an older read never takes progress back
    progress.finished(UnitResult("users", 0, "A.users", 0, 8, progress=1, error="fenced"))
    assert (
        progress_lines("A->B", progress)[0]
        == "progress A->B: users 2/8 offsets (25.0%), 0/1 partitions done, 1 failed"
    )
    progress.observed({("orders", 0): 19})
    progress.finished(UnitResult("users", 0, "A.users", 0, 8, progress=7))
    assert progress_lines("A->B", progress) == [
        "progress A->B: total 48/48 offsets (100.0%), 3/3 partitions done, 2/2 topics done"
    ]


@pytest.mark.parametrize(("raw", "expected"), [(None, 5.0), ("", 5.0), ("1", 1.0), ("0.5", 0.5), ("0", 0.0)])
def test_the_progress_interval_comes_from_the_environment(raw, expected) -> None:
    assert log_interval_s({} if raw is None else {INTERVAL_ENV: raw}) == expected


@pytest.mark.parametrize("raw", ["5s", "-1"])
def test_a_wrong_progress_interval_is_refused_naming_the_variable(raw) -> None:
    with pytest.raises(ValueError, match=INTERVAL_ENV):
        log_interval_s({INTERVAL_ENV: raw})


def test_the_driver_logs_at_warn_through_our_log4j2_file_unless_the_conf_names_its_own() -> None:
    ours = f"-Dlog4j2.configurationFile={DRIVER_LOG4J2.as_uri()}"
    assert DRIVER_LOG4J2.is_file()
    assert "rootLogger.level = warn" in DRIVER_LOG4J2.read_text()
    assert driver_logging_conf({"spark.speculation": "false"}, {}) == {
        "spark.speculation": "false",
        DRIVER_JAVA_OPTIONS: ours,
    }
    assert driver_logging_conf({DRIVER_JAVA_OPTIONS: "-Xss4m"}, {})[DRIVER_JAVA_OPTIONS] == f"-Xss4m {ours}"
    own = {DRIVER_JAVA_OPTIONS: "-Dlog4j2.configurationFile=/etc/spark/log4j2.properties"}
    assert driver_logging_conf(own, {}) == own


def test_the_driver_keeps_the_java_options_of_spark_defaults(tmp_path) -> None:
    """A --conf of spark.driver.extraJavaOptions replaces spark-defaults.conf's: they are carried over."""
    ours = f"-Dlog4j2.configurationFile={DRIVER_LOG4J2.as_uri()}"
    defaults = tmp_path / "spark-defaults.conf"
    defaults.write_text("spark.master  local[2]\nspark.driver.extraJavaOptions  -Dcorp.proxy=on -Xss4m\n")
    environ = {"SPARK_CONF_DIR": str(tmp_path)}
    assert driver_logging_conf({}, environ) == {DRIVER_JAVA_OPTIONS: f"-Dcorp.proxy=on -Xss4m {ours}"}
    # The operator's conf wins over the defaults, as in spark-submit.
    assert (
        driver_logging_conf({DRIVER_JAVA_OPTIONS: "-Xss8m"}, environ)[DRIVER_JAVA_OPTIONS] == f"-Xss8m {ours}"
    )
    defaults.write_text(
        "spark.driver.extraJavaOptions=-Dlog4j2.configurationFile=/etc/spark/log4j2.properties\n"
    )
    assert driver_logging_conf({}, environ) == {}
    assert driver_logging_conf({}, {"SPARK_HOME": str(tmp_path / "nowhere")}) == {DRIVER_JAVA_OPTIONS: ours}


def _report(plan: Plan, failed: set[str] = frozenset()) -> RunReport:
    results = [
        UnitResult(
            s.topic,
            s.partition,
            s.remote_topic,
            s.start,
            s.end,
            progress=s.start if s.topic in failed else s.end - 1,
            records=0 if s.topic in failed else s.pending,
            bytes=0 if s.topic in failed else 10 * s.pending,
            error="broker down" if s.topic in failed else None,
        )
        for s in plan.units()
    ]
    report = RunReport.from_results(plan, results, 1_000, 61_000)
    report.lag_left = {s.topic: 0 for s in plan.spans}
    return report


def test_the_run_table_at_20000_partitions_shows_the_worst_50_topics_and_totals() -> None:
    plan = big_plan()
    worst = {"topic-1500", "topic-0007"}
    summary = _report(plan, failed=worst).summary()

    lines = run_table_lines(plan, summary)

    rows = [line for line in lines if re.search(r"\btopic-\d{4}\b.*A\.topic-\d{4}", line)]
    assert len(rows) == TABLE_ROWS
    assert {rows[0].split()[1], rows[1].split()[1]} == worst, rows[:2]
    assert (
        f"the {TABLE_ROWS} worst topics; {TOPICS - TABLE_ROWS:,} more not shown, the totals count them"
        in "\n".join(lines)
    )
    assert lines[-1] == (
        "total: 2,000 topic(s), 20,000 partition(s) copied, 20,000,000 offset(s) planned, 19,980,000 record(s), "
        "199,800,000 bytes, 0 transaction(s), 0 offset-sync(s), lag left 0, 0 lost to retention, "
        "20 failed partition(s); 60.0s"
    )
    assert len(lines) < TABLE_ROWS + 12


def test_a_lag_that_could_not_be_measured_reads_unknown_in_every_row_not_zero() -> None:
    """A run that lost its source showed "lag left 0" for a topic with most of its offsets not
    copied: the lag was not measured, and 0 read as caught up."""
    plan = _plan(PartitionSpan("orders", 0, "A.orders", 0, 240_000))
    summary = _report(plan, failed={"orders"}).summary()
    summary["lag_unknown"] = "the lag left was not measured: cluster A was unreachable during the copy"

    lines = run_table_lines(plan, summary)

    row = next(line for line in lines if "A.orders" in line)
    assert "unknown" in row.split("│")[7], row
    assert "lag left unknown" in lines[-1]


def test_the_run_table_never_wraps_or_cuts_a_long_name() -> None:
    long = "orders." + "eu-west-1.payments-and-refunds." * 7 + "v2"
    plan = _plan(PartitionSpan(long, 0, f"A.{long}", 0, 5), PartitionSpan("short", 0, "A.short", 0, 3))

    lines = run_table_lines(plan, _report(plan).summary())

    row = next(line for line in lines if f"A.{long}" in line)
    assert row.split()[1] == long and len(row) > 2 * len(long)
    assert "│" in row and not any(line.endswith("…") for line in lines)
    assert lines[-1].startswith("total: 2 topic(s), 2 partition(s) copied, 8 offset(s) planned, 8 record(s)")


def test_the_xcom_value_holds_each_count_once_and_stays_small() -> None:
    plan = big_plan()
    summary = _report(plan, failed={"topic-0001"}).summary()

    value = xcom_summary(summary)

    assert value["totals"] == summary["totals"] and value["topics_count"] == TOPICS
    assert value["run_id"] == "r1" and value["planned_offsets"] == 20_000_000
    assert not {"topics", "lag_left", "lost_to_retention", "failed", "lost", "retimed"} & set(value)
    assert len(json.dumps(value)) < 1_000


def test_the_copy_summary_line_puts_the_figures_before_the_run_id() -> None:
    """A log viewer that does not wrap cuts a long line's end: the run id goes there, not the counts."""
    plan = _plan(
        PartitionSpan("orders", 0, "A.orders", 0, 1_500),
        PartitionSpan("users", 0, "A.users", 0, 3),
    )
    report = _report(plan, failed={"users"})

    line = summary_line(report)

    assert line == (
        "copied A->B: 1,500 records, 15,000 bytes, 0 transactions, 2 partitions, 1 failed, "
        "0 lost to retention; 60.0s (run r1)"
    )


def test_progress_is_logged_only_when_the_copy_moved() -> None:
    from mirrorflow.replicate.watch import ProgressLog

    progress = RunProgress(_plan(PartitionSpan("orders", 0, "A.orders", 0, 1_000)))
    told = ProgressLog("A->B", progress)
    first = told.lines()
    assert first[-1] == "progress A->B: total 0/1,000 offsets (0.0%), 0/1 partitions done, 0/1 topics done"
    assert told.lines() == [] and told.lines() == []  # a copy waiting on a slow start says nothing
    progress.observed({("orders", 0): 499})
    assert told.lines()[-1].startswith("progress A->B: total 500/1,000 offsets (50.0%)")
    assert told.lines() == []


@pytest.mark.parametrize(
    ("line", "level"),
    [
        ("26/11/26 10:07:33 WARN Utils: Your hostname, vm, resolves to a loopback address", "WARNING"),
        ("WARNING: Using incubator modules: jdk.incubator.vector", "WARNING"),
        (
            "/x/pyspark/testing/utils.py:127: FutureWarning: PySpark does not yet fully support pandas",
            "WARNING",
        ),
        (
            "2026-11-26 10:07:37,004 INFO mirrorflow.spark.copy: run r of A->B: 1 partitions over 1 tasks",
            "INFO",
        ),
        ("2026-11-26 10:07:37,004 ERROR mirrorflow.spark.copy: 1 of 2 partitions failed:", "ERROR"),
        ("26/11/26 10:07:40 ERROR Executor: Exception in task 0.0", "ERROR"),
        ("progress A->B: total 0/130 offsets (0.0%)", "INFO"),
    ],
)
def test_spark_output_keeps_the_level_each_line_was_written_at(line: str, level: str) -> None:
    import logging

    from mirrorflow.airflow.spark_output import line_level

    assert logging.getLevelName(line_level(line)) == level


def test_a_stack_trace_keeps_the_level_of_the_line_it_follows() -> None:
    import logging

    from mirrorflow.airflow.spark_output import SparkOutputLog

    said: list[tuple[str, str]] = []

    class Logger:
        def __getattr__(self, name: str):
            return lambda message, *args: said.append((name, message % args if args else message))

    log = SparkOutputLog(Logger())
    for line in (
        "26/11/26 10:07:40 ERROR Executor: Exception in task 0.0",
        "java.lang.IllegalStateException: boom",
        "\tat org.apache.spark.Foo.bar(Foo.scala:1)",
        "2026-11-26 10:07:41,000 INFO mirrorflow.spark.copy: copied A->B: 0 records",
    ):
        log.info(line)
    log.info("Spark-Submit cmd: %s", "spark-submit ...")  # the hook's own message, with arguments
    assert [level for level, _ in said] == ["error", "error", "error", "info", "info"]
    assert list(log.errors)[0].endswith("Exception in task 0.0") and len(log.errors) == 3
    assert logging.ERROR > logging.INFO


def test_the_plan_task_logs_a_table_and_its_totals_and_a_topic_name_is_text() -> None:
    overview = {
        "flow": "A->B",
        "mode": "migrate",
        "run_id": "r1",
        "topics": {"[bold]orders": {"partitions": 2, "pending": 12_000, "ranges": 3, "lost": 0}},
        "topics_count": 1,
        "partitions": 2,
        "pending": 12_000,
        "ranges": 3,
        "units": 2,
    }
    lines = plan_lines(overview)
    (row,) = [line for line in lines if line.startswith("│ [bold]orders")]
    assert re.findall(r"[\d,]+", row) == ["2", "12,000", "3", "0"], row
    assert (
        lines[-1]
        == "plan: 1 topic(s), 2 partition(s), 12,000 offset(s) pending in 3 range(s) over 2 partition(s) to copy"
    )
