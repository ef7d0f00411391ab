"""The status page's flows: each flow's copy state, its last verification's verdict, and its row.

The two badges mean one thing each (control.status_copy): **Copy** says whether the flow copies
(copying, late, failed, ...), judged by what the flow does (its schedule, or its micro-batch
window); **Verification** is the verdict of its last verification, which never colours the copy.
Each shows its cause under it, not only on hover.

A flow's last run is the newest run of its replication DAG as Airflow has it, whatever it
wrote: a run that failed before it could store a summary (a target that is down fails the plan)
is the last run all the same, shown red with its logs, beside the last run that succeeded. The
figures (records, failed partitions, lag left) are those of the newest summary in Kafka, named
with the run that wrote them, and the last run that copied any record is shown on its own: after
an idle run every figure is 0, and when records last moved is what a person asks next.
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from typing import Any

from mirrorflow.airflow.status_cells import (
    MUTED_DASH,
    badge,
    badge_with_cause,
    byte_rate,
    count_cell,
    lag_cell,
    number,
    sparkline,
    state_badge,
    table,
    table_row,
    time_html,
)
from mirrorflow.airflow.status_links import (
    REPLICATE_TASKS,
    AirflowFacts,
    dag_url,
    link,
    log_links,
    replicate_dag_id,
    run_dag,
    run_url,
    summary_dags,
    task_url,
)
from mirrorflow.airflow.status_seconds import flow_seconds
from mirrorflow.config import MirrorConfig
from mirrorflow.control.mirror_status import FlowStatus, MirrorStatus
from mirrorflow.control.status_copy import copy_health, verification_health
from mirrorflow.control.status_health import Health, Thresholds, flow_config
from mirrorflow.control.status_snapshots import LagHistory
from mirrorflow.replicate.report import achieved_bytes_per_second
from mirrorflow.replicate.until import utc_text


@dataclass
class PageView:
    """Everything one rendering shows."""

    status: MirrorStatus | None
    snapshot: dict[str, Any]
    banners: list[dict[str, Any]]
    now_ms: int
    history: LagHistory = field(default_factory=LagHistory)
    facts: AirflowFacts = field(default_factory=AirflowFacts)
    config: MirrorConfig | None = None
    thresholds: Thresholds = field(default_factory=Thresholds)
    hints: list[dict[str, str]] = field(default_factory=list)


def failed_run_problem(view: PageView, flow: FlowStatus) -> str | None:
    """Why the flow's last finished Airflow run makes it red: it failed (with when it last
    succeeded). A run under way after it does not clear that until it succeeds."""
    dag = replicate_dag_id(str(flow.source), str(flow.target))
    last = view.facts.last_finished.get(dag)
    if last is None or last.state != "failed":
        return None
    success = view.facts.last_success.get(dag)
    since = (
        f"the last successful run ended {utc_text(success.at_ms)}"
        if success is not None and success.at_ms
        else "no run has succeeded yet"
    )
    when = f" at {utc_text(last.at_ms)}" if last.at_ms else ""
    return f"the last run {last.run_id} failed{when}; {since}"


def flow_health(view: PageView, flow: FlowStatus) -> Health:
    """The flow's copy state (control.status_copy.copy_health) against the flow as the config
    has it now, red for a failed last Airflow run."""
    return copy_health(
        flow,
        flow_config(view.config, str(flow.source), str(flow.target)),
        failed_run=failed_run_problem(view, flow),
        now_ms=view.now_ms,
        thresholds=view.thresholds,
        read_ms=None if view.status is None else view.status.generated_ms,
    )


def health_fields(health: Health) -> dict[str, Any]:
    """A badge as the JSON gives it: its state, colour, cause, rule and the age it judged."""
    return {
        "state": health.label,
        "level": health.level,
        "cause": health.cause,
        "rule": health.why,
        "age_s": None if health.age_s is None else round(health.age_s, 3),
        "expected_s": health.expected_s,
    }


def flows_health_document(view: PageView) -> dict[str, dict[str, Any]]:
    """Per flow its copy badge and its verification badge, as the page shows them."""
    if view.status is None:
        return {}
    return {
        flow.flow: {
            "copy": health_fields(flow_health(view, flow)),
            "verification": health_fields(verification_health(flow)),
        }
        for flow in view.status.flows
    }


def verification_cell(view: PageView, flow: FlowStatus) -> str:
    """The last verification's verdict, its figures and when its summary was written."""
    health = verification_health(flow)
    if flow.last_verification is None:
        return badge(health.level, str(health.label), health.why)
    when = time_html(flow.last_verification_ms, view.now_ms)
    return f'{badge_with_cause(health)}<div class="sub">{when}</div>'


