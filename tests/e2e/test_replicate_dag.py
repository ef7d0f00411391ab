"""The replicate and migrate DAGs under `airflow dags test`, with the real spark-submit."""

from __future__ import annotations

import contextlib
import json
import re
import sqlite3
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import Producer

from mirrorflow.airflow.migrate_steps import STEPS
from mirrorflow.demo import SEED_TOPICS, seed
from mirrorflow.replicate.run_reading import iter_run_records

from ..integration.kafkatools import create_topics, produce, produce_keyed, read_all
from ..integration.mirror_setup import mm2_text

ROOT = Path(__file__).resolve().parents[2]
DEMO_CONFIG = str(ROOT / "include" / "config" / "demo.properties")
# librdkafka's default logger writes `%<syslog level>|<seconds>.<ms>|<facility>|...` to stderr,
# which Airflow's task supervisor logs at ERROR whatever the level.
RAW_LIBRDKAFKA_LINE = re.compile(r"%\d\|\d+\.\d+\|")


def _env(primary, backup) -> dict[str, str]:
    return {
        "MIRRORFLOW_CONFIG": DEMO_CONFIG,
        "MIRRORFLOW_DEMO_PRIMARY": primary.bootstrap,
        "MIRRORFLOW_DEMO_BACKUP": backup.bootstrap,
    }


def librdkafka_errors(log: str) -> list[str]:
    """librdkafka lines a task would show at ERROR: raw ones (Airflow's supervisor logs a task's
    stderr at ERROR) and those logged through Python logging at ERROR."""
    return [
        line
        for line in log.splitlines()
        if RAW_LIBRDKAFKA_LINE.match(line) or ("[error" in line and "mirrorflow.librdkafka" in line)
    ]


def _summaries(backup) -> list[dict]:
    return [
        json.loads(body)
        for _, _, _, kind, body in iter_run_records({"bootstrap.servers": backup.bootstrap})
        if kind == "summary"
    ]


# Two DAG runs through Spark: 100 s on a usual day, over 300 s (the suite's default limit) on a
# machine three times slower (CI, 2026-11-30).
@pytest.mark.timeout(600)
def test_replicate_dag_copies_every_topic_exactly(airflow_home, kafka_clusters) -> None:
    primary, backup = kafka_clusters(2)
    seed(primary.kafka)
    result = airflow_home.dags_test("mirrorflow__primary__backup__replicate", env=_env(primary, backup))
    assert result.succeeded, result.log[-4000:]
    assert not librdkafka_errors(result.log)
    for topic in SEED_TOPICS:
        for partition in range(topic.partitions):
            source = read_all(primary.bootstrap, topic.name, partition)
            target = read_all(backup.bootstrap, f"primary.{topic.name}", partition)
            assert [r.content() for r in target] == [r.content() for r in source], (topic.name, partition)
    (summary,) = _summaries(backup)
    assert summary["totals"]["failed_partitions"] == 0
    assert summary["lag_left"] == {t.name: 0 for t in SEED_TOPICS}

    # A second run finds nothing new and copies nothing twice.
    again = airflow_home.dags_test("mirrorflow__primary__backup__replicate", env=_env(primary, backup))
    assert again.succeeded, again.log[-4000:]
    # Its plan read progress on from the first run's plan, not from the topic's start.
    assert "primary->backup: progress read on from plan " in again.log, again.log[-4000:]
    assert _summaries(backup)[-1]["totals"]["records"] == 0
    assert len(read_all(backup.bootstrap, "primary.orders", 0)) == len(
        read_all(primary.bootstrap, "orders", 0)
    )


PYTHON = f"python{sys.version_info.major}.{sys.version_info.minor}"
# mirrorflow.spark.executor's line: one per Spark task, in its executor's stderr.
EXECUTOR_PYTHON_LINE = re.compile(
    r"INFO mirrorflow\.spark\.executor: Spark task \d+ of stage \d+ \(attempt \d+\) runs Python \S+ "
    r"at (\S+) with mirrorflow (\S+) from (\S+)$",
    re.M,
)


