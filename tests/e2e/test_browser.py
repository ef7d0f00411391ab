"""An operator's day in a real browser: Playwright drives Debian's chromium against Airflow 3
(api-server, scheduler, dag-processor, triggerer on loopback, started as `scripts/airflow-local`
starts them) with the project's dags/ and plugins/ and two real Kafka clusters, and real Spark.

One Airflow session serves the module, and its tests run in order on one xdist worker
(tests/conftest.py, ONE_WORKER_MODULES): each builds on what the ones before left (the status page at the end shows
the migrations and verifications of the whole day). What an operator does, and what each test
holds the product to:

- a form with a mistake (a time Airflow cannot read, epoch seconds, a topics regex matching no
  topic, a groups regex that does not compile, the same cluster twice) is accepted by Airflow and
  refused by the run's first task alone, in one sentence, before anything runs; a time before the
  data runs with a warning;
- a migration's approval shows what was asked and what "Copy up to" resolved to, what was copied
  and verified, per partition, checked here against the clusters; a group reading a topic the
  migration did not copy is blocked and not moved, the other moves exactly;
- a rejected cut-over ends red, as does a verification short of verified;
- a copy-only migration runs from the form (no groups), copies only the chosen topics (no
  heartbeats), and its logs read well: Spark's warnings at warning level, progress lines only
  when progress moved, the plan as a table;
- the status page lists migrations and verifications with their verdicts and logs, never shows
  work to do in red, and when the target goes down shows the failed run red, the heartbeat
  stale and the values last read, with metrics an alert can fire on.

Screenshots go to the module's tmp dir and to build/screenshots/. Skipped, with the reason
printed, only where chromium is missing or does not start (`make setup` installs it where it may).
"""

from __future__ import annotations

import contextlib
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from localkafka import Security
from mirrorflow.airflow.local import AirflowHome, AirflowServer, free_port
from mirrorflow.airflow.migrate_steps import STEPS
from mirrorflow.airflow.settings import PROJECT_ROOT
from mirrorflow.mm2.formats import Heartbeat

from ..conftest import Cluster, cluster_pair
from ..integration.kafkatools import create_topics, produce
from ..integration.test_failover_helpers import commit_at, committed
from .browser_ui import (
    DARK_MAX,
    LIGHT_MIN,
    PAGE_TIMEOUT_S,
    Shots,
    answer_approval,
    background,
    chromium,
    colour_mode,
    log_in,
    open_status,
    open_trigger_form,
    required_action,
    task_log,
    task_states,
    trigger,
    until,
    wait_for_input,
    wait_run,
    xcom,
)

DEMO_CONFIG = str(PROJECT_ROOT / "include" / "config" / "demo.properties")
MIGRATE, FAILOVER = "mirrorflow_migrate", "mirrorflow_failover"
VERIFY, REPLICATE = "mirrorflow__primary__backup__verify", "mirrorflow__primary__backup__replicate"
ORDERS, BILLING = "orders", "billing-events"
REMOTE = [(f"primary.{ORDERS}", 0), (f"primary.{ORDERS}", 1)]
STEPS_AFTER_CHECK = set(STEPS) - {"check"}


@dataclass
class Day:
    server: AirflowServer
    page: Any
    shots: Shots
    primary: Cluster
    backup: Cluster


@pytest.fixture(scope="module")
def day(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Day]:
    """Clusters of the module's own: other tests on this worker empty the shared ones between
    the module's tests, and the day builds on what each test left."""
    with chromium() as browser, cluster_pair(tmp_path_factory, Security()) as (a, b):
        primary, backup = Cluster("A", a.bootstrap, a), Cluster("B", b.bootstrap, b)
        create_topics(primary.bootstrap, (ORDERS, 2), (BILLING, 1))
        produce(primary.bootstrap, ORDERS, [{"value": b"%d" % i, "partition": i % 2} for i in range(200)])
        produce(primary.bootstrap, BILLING, [{"value": b"b%d" % i} for i in range(50)])
        commit_at(primary.bootstrap, "shop", {(ORDERS, 0): 40, (ORDERS, 1): 70})
        commit_at(primary.bootstrap, "billing", {(BILLING, 0): 30})
        where = tmp_path_factory.mktemp("browser")
        server = AirflowServer(
            AirflowHome(where / "airflow"),
            free_port(),
            env={
                "MIRRORFLOW_CONFIG": DEMO_CONFIG,
                "MIRRORFLOW_DEMO_PRIMARY": primary.bootstrap,
                "MIRRORFLOW_DEMO_BACKUP": backup.bootstrap,
                "MIRRORFLOW_STATUS_REFRESH_S": "2",
                "MIRRORFLOW_STATUS_TIMEOUT_S": "2",
            },
        )
        shots = Shots(where / "screenshots")
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        page.set_default_timeout(PAGE_TIMEOUT_S * 1000)
        try:
            server.start()
            server.wait_healthy(180)
            until(
                "the migrate, verify and failover DAGs are parsed",
                120,
                lambda: (
                    {MIGRATE, FAILOVER, VERIFY}
                    <= {d["dag_id"] for d in server.api("/api/v2/dags?limit=100")["dags"]}
                ),
            )
            log_in(page, server)
            yield Day(server, page, shots, primary, backup)
        finally:
            with contextlib.suppress(Exception):
                shots.take(page, "at-the-end")
            page.close()
            shots.publish()
            killed = server.stop()
        assert not server.pids(), "Airflow processes left running"
        assert not killed, f"processes that did not stop when asked: {killed}"


