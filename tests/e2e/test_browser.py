"""An operator's day in a real browser: Playwright drives Debian's chromium against Airflow 3
(api-server, scheduler, dag-processor, triggerer on loopback, started by the launcher behind
`scripts/airflow-local`) with the project's dags/ and plugins/ and two real Kafka clusters.

Log in on Airflow's login page; trigger the migration through its form, approve the cut-over in
Required Actions and wait for success; trigger a failover dry run through its form; open Browse ->
Replication status in light and dark mode; stop the target cluster and see the outage banner with
the last values kept. Fields and buttons are found by the text a person reads (form titles come
from the DAG's params), never by CSS classes. Screenshots go to the test's tmp dir and to
build/screenshots/. Skipped, with the reason printed, only where chromium is missing or does not
start (`make setup` installs it where it may)."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

import pytest

from mirrorflow.airflow.local import AirflowHome, AirflowServer, free_port
from mirrorflow.airflow.settings import PROJECT_ROOT

from ..integration.kafkatools import create_topics, produce
from ..integration.test_failover_helpers import commit_at, committed

CHROMIUM = "/usr/bin/chromium"
DEMO_CONFIG = str(PROJECT_ROOT / "include" / "config" / "demo.properties")
ARTIFACTS = PROJECT_ROOT / "build" / "screenshots"
MIGRATE, FAILOVER = "mirrorflow_migrate", "mirrorflow_failover"
# The page's background at most this light (0-255) in dark mode, at least this light in light mode.
DARK_MAX, LIGHT_MIN = 90, 170

BACKGROUND = """() => {
  // The colour the page paints behind its content, as RGB (a canvas converts any CSS colour).
  const ctx = document.createElement("canvas").getContext("2d");
  for (const el of [document.body, document.documentElement]) {
    ctx.clearRect(0, 0, 1, 1);
    ctx.fillStyle = getComputedStyle(el).backgroundColor;
    ctx.fillRect(0, 0, 1, 1);
    const [r, g, b, a] = ctx.getImageData(0, 0, 1, 1).data;
    if (a > 0) return [r, g, b];
  }
  return null;
}"""


def _skip(reason: str) -> None:
    print(f"browser test skipped: {reason}")
    pytest.skip(reason)


@pytest.fixture
def browser() -> Iterator[Any]:
    if not os.access(CHROMIUM, os.X_OK):
        _skip(f"{CHROMIUM} is not installed (`make setup` installs Debian's chromium where apt-get may run)")
    from playwright.sync_api import Error, sync_playwright

    playwright = sync_playwright().start()
    try:
        # Chromium's sandbox refuses to run as root.
        args = ["--no-sandbox"] if os.geteuid() == 0 else []
        try:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=args, timeout=60_000)
        except Error as err:
            _skip(f"{CHROMIUM} does not start: {str(err).splitlines()[0]}")
        yield browser
        browser.close()
    finally:
        playwright.stop()


class Shots:
    """Screenshots kept as artifacts: in the test's tmp dir and copied to build/screenshots/."""

    def __init__(self, where: Path) -> None:
        self.where = where
        self.taken: list[Path] = []
        where.mkdir(parents=True)

    def take(self, page: Any, name: str) -> None:
        path = self.where / f"{len(self.taken) + 1:02d}-{name}.png"
        page.screenshot(path=str(path), full_page=True)
        self.taken.append(path)

    def publish(self) -> None:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        for old in ARTIFACTS.glob("*.png"):
            old.unlink()
        for path in self.taken:
            shutil.copy(path, ARTIFACTS / path.name)
            print(f"screenshot: {path} (copy: {ARTIFACTS / path.name})")


def _until(what: str, timeout: float, probe: Callable[[], Any], every: float = 2.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout:.0f}s")
        time.sleep(every)


def _run_path(dag_id: str, run_id: str) -> str:
    return f"/api/v2/dags/{dag_id}/dagRuns/{quote(run_id, safe='')}"


def _task_states(server: AirflowServer, dag_id: str, run_id: str) -> dict[str, str | None]:
    tis = server.api(_run_path(dag_id, run_id) + "/taskInstances")["task_instances"]
    return {ti["task_id"]: ti["state"] for ti in tis}


def _failure_report(server: AirflowServer, dag_id: str, run_id: str) -> str:
    """The task states, the end of each failed task's log and of the scheduler's: what a red run
    in CI needs to be understood without the Airflow home, which is gone by then."""
    states = _task_states(server, dag_id, run_id)
    parts = [f"{dag_id} {run_id}: {states}"]
    run_logs = server.logs / f"dag_id={dag_id}" / f"run_id={run_id}"
    for task, state in states.items():
        if state not in ("failed", "upstream_failed"):
            continue
        for log in sorted(run_logs.glob(f"task_id={task}/attempt=*.log")):
            tail = log.read_text(errors="replace").splitlines()[-25:]
            parts.append(f"--- {log.relative_to(server.logs)}:\n" + "\n".join(line[:600] for line in tail))
        scheduler = server.log_path("scheduler")
        if scheduler.exists():
            told = [line for line in scheduler.read_text(errors="replace").splitlines() if task in line]
            parts.append(f"--- scheduler.log lines naming {task}:\n" + "\n".join(x[:600] for x in told[-15:]))
    for component in ("scheduler", "api-server"):
        parts.append(f"--- {component}.log:\n{server.log_tail(component, 25)}")
    return "\n".join(parts)


