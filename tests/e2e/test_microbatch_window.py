"""A micro-batch window as its replicate DAG runs it (`airflow dags test`): plan, then one Spark
application on the suite's standalone cluster whose long-running tasks copy a batch every
interval, then the window's report. Mid-window its executor is killed with SIGKILL: the cluster
starts another, Spark runs the window's tasks again there, and they take their slots back. A
next window (the CLI's, with local workers) then takes the slots over while records keep coming,
so the Spark window ends by handing over instead of waiting for a successor that `dags test`
never schedules; the target ends exact."""

from __future__ import annotations

import json
import re
import subprocess
import threading
import time

import psutil
import pytest

from mirrorflow.replicate.run_reading import iter_run_records

from ..integration.kafkatools import create_topics, read_topic
from ..integration.mirror_setup import mm2_text
from ..integration.window_tools import SteadyProducer, assert_copied_exactly
from ..reliability.test_kill_nine import MIRRORFLOW
from .asset_events import stored_asset_events

SEED = 4_077
PARTITIONS = 4
WINDOW_S = 150
FLOW = (
    "A->B.topics = steady\ntasks.max = 2\nemit.heartbeats.enabled = false\n"
    "mirrorflow.replicate.mode = micro-batch\nmirrorflow.microbatch.interval.ms = 250\n"
    f"mirrorflow.microbatch.window.seconds = {WINDOW_S}\n"
)
# The window's length counts from its plan, and Spark's start-up on a loaded machine took more than
# 20 s: a window that short was over before its tasks began. The test does not wait for the end
# (the CLI window takes over after a few seconds of copying), so a longer window costs nothing.
# The killed executor's tasks must run again within the window's end plus its wait: on a machine
# three times slower than usual (CI, 2026-11-30) the new executor had not run them 180 s after the
# plan, so the window is 150 s (300 s for both, and the test's own timeout above that).
STATUS_LINE = re.compile(r"window A->B: ([\d,]+) records \([\d,]+/s\), lag now [\d.]+s, p50 \S+, p99 \S+")
EXECUTOR = "org.apache.spark.executor.CoarseGrainedExecutorBackend"