def _end_offsets(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    asked = {TopicPartition(topic, p): OffsetSpec.latest() for p in range(partitions)}
    return {tp.partition: f.result(30).offset for tp, f in admin.list_offsets(asked).items()}


def _remote_topics(bootstrap: str) -> set[str]:
    return {
        t
        for t in AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=30).topics
        if t.startswith("primary.")
    }


def _said_before_the_traceback(day: Day, dag_id: str, run_id: str, task_id: str, sentence: str) -> None:
    """The task's log tells the cause in full, at ERROR, before Airflow's 'Task failed' traceback."""
    lines = task_log(day.server, dag_id, run_id, task_id)
    told = [i for i, line in enumerate(lines) if line.level == "error" and sentence in line.text]
    failed = [i for i, line in enumerate(lines) if line.text == "Task failed with exception"]
    assert told and failed and told[0] < failed[0], [(line.level, line.text[:200]) for line in lines]


@pytest.mark.timeout(720)
def test_a_form_with_a_mistake_is_refused_by_the_first_task_in_one_sentence(day: Day) -> None:
    server, page = day.server, day.page
    # Manual DAGs are created unpaused: nothing for the form's "Unpause on trigger" to do (it
    # would unpause even a DAG whose trigger Airflow then refuses).
    for dag in (MIGRATE, VERIFY, FAILOVER):
        assert server.api(f"/api/v2/dags/{dag}")["is_paused"] is False
    mistakes = [
        (
            {"topics": ORDERS, "until": "yesterday 5pm"},
            "Copy up to: 'yesterday 5pm' is not a time mirrorflow reads",
        ),
        (
            {"topics": ORDERS, "until": "1795680000"},
            "Copy up to: 1795680000 looks like epoch seconds (2026-11-26 08:00:00 UTC)",
        ),
        (
            {"topics": "nosuch.*"},
            "Topics (regex, full match): 'nosuch.*' matches no topic of primary that can be copied "
            f"(it has 2: {BILLING}, {ORDERS})",
        ),
        (
            {"topics": ORDERS, "groups": "shop("},
            "Consumer groups to move (regex): 'shop(' is not a valid regular expression",
        ),
    ]
    runs = [(trigger(page, server, day.shots, MIGRATE, fill), said) for fill, said in mistakes]
    # The same cluster twice, picked as a person does, from the Target cluster drop-down.
    same = trigger(page, server, day.shots, MIGRATE, {"topics": ORDERS}, choose={"target": "primary"})
    runs.append(
        (same, "Source cluster and Target cluster are both 'primary': choose two different clusters.")
    )
    for run_id, said in runs:
        wait_run(server, MIGRATE, run_id, 240, expect="failed")
        states = task_states(server, MIGRATE, run_id)
        # The check failed alone: the steps after it were skipped, never upstream_failed.
        assert states["check"] == "failed" and states["final_report"] == "failed", states
        assert {states[step] for step in STEPS_AFTER_CHECK} == {"skipped"}, states
        _said_before_the_traceback(day, MIGRATE, run_id, "check", said)
        _said_before_the_traceback(
            day,
            MIGRATE,
            run_id,
            "final_report",
            "The migration did not start: the trigger form needs changes: " + said,
        )
        for line in task_log(server, MIGRATE, run_id, "check"):
            assert "Failed validating" not in line.text and "does not match '^" not in line.text
    page.goto(f"{server.url}/dags/{MIGRATE}/runs/{quote(runs[2][0], safe='')}")
    page.get_by_text("Failed").first.wait_for()
    day.shots.take(page, "migrate-refused-topics")
    assert not _remote_topics(day.backup.bootstrap), "a refused migration copied something"

    # A time before the data is not a mistake Airflow or the check can refuse, but it copies
    # nothing: the run goes through and says so.
    before = trigger(
        page, server, day.shots, MIGRATE, {"topics": ORDERS, "until": "2020-01-01"}, off=("verify",)
    )
    wait_run(server, MIGRATE, before, 300)
    warned = [line.text for line in task_log(server, MIGRATE, before, "check") if line.level == "warning"]
    assert warned == [
        "Copy up to 2020-01-01 00:00:00 UTC is before the oldest record of the chosen topics: this run copies no "
        "record (write 'now', or a later time)."
    ]
    summary = xcom(server, MIGRATE, before, "final_report")
    assert summary["records"] == 0 and summary["warnings"] == warned and summary["done"]