def _wait_run(server: AirflowServer, dag_id: str, run_id: str, timeout: float) -> None:
    def done() -> bool:
        state = server.api(_run_path(dag_id, run_id))["state"]
        assert state != "failed", _failure_report(server, dag_id, run_id)
        return state == "success"

    _until(f"{dag_id} run {run_id} succeeded", timeout, done)


def log_in(page: Any, server: AirflowServer) -> None:
    page.goto(server.url + "/")
    page.wait_for_url(re.compile(r".*/auth/login.*"))
    page.get_by_label("Username").fill(server.user)
    page.get_by_label("Password").fill(server.home.password(server.user))
    page.get_by_role("button", name="Sign in").click()
    page.get_by_role("button", name="Browse").wait_for()


def _field(dialog: Any, title: str) -> Any:
    """A trigger-form field's input, found by the title shown in its label (Airflow's labels are
    not tied to their inputs, so the field group holding that label)."""
    label = dialog.page.locator("label").filter(has_text=re.compile(rf"^\s*{re.escape(title)}\s*\*?\s*$"))
    return dialog.get_by_role("group").filter(has=label).locator("input").first


def trigger(
    page: Any,
    server: AirflowServer,
    shots: Shots,
    dag_id: str,
    fill: dict[str, str],
    on: tuple[str, ...] = (),
) -> str:
    """Trigger `dag_id` from its form as a person does: each param in `fill` typed into the field
    titled as the DAG says, the switches in `on` checked to be on; returns the new run's id."""
    params = server.api(f"/api/v2/dags/{dag_id}/details")["params"]
    page.goto(f"{server.url}/dags/{dag_id}")
    page.get_by_role("button", name="Trigger").click()
    dialog = page.get_by_role("dialog")
    dialog.get_by_text("Run Parameters").wait_for()
    for key, value in fill.items():
        field = _field(dialog, params[key]["schema"]["title"])
        field.fill(value)
        assert field.input_value() == value
    for key in on:
        assert _field(dialog, params[key]["schema"]["title"]).is_checked(), (
            f"{dag_id}: {key} is off by default"
        )
    shots.take(page, f"{dag_id}-form")
    dialog.get_by_role("button", name="Trigger").click()
    page.wait_for_url(re.compile(rf".*/dags/{dag_id}/runs/[^/]+$"))
    run_id = unquote(page.url.rsplit("/runs/", 1)[1])
    conf = server.api(_run_path(dag_id, run_id))["conf"]
    assert {k: conf[k] for k in fill} == fill
    return run_id


def approve(page: Any, server: AirflowServer, shots: Shots, run_id: str) -> None:
    """Wait until the migration asks for approval, then Approve in the task's Required Action."""
    _until(
        "the migration waits for approval",
        300,
        lambda: (
            _task_states(server, MIGRATE, run_id).get("approve") == "awaiting_input"
            or _assert_not_failed(server, MIGRATE, run_id)
        ),
        every=3,
    )
    page.goto(f"{server.url}/dags/{MIGRATE}/runs/{quote(run_id, safe='')}/tasks/approve")
    page.get_by_text("Required Action").first.click()
    approve_button = page.get_by_role("button", name="Approve", exact=True)
    page.get_by_text("Verification:").wait_for()
    shots.take(page, "migrate-approval")
    approve_button.click()
    page.get_by_text("Response received").wait_for()


def _assert_not_failed(server: AirflowServer, dag_id: str, run_id: str) -> bool:
    states = _task_states(server, dag_id, run_id)
    if "failed" in states.values() or "upstream_failed" in states.values():
        raise AssertionError(_failure_report(server, dag_id, run_id))
    return False


def open_status(page: Any) -> Any:
    page.get_by_role("button", name="Browse").click()
    page.get_by_role("menuitem", name="Replication status").click()
    return page.frame_locator("iframe").first


def colour_mode(page: Any, mode: str) -> None:
    """Airflow's own switch: User -> Appearance -> Light Mode / Dark Mode."""
    page.get_by_role("button", name="User").click()
    page.get_by_role("menuitem", name="Appearance").click()
    choice = page.get_by_role("menuitemradio", name=f"{mode} Mode")
    choice.click()
    page.keyboard.press("Escape")
    choice.wait_for(state="hidden")  # no fading menu over the screenshots