def last_run_cell(view: PageView, flow: FlowStatus) -> str:
    """The replication DAG's newest run: its state, when, its logs; and, when it did not
    succeed, when the last run that did ended."""
    dag = replicate_dag_id(str(flow.source), str(flow.target))
    last = view.facts.last_run.get(dag)
    if last is None:
        return '<span class="muted">no Airflow run</span>' if view.facts.dags is not None else MUTED_DASH
    shown = link(run_url(dag, last.run_id), last.run_id, f"{dag}: the DAG run in Airflow")
    cell = (
        f"{state_badge(last.state)} {time_html(last.at_ms, view.now_ms)}"
        f'<div class="sub mono">{shown}</div><div class="sub">{log_links(dag, last.run_id, REPLICATE_TASKS)}</div>'
    )
    if last.state != "success":
        success = view.facts.last_success.get(dag)
        cell += (
            f'<div class="sub">last success {time_html(success.at_ms, view.now_ms)}</div>'
            if success is not None
            else '<div class="sub">no successful run yet</div>'
        )
    return cell


def figures_cell(view: PageView, flow: FlowStatus) -> str:
    """The run the figures are of (the newest summary), linked where Airflow has it."""
    run = flow.last_run or {}
    run_id = str(run.get("run_id", ""))
    dag = run_dag(summary_dags(flow), run_id, view.facts)
    when = time_html(flow.last_run_ms, view.now_ms)
    if dag is None:
        return f'{when}<div class="sub mono" title="not an Airflow run (started from the CLI?)">{html.escape(run_id)}</div>'
    shown = link(run_url(dag, run_id), run_id, f"{dag}: the DAG run in Airflow")
    logs = link(task_url(dag, run_id, "report"), "report log", "the report task's log")
    return f'{when}<div class="sub mono">{shown}</div><div class="sub">{logs}</div>'


def running_window(flow: FlowStatus) -> dict[str, Any] | None:
    """A micro-batch flow's window whose tasks stored figures after the newest run summary: it is
    copying now, and its figures are newer than any summary's (a window's comes at its end)."""
    window = flow.window
    if window is None or (flow.last_run_ms is not None and window["at_ms"] <= flow.last_run_ms):
        return None
    return window


def window_cells(view: PageView, window: dict[str, Any]) -> list[str]:
    """Figures of, Records, and the rest of a flow's row while a window runs: what it copied so far."""
    when = time_html(window["at_ms"], view.now_ms)
    figures = (
        f'{when}<div class="sub mono">{html.escape(str(window["run_id"]))}</div>'
        f'<div class="sub">the running window, {window["tasks"]} task(s), as its tasks last said</div>'
    )
    records = number(window["records"]) + '<div class="sub">so far</div>'
    return [figures, records, window_rate_cell(window)]


def window_rate_cell(window: dict[str, Any]) -> str:
    """The running window's rate over about the last minute, all its tasks together (a window's
    status records of an older version have none: a dash)."""
    if "bytes_per_s" not in window:
        return MUTED_DASH
    per_s = f"{window['records_per_s']:,.0f} records/s"
    return f'{byte_rate(window["bytes_per_s"])}<div class="sub" title="over about the last minute">{per_s}</div>'


def last_copy_cell(view: PageView, flow: FlowStatus) -> str:
    window = running_window(flow)
    if window is not None and window["records"]:
        return f"{number(window['records'])} record(s) by the running window {time_html(window['at_ms'], view.now_ms)}"
    copy = (flow.last_run or {}).get("last_copy")
    if not copy:
        return '<span class="muted">none recorded</span>'
    return f"{number(copy['records'])} record(s) {time_html(copy['at_ms'], view.now_ms)}"