@pytest.mark.timeout(600)
def test_the_approval_shows_what_was_copied_and_blocks_a_group_it_does_not_cover(day: Day) -> None:
    server, page = day.server, day.page
    run_id = trigger(
        page,
        server,
        day.shots,
        MIGRATE,
        {"topics": ORDERS, "groups": "shop|billing"},
        on=("verify", "approval"),
    )
    wait_for_input(server, MIGRATE, run_id, "approve", 420)
    shown = required_action(page, server, MIGRATE, run_id, "approve")
    day.shots.take(page, "migrate-approval")
    # What was asked, and each partition's end: exactly the source's end offsets, all of them on
    # the target and verified.
    assert "Asked: topics orders (regex, full match), copy up to now: each partition's end as it was" in shown
    ends = _end_offsets(day.primary.bootstrap, ORDERS, 2)
    assert ends == {0: 100, 1: 100}
    for partition, end in ends.items():
        assert f"orders\t{partition}\t{end}\t{end}\t{end} (match)" in shown, shown
    assert (
        "Copied: 2 partition(s) of 1 topic(s); this run copied 200 record(s); 0 offset(s) up to the ends are "
        "not on the target." in shown
    )
    assert (
        "Verification: verified: 200 record(s) of 2 partition(s) compared up to the migration's ends" in shown
    )
    assert "Groups matching shop|billing: 1 of 2 can move" in shown
    assert (
        "billing (billing-events): BLOCKED, stays where it is: reads billing-events, not among this migration's "
        "topics (orders): not copied by it." in shown
    )
    assert "shop (orders): moves." in shown
    assert (
        "shop\torders\t0\t40\t100\t100\t40\texact" in shown
        and "shop\torders\t1\t70\t100\t100\t70\texact" in shown
    )
    answer_approval(page, server, MIGRATE, run_id, "Approve")
    wait_run(server, MIGRATE, run_id, 240)

    assert committed(day.backup.bootstrap, "shop", REMOTE) == {REMOTE[0]: 40, REMOTE[1]: 70}
    assert committed(day.backup.bootstrap, "billing", [(f"primary.{BILLING}", 0)]) == {}
    # The DAGs scheduled on the flow's cut-over Asset learn which groups moved.
    events = server.api(f"/api/v2/assets/events?source_run_id={quote(run_id, safe='')}")["asset_events"]
    moved = {e["uri"]: e["extra"] for e in events if e["source_task_id"] == "cutover"}
    assert list(moved) == [f"mirrorflow://{day.backup.bootstrap}/primary/cutover"]
    assert [(e["groups"], e["groups_count"]) for e in moved.values()] == [(["shop"], 1)]
    summary = xcom(server, MIGRATE, run_id, "final_report")
    assert summary["groups_moved"] == ["shop"] and list(summary["groups_blocked"]) == ["billing"]
    assert summary["outcome"] == (
        "The migration is done: 200 record(s) copied, verification verified; groups moved: shop; blocked, not "
        "moved: billing."
    )
    # The cut-over logs what it committed, per group and partition.
    cut = [line.text for line in task_log(server, MIGRATE, run_id, "cutover")]
    for partition, offset in ((0, 40), (1, 70)):
        assert any(
            row.startswith("│ shop")
            and f"│ {partition} " in row
            and f"│ {offset} " in row
            and "committed" in row
            for row in cut
        ), cut
    # The plan tells what it planned as a table and a totals line, not as a dict.
    plan = [line.text for line in task_log(server, MIGRATE, run_id, "plan")]
    assert (
        "plan: 1 topic(s), 2 partition(s), 200 offset(s) pending in 2 range(s) over 2 partition(s) to copy"
        in plan
    )
    assert any(row.startswith("│ orders") for row in plan) and not any(
        "Returned value was" in row for row in plan
    )
    page.goto(f"{server.url}/dags/{MIGRATE}/runs/{quote(run_id, safe='')}")
    page.get_by_text("Success").first.wait_for()
    day.shots.take(page, "migrate-run")