def background(frame: Any) -> int:
    rgb = frame.locator("html").evaluate(BACKGROUND)
    assert rgb is not None, "the status page paints no background (the iframe shows the browser's default)"
    return round(sum(rgb) / 3)


# Measured 130-160 s on 2 busy cores; its own waits are bounded, this leaves room under load.
@pytest.mark.timeout(480)
def test_an_operators_day_in_the_browser(kafka_clusters, browser, unique, tmp_path) -> None:
    primary, backup = kafka_clusters(2)
    topic, moving, staying = unique("orders"), unique("shop"), unique("billing")
    create_topics(primary.bootstrap, (topic, 2))
    produce(primary.bootstrap, topic, [{"value": b"%d" % i, "partition": i % 2} for i in range(200)])
    commit_at(primary.bootstrap, moving, {(topic, 0): 40, (topic, 1): 70})
    commit_at(primary.bootstrap, staying, {(topic, 0): 10, (topic, 1): 20})
    remote = [(f"primary.{topic}", 0), (f"primary.{topic}", 1)]

    shots = Shots(tmp_path / "screenshots")
    server = AirflowServer(
        AirflowHome(tmp_path / "airflow"),
        free_port(),
        env={
            "MIRRORFLOW_CONFIG": DEMO_CONFIG,
            "MIRRORFLOW_DEMO_PRIMARY": primary.bootstrap,
            "MIRRORFLOW_DEMO_BACKUP": backup.bootstrap,
            "MIRRORFLOW_STATUS_REFRESH_S": "2",
            "MIRRORFLOW_STATUS_TIMEOUT_S": "2",
        },
    )
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    page.set_default_timeout(30_000)
    finished = False
    try:
        server.start()
        server.wait_healthy(180)
        _until(
            "the migrate and failover DAGs are parsed",
            120,
            lambda: (
                {MIGRATE, FAILOVER} <= {d["dag_id"] for d in server.api("/api/v2/dags?limit=100")["dags"]}
            ),
        )
        log_in(page, server)

        # Migrate through its form: copy, verify, preview, approval in the UI, cut-over.
        migration = trigger(
            page, server, shots, MIGRATE, {"topics": topic, "groups": moving}, on=("verify", "approval")
        )
        approve(page, server, shots, migration)
        _wait_run(server, MIGRATE, migration, 180)
        page.goto(f"{server.url}/dags/{MIGRATE}/runs/{quote(migration, safe='')}")
        page.get_by_text("Success").first.wait_for()
        shots.take(page, "migrate-run")
        assert committed(backup.bootstrap, moving, remote) == {remote[0]: 40, remote[1]: 70}

        # A failover dry run through its form: dry run is on by default and commits nothing.
        dry = trigger(page, server, shots, FAILOVER, {"groups": staying}, on=("dry_run",))
        _wait_run(server, FAILOVER, dry, 120)
        result = server.api(_run_path(FAILOVER, dry) + "/taskInstances/failover/xcomEntries/return_value")[
            "value"
        ]
        assert result["dry_run"] is True and result["committed"] == []
        rows = {(r["topic"], r["partition"]): (r["target_offset"], r["action"]) for r in result["rows"]}
        assert rows == {remote[0]: (10, "would commit"), remote[1]: (20, "would commit")}
        assert committed(backup.bootstrap, staying, remote) == {}

        # The status page in both colour modes, with the migration's run and topic on it.
        status = open_status(page)
        status.get_by_text(migration).first.wait_for()
        status.get_by_text(topic).first.wait_for()
        colour_mode(page, "Light")
        _until("the status page is light", 15, lambda: background(status) >= LIGHT_MIN, every=0.5)
        shots.take(page, "status-light")
        colour_mode(page, "Dark")
        _until(
            "the status page follows Airflow's dark mode",
            15,
            lambda: background(status) <= DARK_MAX,
            every=0.5,
        )
        shots.take(page, "status-dark")

        # The target goes down: a banner says since when, and the last values stay on the page.
        backup.kafka.stop()

        def banner_shown() -> bool:
            if status.get_by_text("unreachable since").count():
                return True
            page.reload()  # in case the page does not refresh itself
            status.locator("body").wait_for()
            return False

        _until("the outage banner appears", 90, banner_shown, every=5)
        banner = status.get_by_text("unreachable since").first.inner_text()
        assert "backup" in banner and "primary->backup" in banner
        status.get_by_text(migration).first.wait_for()
        status.get_by_text(topic).first.wait_for()
        shots.take(page, "status-outage-dark")
        colour_mode(page, "Light")
        _until("the status page is light again", 15, lambda: background(status) >= LIGHT_MIN, every=0.5)
        shots.take(page, "status-outage-light")
        finished = True
    finally:
        if not finished:
            with contextlib.suppress(Exception):
                shots.take(page, "at-failure")
        page.close()
        shots.publish()
        server.stop()
    assert not server.pids(), "Airflow processes left running"
