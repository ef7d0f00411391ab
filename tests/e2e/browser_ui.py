"""What the browser tests do as a person in Airflow's UI (Playwright driving Debian's chromium) and
what they read back: log in, trigger a DAG from its form, answer a Required Action, open the
status page, switch colour modes; a run's task states, a task's log lines, screenshots kept as
artifacts. Fields and buttons are found by the text a person reads (form titles come from the
DAG's params), never by CSS classes."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import time
import urllib.error
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

import pytest

from mirrorflow.airflow.local import AirflowServer
from mirrorflow.airflow.settings import PROJECT_ROOT

CHROMIUM = "/usr/bin/chromium"
ARTIFACTS = PROJECT_ROOT / "build" / "screenshots"
# The page's background at most this light (0-255) in dark mode, at least this light in light mode.
DARK_MAX, LIGHT_MIN = 90, 170
# How long a page may take to show what a test waits for (the page's default timeout). Chromium
# on a loaded 2-core machine took 12 s to ask for a run page's scripts and 30 s to show the run's
# state (a suite run of 2026-11-30, the api-server answering each request within 1.6 s).
PAGE_TIMEOUT_S = 90

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


@contextlib.contextmanager
def chromium() -> Iterator[Any]:
    """A headless chromium for the module, or a skip saying why there is none."""
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
    """Screenshots kept as artifacts: in the module's tmp dir and copied to build/screenshots/."""

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


def until(what: str, timeout: float, probe: Callable[[], Any], every: float = 2.0) -> Any:
    """`probe()`'s first true value within `timeout` seconds. A probe of Airflow's API that times
    out or cannot connect is asked again: on a loaded machine the API server once took over 30 s to
    answer one request (CI, 2026-11-30). An HTTP error answer is not retried."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            value, failed = probe(), None
        except (TimeoutError, ConnectionError) as exc:
            value, failed = None, exc
        except urllib.error.URLError as exc:
            if isinstance(exc, urllib.error.HTTPError):
                raise
            value, failed = None, exc
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout:.0f}s") from failed
        time.sleep(every)


def run_path(dag_id: str, run_id: str) -> str:
    return f"/api/v2/dags/{dag_id}/dagRuns/{quote(run_id, safe='')}"


def task_states(server: AirflowServer, dag_id: str, run_id: str) -> dict[str, str | None]:
    tis = server.api(run_path(dag_id, run_id) + "/taskInstances")["task_instances"]
    return {ti["task_id"]: ti["state"] for ti in tis}


def xcom(server: AirflowServer, dag_id: str, run_id: str, task_id: str) -> Any:
    return server.api(run_path(dag_id, run_id) + f"/taskInstances/{task_id}/xcomEntries/return_value")[
        "value"
    ]


@dataclass(frozen=True)
class LogLine:
    level: str
    logger: str
    text: str


def task_log(
    server: AirflowServer, dag_id: str, run_id: str, task_id: str, attempt: int = 1
) -> list[LogLine]:
    """The task's log as Airflow stored it (JSON lines), each line's level, logger and text."""
    path = (
        server.logs
        / f"dag_id={dag_id}"
        / f"run_id={run_id}"
        / f"task_id={task_id}"
        / f"attempt={attempt}.log"
    )
    lines = []
    for raw in path.read_text(errors="replace").splitlines():
        entry = json.loads(raw)
        lines.append(LogLine(entry.get("level", ""), entry.get("logger", ""), str(entry.get("event", ""))))
    return lines


def failure_report(server: AirflowServer, dag_id: str, run_id: str) -> str:
    """The task states, the end of each failed task's log and of the scheduler's: what a red run
    in CI needs to be understood without the Airflow home, which is gone by then."""
    states = task_states(server, dag_id, run_id)
    parts = [f"{dag_id} {run_id}: {states}"]
    run_logs = server.logs / f"dag_id={dag_id}" / f"run_id={run_id}"
    for task, state in states.items():
        if state not in ("failed", "upstream_failed"):
            continue
        for log in sorted(run_logs.glob(f"task_id={task}/attempt=*.log")):
            tail = log.read_text(errors="replace").splitlines()[-25:]
            parts.append(f"--- {log.relative_to(server.logs)}:\n" + "\n".join(line[:600] for line in tail))
    for component in ("scheduler", "api-server"):
        parts.append(f"--- {component}.log:\n{server.log_tail(component, 25)}")
    return "\n".join(parts)


def wait_run(
    server: AirflowServer, dag_id: str, run_id: str, timeout: float, *, expect: str = "success"
) -> None:
    """Until the run ends in `expect`; the run's states and failed logs when it ends otherwise."""

    def ended() -> bool:
        state = server.api(run_path(dag_id, run_id))["state"]
        if state in ("success", "failed"):
            assert state == expect, failure_report(server, dag_id, run_id)
            return True
        return False

    until(f"{dag_id} run {run_id} ended {expect}", timeout, ended)