def rate_cell(flow: FlowStatus) -> str:
    """The byte rate the last run's copy reached, beside the flow's configured cap: a run held
    near its cap for long is a sign the cap, not the link, sets how far behind the flow falls."""
    achieved = achieved_bytes_per_second(flow.last_run or {})
    cap = flow.max_bytes_per_second
    shown = MUTED_DASH if achieved is None else byte_rate(achieved)
    limit = f"cap {byte_rate(cap)}" if cap else "no cap"
    return f'{shown}<div class="sub" title="mirrorflow.replicate.max.bytes.per.second">{limit}</div>'


def flows_table(view: PageView, status: MirrorStatus) -> str:
    rows = []
    for flow in status.flows:
        health = flow_health(view, flow)
        dag = replicate_dag_id(str(flow.source), str(flow.target))
        name = link(dag_url(dag), flow.flow, f"the DAG {dag}") + (" (last known)" if flow.stale else "")
        if dag in view.facts.paused:
            name += ' <span class="badge warn" title="unpause it in Airflow">paused</span>'
        cells = [name, badge_with_cause(health), verification_cell(view, flow)]
        if flow.lag is None:
            cells.append(MUTED_DASH + flow_seconds(flow.window))
        else:
            cells.append(
                f"{lag_cell(sum(flow.lag.values()))} {sparkline(view.history.flow(flow.flow), 'lag now')}"
                + flow_seconds(flow.window)
            )
        cells.append(last_run_cell(view, flow))
        if flow.error and not flow.last_run and not flow.lag and not flow.last_verification:
            cells.append(f'<span class="fg-bad">{html.escape(flow.error)}</span>')
            rows.append(table_row(cells + [""] * 7, flow))
            continue
        window = running_window(flow)
        if window is not None:
            # A micro-batch window is copying: its figures so far stand for the flow, not the last
            # summary's (a window writes one only at its end); the columns only a summary has
            # wait for it.
            rows.append(
                table_row(
                    cells + window_cells(view, window) + [MUTED_DASH] * 4 + [last_copy_cell(view, flow)], flow
                )
            )
            continue
        if not flow.last_run:
            rows.append(table_row(cells + ['<span class="muted">no mirrorflow run</span>'] + [""] * 7, flow))
            continue
        run, totals = flow.last_run, flow.last_run.get("totals", {})
        lag_left = (
            "unknown"
            if run.get("lag_unknown")
            else totals.get("lag_left", sum(run.get("lag_left", {}).values()))
        )
        restarted = run.get("restarted_count") or 0
        again = count_cell(restarted)
        if restarted:
            shown = "; ".join(f"{p}: {why}" for p, why in list((run.get("restarted") or {}).items())[:3])
            again += f'<div class="sub">{html.escape(shown)}</div>'
        failed = totals.get("failed_partitions", 0)
        failed_cell = count_cell(failed)
        dag_of_run = run_dag(summary_dags(flow), str(run.get("run_id")), view.facts)
        if dag_of_run:
            failed_cell += (
                f'<div class="sub">{link(task_url(dag_of_run, str(run["run_id"]), "copy"), "copy log")}</div>'
            )
        cells += [
            figures_cell(view, flow),
            number(totals.get("records", 0)),
            rate_cell(flow),
            failed_cell,
            lag_cell(lag_left) if isinstance(lag_left, int) else html.escape(str(lag_left)),
            count_cell(run.get("lost_to_retention") or 0),
            again,
            last_copy_cell(view, flow),
        ]
        rows.append(table_row(cells, flow))
    headers = [
        "Flow",
        "Copy",
        "Verification",
        "Lag now",
        "Last run",
        "Figures of",
        "Records",
        "Byte rate",
        "Failed partitions",
        "Lag left",
        "Lost to retention",
        "Copied again (topic recreated)",
        "Last copy",
    ]
    return table("Flows", headers, rows, "no replication flow is enabled in the config")