@pytest.mark.timeout(420)
def test_a_rejected_cut_over_ends_the_run_not_done(day: Day) -> None:
    server, page = day.server, day.page
    run_id = trigger(page, server, day.shots, MIGRATE, {"topics": ORDERS, "groups": "shop"}, off=("verify",))
    wait_for_input(server, MIGRATE, run_id, "approve", 300)
    shown = required_action(page, server, MIGRATE, run_id, "approve")
    assert "Verification: not run (turned off in the form): what was copied is not proven." in shown
    answer_approval(page, server, MIGRATE, run_id, "Reject")
    wait_run(server, MIGRATE, run_id, 180, expect="failed")
    states = task_states(server, MIGRATE, run_id)
    # Not green: a rejection ends the approve step skipped (Airflow's approval succeeds whatever the answer).
    assert (states["approve"], states["cutover"], states["final_report"]) == ("skipped", "skipped", "failed")
    _said_before_the_traceback(
        day, MIGRATE, run_id, "final_report", "The cut-over was rejected by admin: no consumer group was moved"
    )
    page.goto(f"{server.url}/dags/{MIGRATE}/runs/{quote(run_id, safe='')}")
    page.get_by_text("Failed").first.wait_for()
    day.shots.take(page, "migrate-rejected")


def _plant_heartbeat_topic(bootstrap: str, name: str, source: str, target: str) -> None:
    create_topics(bootstrap, (name, 1, {"cleanup.policy": "compact"}))
    beat = Heartbeat(source, target, int(time.time() * 1000))
    produce(bootstrap, name, [{"key": beat.key_bytes(), "value": beat.value_bytes()}])


@pytest.mark.timeout(480)
def test_a_copy_only_migration_copies_the_chosen_topics_and_logs_what_moved(day: Day) -> None:
    server, page = day.server, day.page
    # Heartbeats of backup->primary, as MM2's heartbeat job writes them: MM2 adds heartbeat
    # topics to every flow; a migration of `orders` must leave them.
    _plant_heartbeat_topic(day.primary.bootstrap, "heartbeats", "backup", "primary")
    produce(day.primary.bootstrap, ORDERS, [{"value": b"n%d" % i, "partition": i % 2} for i in range(100)])
    run_id = trigger(
        page, server, day.shots, MIGRATE, {"topics": ORDERS}, off=("verify",), shot="migrate-copy-only-form"
    )
    wait_run(server, MIGRATE, run_id, 360)
    summary = xcom(server, MIGRATE, run_id, "final_report")
    assert (
        summary["outcome"]
        == "The migration is done: 100 record(s) copied, verification not run; copy only, no group moved."
    )
    assert _remote_topics(day.backup.bootstrap) == {f"primary.{ORDERS}"}  # no heartbeats, no billing-events
    # The copy's log: Spark's warnings at warning level, never as info; progress lines only when
    # the copy moved (no block repeated), then the one-line summary.
    copy = task_log(server, MIGRATE, run_id, "copy")
    spark_warnings = [line for line in copy if " WARN " in line.text]
    assert spark_warnings and {line.level for line in spark_warnings} == {"warning"}, spark_warnings
    totals = [line.text for line in copy if line.text.startswith("progress primary->backup: total")]
    assert len(totals) == len(set(totals)), totals
    assert any("copied primary->backup: 100 records" in line.text for line in copy)


@pytest.mark.timeout(360)
def test_a_verification_short_of_verified_fails_its_run(day: Day) -> None:
    server, page = day.server, day.page
    produce(day.primary.bootstrap, ORDERS, [{"value": b"v%d" % i, "partition": i % 2} for i in range(50)])
    run_id = trigger(page, server, day.shots, VERIFY, {"topics": ORDERS})
    wait_run(server, VERIFY, run_id, 300, expect="failed")
    assert task_states(server, VERIFY, run_id) == {"plan": "success", "verify": "success", "report": "failed"}
    _said_before_the_traceback(
        day, VERIFY, run_id, "report", "is incomplete: 50 offset(s) in range are not copied yet."
    )
    report = [line.text for line in task_log(server, VERIFY, run_id, "report")]
    assert any(
        row.startswith("verdict incomplete: 2 partition(s), 300 source record(s) compared") for row in report
    )