@pytest.mark.timeout(600)
def test_replicate_dag_copies_on_a_spark_standalone_cluster_with_the_python_the_job_ships(
    airflow_home, kafka_clusters, spark_standalone, mirrorflow_wheel, executor_env
) -> None:
    """Scaling out as docs/operations/scaling-out.md describes it: the same DAG, `spark_default`
    pointing at a standalone master, the copy's tasks run by executors of a separate worker
    process, in the packed environment (`make executor-env`) the connection's conf ships with the
    job, not in the virtualenv the worker was started from."""
    primary, backup = kafka_clusters(2)
    create_topics(primary.bootstrap, ("orders", 4))
    produce(
        primary.bootstrap,
        "orders",
        [{"key": b"%d" % i, "value": b"v%d" % i, "partition": i % 4} for i in range(400)],
    )
    spark = spark_standalone
    before = {app["id"] for app in spark.status()["completedapps"]}
    shipped = {
        "spark.archives": f"{executor_env}#environment",
        "spark.pyspark.python": "./environment/bin/python",
    }
    env = {**_env(primary, backup), "AIRFLOW_CONN_SPARK_DEFAULT": spark.connection(shipped)}
    result = airflow_home.dags_test("mirrorflow__primary__backup__replicate", env=env)
    assert result.succeeded, result.log[-4000:]
    assert f"--master {spark.master_url}" in result.log
    # The driver stays in the Airflow task's Python: ./environment exists only on executors.
    driver_python = re.search(r"spark\.pyspark\.driver\.python=(\S+)", result.log)
    assert driver_python and Path(driver_python.group(1)).is_absolute(), result.log[-4000:]
    apps = [app for app in spark.status()["completedapps"] if app["id"] not in before]
    assert [app["name"].split(" manual__")[0] for app in apps] == ["mirrorflow primary->backup"], apps
    executors = [path for app in apps for path in spark.work_dir.glob(f"{app['id']}/*/stderr")]
    assert executors, "no executor ran on the standalone worker"
    tasks = int(
        re.search(r"run \S+ of primary->backup: \d+ partitions over (\d+) tasks", result.log).group(1)
    )
    seen = []
    for stderr in executors:
        environment = stderr.parent / "environment"  # where the executor unpacked the archive
        for python, version, package in EXECUTOR_PYTHON_LINE.findall(stderr.read_text(errors="replace")):
            assert python == str(environment / "bin" / "python"), python
            assert package == str(environment / "lib" / PYTHON / "site-packages" / "mirrorflow"), package
            assert version == mirrorflow_wheel.wheel.name.split("-")[1]
            seen.append(python)
    assert len(seen) == tasks, (seen, tasks)
    assert not any(str(ROOT) in python for python in seen)
    for partition in range(4):
        source = read_all(primary.bootstrap, "orders", partition)
        assert [r.content() for r in read_all(backup.bootstrap, "primary.orders", partition)] == [
            r.content() for r in source
        ]
        assert len(source) == 100


def test_migrate_dag_stops_exactly_at_the_requested_time(airflow_home, kafka_clusters, unique) -> None:
    primary, backup = kafka_clusters(2)
    events, other = unique("events"), unique("other")
    create_topics(primary.bootstrap, (events, 3), (other, 1))
    producer = Producer({"bootstrap.servers": primary.bootstrap})
    cutoff = int(time.time() * 1000) - 60_000
    for i in range(300):
        # Timestamps straddle the cutoff: 200 records before it, 100 at or after it.
        ts = cutoff - 200 + i if i < 200 else cutoff + (i - 200)
        producer.produce(events, value=f"{i}".encode(), partition=i % 3, timestamp=ts)
        producer.produce(other, value=b"not selected")
    producer.flush(10)
    conf = {
        "source": "primary",
        "target": "backup",
        "topics": events,
        "until": str(cutoff),
        "delivery": "exactly-once",
    }
    result = airflow_home.dags_test("mirrorflow_migrate", env=_env(primary, backup), conf=conf)
    assert result.succeeded, result.log[-4000:]
    assert not librdkafka_errors(result.log)
    copied = [r for p in range(3) for r in read_all(backup.bootstrap, f"primary.{events}", p)]
    assert sorted(int(r.value) for r in copied) == list(range(200))
    assert all(r.timestamp < cutoff for r in copied)
    summary = _summaries(backup)[-1]
    assert summary["mode"] == "migrate" and summary["topics"][events]["records"] == 200
    assert other not in summary["topics"]