def log_in(page: Any, server: AirflowServer) -> None:
    page.goto(server.url + "/")
    page.wait_for_url(re.compile(r".*/auth/login.*"))
    page.get_by_label("Username").fill(server.user)
    page.get_by_label("Password").fill(server.home.password(server.user))
    page.get_by_role("button", name="Sign in").click()
    page.get_by_role("button", name="Browse").wait_for()


def label(dialog: Any, title: str) -> Any:
    """A trigger-form field's label, by the title it shows (and the * of a required field)."""
    return dialog.page.locator("label").filter(has_text=re.compile(rf"^\s*{re.escape(title)}\s*\*?\s*$"))


def field(dialog: Any, title: str) -> Any:
    """A trigger-form field's input, found by the title shown in its label (Airflow's labels are
    not tied to their inputs, so the field group holding that label)."""
    return dialog.get_by_role("group").filter(has=label(dialog, title)).locator("input").first


def dag_report(server: AirflowServer, dag_id: str) -> str:
    """What Airflow says of the DAG (stale, import errors) and the ends of the dag-processor's and
    api-server's logs: why its page may show no Trigger button."""
    dag = server.api(f"/api/v2/dags/{dag_id}")
    errors = server.api("/api/v2/importErrors")["import_errors"]
    parts = [f"{dag_id}: is_stale={dag.get('is_stale')} has_import_errors={dag.get('has_import_errors')}"]
    parts += [f"import error in {e.get('filename')}: {e.get('stack_trace', '')[-1500:]}" for e in errors]
    for component in ("dag-processor", "api-server"):
        parts.append(f"--- {component}.log:\n{server.log_tail(component, 25)}")
    return "\n".join(parts)


def open_trigger_form(page: Any, server: AirflowServer, shots: Shots, dag_id: str) -> None:
    """The DAG's page, its Trigger button clicked. Airflow hides the button of a DAG it marked
    stale, as it does every DAG of a file whose parse failed, until a parse succeeds again: the
    DAG must be active first (an import error that stays fails here, with its text). The page gets
    PAGE_TIMEOUT_S to draw (CI, 2026-11-30: the migrate DAG's page showed no button for 30 s in
    two tests)."""

    def active() -> bool:
        dag = server.api(f"/api/v2/dags/{dag_id}")
        if dag.get("is_stale"):
            print(
                f"{dag_id} is stale (has_import_errors={dag.get('has_import_errors')}): waiting for a parse"
            )
        return not dag.get("is_stale")

    until(f"{dag_id} is active in Airflow", 180, active, every=3)
    page.goto(f"{server.url}/dags/{dag_id}")
    from playwright.sync_api import TimeoutError as PageTimeout

    try:
        page.get_by_role("button", name="Trigger").click(timeout=PAGE_TIMEOUT_S * 1000)
    except PageTimeout as exc:
        shots.take(page, f"{dag_id}-no-trigger-button")
        raise AssertionError(
            f"{dag_id}'s page showed no Trigger button within {PAGE_TIMEOUT_S}s:\n"
            + dag_report(server, dag_id)
        ) from exc


def trigger(
    page: Any,
    server: AirflowServer,
    shots: Shots,
    dag_id: str,
    fill: dict[str, str],
    *,
    choose: dict[str, str] | None = None,
    on: tuple[str, ...] = (),
    off: tuple[str, ...] = (),
    shot: str | None = None,
) -> str:
    """Trigger `dag_id` from its form as a person does: each param in `fill` typed into the field
    titled as the DAG says, each in `choose` picked from its drop-down, the switches in `on`
    checked to be on (their default), those in `off` switched off; returns the new run's id.
    Airflow accepts the trigger: whatever the form holds is read by the run's first task."""
    params = server.api(f"/api/v2/dags/{dag_id}/details")["params"]
    open_trigger_form(page, server, shots, dag_id)
    dialog = page.get_by_role("dialog")
    dialog.get_by_text("Run Parameters").wait_for()
    for key, value in fill.items():
        box = field(dialog, params[key]["schema"]["title"])
        box.fill(value)
        assert box.input_value() == value
    for key, option in (choose or {}).items():
        field(dialog, params[key]["schema"]["title"]).click(force=True)  # the drop-down's own box
        page.keyboard.type(option[:4])
        page.get_by_role("option", name=option, exact=True).click()
    for key in on:
        assert field(dialog, params[key]["schema"]["title"]).is_checked(), (
            f"{dag_id}: {key} is off by default"
        )
    for key in off:
        switch = field(dialog, params[key]["schema"]["title"])
        label(dialog, params[key]["schema"]["title"]).click()
        assert not switch.is_checked(), f"{dag_id}: {key} did not switch off"
    shots.take(page, shot or f"{dag_id}-form")
    button = dialog.get_by_role("button", name="Trigger")
    assert button.is_enabled(), f"{dag_id}: the form does not let the run be triggered"
    button.click()
    page.wait_for_url(re.compile(rf".*/dags/{dag_id}/runs/[^/]+$"))
    run_id = unquote(page.url.rsplit("/runs/", 1)[1])
    conf = server.api(run_path(dag_id, run_id))["conf"]
    assert {k: conf[k] for k in fill} == fill and {k: conf[k] for k in choose or {}} == (choose or {})
    assert all(conf[k] is False for k in off)
    step_away(page)
    return run_id