@pytest.mark.timeout(600)
def test_a_micro_batch_window_runs_on_the_standalone_cluster_and_hands_over(
    airflow_home, kafka_clusters, spark_standalone, tmp_path
) -> None:
    a, b = kafka_clusters(2)
    create_topics(a.bootstrap, ("steady", PARTITIONS))
    config = tmp_path / "mm2.properties"
    config.write_text(mm2_text([a, b], ["A->B"], FLOW))
    spark = spark_standalone
    before = {app["id"] for app in spark.status()["completedapps"]}
    env = {"MIRRORFLOW_CONFIG": str(config), "AIRFLOW_CONN_SPARK_DEFAULT": spark.connection()}
    producer = SteadyProducer(a.bootstrap, "steady", PARTITIONS, rate=300, seed=SEED)
    producer.start()
    outcome: list = []
    dag = threading.Thread(
        target=lambda: outcome.append(airflow_home.dags_test("mirrorflow__A__B__replicate", env=env))
    )
    dag.start()
    try:
        started = time.monotonic()
        deadline = started + 240  # the Spark application's start on a loaded machine, and a first batch
        while not _copied(b):
            assert dag.is_alive() and time.monotonic() < deadline, "the Spark window did not copy: " + (
                outcome[0].log[-4000:] if outcome else "the DAG run is still going"
            )
            time.sleep(1)
        time.sleep(6)  # a few status lines' worth of batches on Spark
        # Each task sends its status every few seconds from its first batch on; on a loaded
        # machine the second task's first status may come later than the first's.
        running = _page_row(config)
        while "the running window, 2 task(s)" not in running and time.monotonic() < deadline:
            time.sleep(1)
            running = _page_row(config)
        (app,) = spark.status()["activeapps"]
        killed = _kill_executor(app["id"])
        copied = _copied(b)
        # The window's tasks run again on the executor the cluster starts in the killed one's
        # place; they copy until the next window takes over, or until the window's end plus its
        # wait for the next (twice the window's length from its plan, made after `started`).
        while _copied(b) <= copied + 300:  # a second of the producer's records, after the kill
            assert dag.is_alive() and time.monotonic() < started + 2 * WINDOW_S, (
                "the window did not copy again after its executor was killed: "
                + (outcome[0].log[-4000:] if outcome else "the DAG run is still going")
                + _executor_logs(spark, app["id"])
            )
            time.sleep(1)
        following = subprocess.Popen(
            [MIRRORFLOW, "replicate", str(config), "--flow", "A->B", "--window", "6"],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        time.sleep(3)
    finally:
        sent = producer.stop()
    text, _ = following.communicate(timeout=120)
    dag.join(300)
    (result,) = outcome

    assert following.returncode == 0, text[-3000:]
    assert result.succeeded, result.log[-4000:] + _executor_logs(spark, app["id"])
    assert f"--master {spark.master_url}" in result.log
    apps = [app for app in spark.status()["completedapps"] if app["id"] not in before]
    assert len(apps) == 1 and apps[0]["name"].startswith("mirrorflow-window"), apps
    executors = sorted(spark.work_dir.glob(f"{apps[0]['id']}/*/stderr"))
    # The killed executor and the one the cluster started in its place ran the window's tasks.
    assert len(executors) >= 2 and killed, executors
    # The copy task logs a line every few seconds (records, lag), not one per batch.
    counts = [int(n.replace(",", "")) for n in STATUS_LINE.findall(result.log)]
    assert counts and counts == sorted(counts), result.log[-4000:]
    batches = int(re.search(r"copied for [\d.]+s in ([\d,]+) batches", result.log).group(1).replace(",", ""))
    assert len(counts) * 4 < batches, (len(counts), batches)
    # Both tasks ran on the killed executor: their lost attempts' records are reported (from their
    # last status), not dropped from the window's figures.
    assert "2 tasks handed their writer slots over to the next window" in result.log, result.log[-4000:]
    ended = re.search(r"(\d+) task attempts? lost mid-window had copied ([\d,]+) records?", result.log)
    assert ended and int(ended.group(1)) >= 1 and int(ended.group(2).replace(",", "")) > 0, result.log[-4000:]
    assert assert_copied_exactly(a.bootstrap, b.bootstrap, "steady", "A.steady", PARTITIONS) == sent
    # The window's report emitted one Asset event for its topic, with what the window copied.
    (summary,) = [
        json.loads(body)
        for _, _, run, kind, body in iter_run_records({"bootstrap.servers": b.bootstrap})
        if kind == "summary" and run == result.run_id
    ]
    events = stored_asset_events(airflow_home, result.dag_id, result.run_id)
    assert list(events) == [f"kafka://{b.bootstrap}/A.steady"], events
    (event,) = events.values()
    assert event["micro_batch"] and event["records"] == summary["totals"]["records"] > 0
    assert event["partitions"] == PARTITIONS
    # While the window copied, the status page's row showed its figures so far (its run, records,
    # rate over the last minute, lag in seconds), not a summary's: a window writes one at its end.
    assert "the running window, 2 task(s)" in running and "so far" in running, running
    rate = re.search(r"([\d,]+) records/s", running)
    assert rate and int(rate.group(1).replace(",", "")) > 0, running
    # The producer runs from before the Spark application starts: its first records wait for the
    # window's first batch, on a loaded machine over a minute, which the page writes in minutes.
    assert re.search(r"behind; p50 [\d.]+ (?:s|min), p99 [\d.]+ (?:s|min)", running), running


def _page_row(config) -> str:
    """The flow's row of the status page, rendered from what the clusters hold now."""
    from mirrorflow.airflow.status_page import PageView, render_content
    from mirrorflow.config import load_config
    from mirrorflow.control.mirror_status import mirror_status

    mirror = load_config(str(config))
    status = mirror_status(mirror)
    view = PageView(
        status=status,
        snapshot={"refresh_interval_s": 15.0},
        banners=[],
        now_ms=status.generated_ms,
        config=mirror,
    )
    return render_content(view).split("A-&gt;B", 1)[1].split("</tr>", 1)[0]


def _copied(cluster) -> int:
    return sum(map(len, read_topic(cluster.bootstrap, "A.steady", PARTITIONS).values()))


def _executor_logs(spark, app_id: str) -> str:
    """The last lines of each executor of `app_id`: the killed one's and its successor's."""
    parts = []
    for path in sorted(spark.work_dir.glob(f"{app_id}/*/stderr")):
        lines = path.read_text(errors="replace").splitlines()[-25:]
        parts.append(f"\n--- executor {path.parent.name} ---\n" + "\n".join(lines))
    return "".join(parts) or f"\n(no executor log of {app_id} under {spark.work_dir})"


def _kill_executor(app_id: str) -> int:
    """SIGKILL the executor JVM of `app_id` (its Python workers die with it); returns its pid."""
    for process in psutil.process_iter(["pid", "cmdline"]):
        cmdline = process.info["cmdline"] or []
        if EXECUTOR in cmdline and app_id in cmdline:
            process.kill()
            process.wait(30)
            return process.info["pid"]
    raise AssertionError(f"no executor of {app_id} is running")