def _tries(airflow_home, dag_id: str, run_id: str) -> dict[str, int]:
    """Each task's try number in a run, from the home's metadata DB (the CLI does not show it)."""
    with contextlib.closing(sqlite3.connect(airflow_home.home / "airflow.db")) as db:
        rows = db.execute(
            "SELECT task_id, try_number FROM task_instance WHERE dag_id = ? AND run_id = ?", (dag_id, run_id)
        ).fetchall()
    return dict(rows)


def test_a_stopped_target_fails_the_plan_in_seconds_with_one_error_and_report_upstream_failed(
    airflow_home, kafka_clusters, tmp_path
) -> None:
    """Issue 10: the plan against a stopped target used to log ~1,160 librdkafka ERROR lines per
    attempt, end in a raw KafkaException, take ~4 minutes with retries, and fail report with a
    TypeError on the missing plan."""
    a, b = kafka_clusters(2)
    create_topics(a.bootstrap, ("orders", 2))
    config = tmp_path / "mm2.properties"
    config.write_text(mm2_text([a, b], ["A->B"], "mirrorflow.cluster.unreachable.timeout.ms = 3000\n"))
    env = {"MIRRORFLOW_CONFIG": str(config)}
    b.kafka.stop()  # the worker's cluster B; the next test that takes it starts it again

    started = time.monotonic()
    result = airflow_home.dags_test("mirrorflow__A__B__replicate", env=env)
    took = time.monotonic() - started

    assert result.state == "failed", result.log[-4000:]
    states = airflow_home.task_states(result.dag_id, result.run_id, env=env)
    assert states == {"plan": "failed", "copy": "upstream_failed", "report": "upstream_failed"}, states
    # Failed on its first try: an unreachable cluster is not retried (the plan's two retries, 30 s
    # apart, took minutes). The run's wall time is no measure of it: on a loaded machine, `airflow
    # dags test` took 55 s to start and fail a plan that itself waited the 3 s it was given.
    assert _tries(airflow_home, result.dag_id, result.run_id) == {"plan": 1, "copy": 0, "report": 0}, (
        f"the run took {took:.0f}s"
    )
    assert f"cluster B (target of A->B) at {b.bootstrap} did not answer within 3s" in result.log
    assert "check B.bootstrap.servers" in result.log
    assert "KafkaException" not in result.log and "TypeError" not in result.log
    librdkafka = [
        line
        for line in result.log.splitlines()
        if RAW_LIBRDKAFKA_LINE.match(line) or "mirrorflow.librdkafka" in line
    ]
    assert len(librdkafka) <= 3, librdkafka[:10]


def test_a_migrate_form_filled_in_wrongly_fails_the_plan_at_once_naming_the_fields(
    airflow_home, kafka_clusters
) -> None:
    """Issue 10: source = target was refused only inside the plan task with a ValueError, retried
    for ~40 s, and then failed report too. Issue 23: the plan failed once, naming each field, but
    left eight steps upstream_failed under it. Now the first task, check, fails alone: the steps
    after it are skipped, and the final report says the migration did not start, and why."""
    primary, backup = kafka_clusters(2)
    conf = {
        "source": "backup",
        "target": "backup",
        "topics": "orders(",
        "until": "now",
        "delivery": "exactly-once",
    }
    env = _env(primary, backup)

    result = airflow_home.dags_test("mirrorflow_migrate", env=env, conf=conf)

    assert result.state == "failed", result.log[-4000:]
    states = airflow_home.task_states(result.dag_id, result.run_id, env=env)
    assert states == {
        "check": "failed",
        **{step: "skipped" for step in STEPS if step != "check"},
        "final_report": "failed",
    }, states
    assert "Source cluster and Target cluster are both 'backup': choose two different clusters" in result.log
    assert "Topics (regex, full match): 'orders(' is not a valid regular expression" in result.log
    assert "The migration did not start: the trigger form needs changes: Source cluster" in result.log
    assert "TypeError" not in result.log