def step_away(page: Any) -> None:
    """Leave Airflow's pages while the test waits on the API for a run, as a script would: the
    run's view refreshes itself every 3 s while the run runs (Airflow's auto_refresh_interval), and
    chromium drawing it again and the api-server answering took CPU from everything else the
    suite runs. Each test opens the page it looks at next."""
    page.goto("about:blank")


def wait_for_input(server: AirflowServer, dag_id: str, run_id: str, task_id: str, timeout: float) -> None:
    def asking() -> bool:
        states = task_states(server, dag_id, run_id)
        if "failed" in states.values() or "upstream_failed" in states.values():
            raise AssertionError(failure_report(server, dag_id, run_id))
        return states.get(task_id) == "awaiting_input"

    until(f"{dag_id} {task_id} waits for input", timeout, asking, every=3)


def deferral_taken(server: AirflowServer, dag_id: str, run_id: str, task_id: str) -> None:
    """Wait until the scheduler has taken the executor's report of the task's deferral (its
    "awaiting input" try). Airflow 3.3 fails a try answered before that (apache/airflow 72716,
    docs/reference/limits.md): the report, drained late, reads as the resumed try's end. The
    worker reports about 5 s after the task deferred, later under load, and the tests answered
    sooner than that: twice in one run, so that the retry failed too. An operator answers later."""
    try_number = server.api(run_path(dag_id, run_id) + f"/taskInstances/{task_id}")["try_number"]
    report = (
        f"Received executor event with state success for task instance TaskInstanceKey(dag_id='{dag_id}', "
        f"task_id='{task_id}', run_id='{run_id}', try_number={try_number},"
    )
    log = server.logs / "scheduler.log"
    until(
        f"the scheduler took {task_id}'s deferral",
        120,
        lambda: report in log.read_text(errors="replace"),
        every=0.5,
    )


def required_action(page: Any, server: AirflowServer, dag_id: str, run_id: str, task_id: str) -> str:
    """Open the task's Required Action (once the scheduler has taken its deferral, see
    deferral_taken); the text it shows."""
    deferral_taken(server, dag_id, run_id, task_id)
    page.goto(f"{server.url}/dags/{dag_id}/runs/{quote(run_id, safe='')}/tasks/{task_id}")
    page.get_by_text("Required Action").first.click()
    page.get_by_role("button", name="Approve", exact=True).wait_for()
    return page.locator("body").inner_text()


def answer(page: Any, choice: str) -> None:
    page.get_by_role("button", name=choice, exact=True).click()
    page.get_by_text("Response received").wait_for()


def answer_approval(page: Any, server: AirflowServer, dag_id: str, run_id: str, choice: str) -> int:
    """Choose `choice` on the open Required Action of `approve`, and again if Airflow failed the
    answered try and its one retry asks again, as an operator then does (docs/reference/limits.md:
    apache/airflow 72716). Returns how many times it was asked (1 or 2)."""
    answer(page, choice)
    asked = 1

    def next_step() -> str | None:
        ti = server.api(run_path(dag_id, run_id) + "/taskInstances/approve")
        if ti["state"] == "awaiting_input" and ti["try_number"] > asked:
            return "asked again"
        return ti["state"] if ti["state"] in ("success", "skipped", "failed", "upstream_failed") else None

    while until(f"{dag_id} approve answered", 240, next_step, every=1) == "asked again":
        assert asked < 2, failure_report(server, dag_id, run_id)
        required_action(page, server, dag_id, run_id, "approve")
        answer(page, choice)
        asked += 1
    step_away(page)
    return asked


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