@pytest.mark.timeout(300)
def test_a_failover_dry_run_commits_nothing(day: Day) -> None:
    server, page = day.server, day.page
    commit_at(day.primary.bootstrap, "billing-shop", {(ORDERS, 0): 10, (ORDERS, 1): 20})
    run_id = trigger(page, server, day.shots, FAILOVER, {"groups": "billing-shop"}, on=("dry_run",))
    wait_run(server, FAILOVER, run_id, 180)
    result = xcom(server, FAILOVER, run_id, "failover")
    assert result["dry_run"] is True and result["committed"] == []
    rows = {(r["topic"], r["partition"]): (r["target_offset"], r["action"]) for r in result["rows"]}
    assert rows == {REMOTE[0]: (10, "would commit"), REMOTE[1]: (20, "would commit")}
    assert committed(day.backup.bootstrap, "billing-shop", REMOTE) == {}


def _metrics(server: AirflowServer) -> str:
    with urllib.request.urlopen(server.url + "/mirrorflow/metrics", timeout=30) as response:
        return response.read().decode()


@pytest.mark.timeout(480)
def test_the_status_page_tells_runs_verdicts_and_a_failed_run_red(day: Day) -> None:
    server, page = day.server, day.page
    # primary's heartbeats as a copy brought them to backup: backup's upstream is primary.
    _plant_heartbeat_topic(day.backup.bootstrap, "primary.heartbeats", "primary", "backup")
    page.goto(server.url + "/")
    status = open_status(page)
    status.get_by_text("Migrations and verifications, the newest first").wait_for()
    # Every migration and verification of the day, with its verdict and its logs.
    status.get_by_text("incomplete").first.wait_for()
    for fate in ("rejected", "done", "verified", "incomplete"):
        assert status.locator("td .badge", has_text=fate).count(), fate
    for step in ("final_report", "report", "copy"):  # the migrations', the verification's, the figures' run
        assert status.locator(f'td a[href*="/tasks/{step}"]').count(), step
    # Work to do is never red: a verification's offsets not copied yet, the lag now.
    assert not status.locator(".fg-bad", has_text="not copied").count()
    assert status.get_by_text("50 not copied yet").count()
    status.locator("td .badge.ok", has_text="healthy").first.wait_for()  # backup's newest heartbeat, planted
    colour_mode(page, "Light")
    until("the status page is light", 15, lambda: background(status) >= LIGHT_MIN, every=0.5)
    day.shots.take(page, "status-light")
    colour_mode(page, "Dark")
    until(
        "the status page follows Airflow's dark mode", 15, lambda: background(status) <= DARK_MAX, every=0.5
    )
    day.shots.take(page, "status-dark")

    # The target goes down and the flow's next run fails in its plan, writing nothing to Kafka.
    assert day.backup.kafka is not None
    day.backup.kafka.stop()
    open_trigger_form(page, server, day.shots, REPLICATE)
    page.get_by_role("dialog").get_by_role("button", name="Trigger").click()
    page.wait_for_url(lambda url: "/runs/" in url)
    until(
        "a replicate run failed",
        180,
        lambda: any(
            r["state"] == "failed" for r in server.api(f"/api/v2/dags/{REPLICATE}/dagRuns")["dag_runs"]
        ),
    )
    page.goto(server.url + "/")
    status = open_status(page)

    def shown_failed() -> bool:
        red = status.locator("td .badge.bad", has_text="failed").count()
        if red and status.get_by_text("unreachable since").count():
            return True
        page.reload()
        status.locator("body").wait_for()
        return False

    # Red from the failed run on, also while the next scheduled run (the DAG was unpaused by the
    # trigger) is under way; beside it, no run has succeeded, and the last run's logs.
    until("the status page shows the failed run", 90, shown_failed, every=3)
    assert status.get_by_text("no successful run yet").count()
    assert status.locator('td a[href*="/tasks/plan"]', has_text="plan log").count()
    assert status.locator("td .badge.warn", has_text="stale").count() == 1  # backup's heartbeat, as last read
    banner = status.get_by_text("unreachable since").first.inner_text()
    assert "backup" in banner and "primary->backup" in banner
    colour_mode(page, "Light")
    until("the status page is light again", 15, lambda: background(status) >= LIGHT_MIN, every=0.5)
    day.shots.take(page, "status-failed-run-light")
    colour_mode(page, "Dark")
    until("the status page is dark again", 15, lambda: background(status) <= DARK_MAX, every=0.5)
    day.shots.take(page, "status-failed-run-dark")
    metrics = _metrics(server)
    labels = f'dag_id="{REPLICATE}",flow="primary->backup"'
    assert 'mirrorflow_flow_last_run_failed{flow="primary->backup"} 1.0' in metrics
    failed_runs = next(
        line
        for line in metrics.splitlines()
        if line.startswith(f"mirrorflow_dag_runs_failed_total{{{labels}}}")
    )
    assert float(failed_runs.split()[-1]) >= 1