SPARK_INFO_LINE = re.compile(r"\d\d/\d\d/\d\d \d\d:\d\d:\d\d INFO ")
PROGRESS_LINE = re.compile(
    r"progress A->B: (?!total )(\w+) ([\d,]+)/([\d,]+) offsets \([\d.]+%\), (\d+)/(\d+) partitions done"
)


def _task_log(log: str, task_id: str) -> str:
    start = log.index(f"starting task_id={task_id} ")
    return log[start : log.index(f"end task task_id={task_id} ", start)]


def test_the_copy_logs_progress_per_topic_and_the_report_a_table_without_spark_noise(
    airflow_home, kafka_clusters, tmp_path
) -> None:
    """Issue 10, defect 7: the copy task's log was ~96 lines of Spark INFO with no progress while
    it ran, and the report task showed its counts only in XCom. Ranges of 1,000 offsets commit
    progress often enough for a 1 s interval to see it move."""
    a, b = kafka_clusters(2)
    create_topics(a.bootstrap, ("orders", 4), ("payments", 2))
    produce_keyed(a.bootstrap, "orders", 120_000, 4, b"o" * 100)
    produce_keyed(a.bootstrap, "payments", 30_000, 2, b"p" * 100)
    config = tmp_path / "mm2.properties"
    config.write_text(mm2_text([a, b], ["A->B"], "mirrorflow.range.max.records = 1000\n"))
    env = {"MIRRORFLOW_CONFIG": str(config), "MIRRORFLOW_COPY_PROGRESS_INTERVAL_S": "1"}

    result = airflow_home.dags_test("mirrorflow__A__B__replicate", env=env)

    assert result.succeeded, result.log[-4000:]
    copy = _task_log(result.log, "copy")
    seen: dict[str, list[int]] = {}
    for topic, done, planned, _, partitions in PROGRESS_LINE.findall(copy):
        assert (planned, partitions) == {"orders": ("120,000", "4"), "payments": ("30,000", "2")}[topic]
        seen.setdefault(topic, []).append(int(done.replace(",", "")))
    orders = seen["orders"]
    assert orders == sorted(orders), orders
    assert any(0 < done < 120_000 for done in orders), orders
    assert re.search(r"progress A->B: total [\d,]+/150,000 offsets .*, \d/2 topics done", copy)
    assert not SPARK_INFO_LINE.search(result.log), SPARK_INFO_LINE.search(result.log)
    assert "Using Spark's default log4j profile" not in result.log
    assert re.search(
        r"copied A->B: 150,000 records, [\d,]+ bytes, [\d,]+ transactions, 6 partitions, 0 failed, "
        r"0 lost to retention; [\d.]+s \(run manual__\S+\)",
        copy,
    )

    report = _task_log(result.log, "report")
    orders_row = re.search(
        r"│ orders +│ A\.orders +│ +4 │ +120,000 │ +120,000 │ +[\d,]+ │ +0 │ +0 │ +0 │", report
    )
    assert orders_row, report[-3000:]
    assert re.search(r"│ payments +│ A\.payments +│ +2 │ +30,000 │ +30,000 │", report)
    assert "total: 2 topic(s), 6 partition(s) copied, 150,000 offset(s) planned, 150,000 record(s)" in report
    # The figures are in rows and a totals line, not a dict (the return value goes to XCom only),
    # and progress is logged only when the copy moved: no total repeated.
    assert "Returned value was" not in report and "Returned value was" not in _task_log(result.log, "plan")
    totals = re.findall(r"progress A->B: total ([\d,]+)/150,000", copy)
    assert len(totals) == len(set(totals)), totals
