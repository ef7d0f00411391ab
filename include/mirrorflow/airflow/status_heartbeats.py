"""The status page's heartbeats written into each cluster, and the heartbeat DAG's run behind them.

Each heartbeat job (pair S->T of `MirrorConfig.heartbeat_flows`) writes into T's `heartbeats`
every `emit.heartbeats.interval.seconds`; its newest heartbeat is judged against that interval
alone (status_health: whatever any replication schedule says), so a heartbeat DAG run that stopped
shows within a minute or so, not when an hourly slot comes round. Beside them, the heartbeat DAG's
newest run as Airflow has it; when no run of it is emitting (its newest run failed, or ended longer
ago than the pause between two runs) and it is not paused, a hint at the top of the page says so
and what to do: the DAG runs once per period (an hour by default), so without a trigger no
heartbeat is written until the next slot.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from datetime import timedelta

from mirrorflow.airflow.status_cells import MUTED_DASH, badge, state_badge, table, table_row, time_html
from mirrorflow.airflow.status_flows import PageView, health_fields
from mirrorflow.airflow.status_links import HEARTBEATS_DAG_ID, AirflowFacts, link, run_url, task_url
from mirrorflow.config import MirrorConfig
from mirrorflow.control.heartbeats import heartbeat_period
from mirrorflow.control.mirror_status import MirrorStatus
from mirrorflow.control.status_health import (
    HEARTBEAT_ALLOWANCE,
    HEARTBEAT_RUN_START_S,
    UNKNOWN,
    WARN,
    Health,
    heartbeat_job_expected_s,
    span,
)
from mirrorflow.replicate.until import utc_text


@dataclass(frozen=True)
class HeartbeatJob:
    """One heartbeat job as the page shows it: pair source->target, into the target's `heartbeats`."""

    source: str
    target: str
    newest_ms: int | None
    health: Health


def heartbeat_jobs(view: PageView, status: MirrorStatus) -> list[HeartbeatJob]:
    """Every heartbeat job of the config, and any other found writing into a cluster (MM2's), each
    with its newest heartbeat judged against its emit interval, aged at the status's read (as an
    upstream's heartbeat is: a cluster's last values keep ageing while it does not answer)."""
    config = view.config
    pairs = [(f.source, f.target) for f in config.heartbeat_flows] if config is not None else []
    found: dict[tuple[str, str], int] = {}
    for cluster in status.clusters:
        for pair, newest in cluster.heartbeat_jobs.items():
            source, _, target = pair.partition("->")
            found[(source, target)] = newest
    pairs += sorted(p for p in found if p not in pairs)
    jobs = []
    for source, target in pairs:
        cluster = next((c for c in status.clusters if c.alias == target), None)
        if cluster is None:  # a status of other clusters only
            continue
        newest = found.get((source, target))
        expected = None if config is None else heartbeat_job_expected_s(config, source, target)
        age = None if newest is None else max(0.0, (status.generated_ms - newest) / 1000)
        if cluster.stale or cluster.error:
            if newest is None:
                continue  # nothing read, nothing to say beyond the cluster's banner
            why = f"{target} does not answer: this is the newest heartbeat read before, no newer one can be read"
            health = Health(WARN, why, "stale", f"{target} does not answer", age, expected)
        elif newest is None:
            why = f"no heartbeat in `heartbeats` on {target} yet"
            health = Health(UNKNOWN, why, "none yet", why, None, expected)
        else:
            health = view.thresholds.grade(
                age,
                expected,
                "newest heartbeat",
                allowance_s=HEARTBEAT_RUN_START_S,
                allowance_why=HEARTBEAT_ALLOWANCE,
            )
        jobs.append(HeartbeatJob(source, target, newest, health))
    return jobs


def heartbeats_document(view: PageView) -> list[dict[str, object]]:
    """The heartbeat jobs as the page's table shows them, for the JSON."""
    if view.status is None:
        return []
    return [
        {"job": f"{j.source}->{j.target}", "newest_ms": j.newest_ms, **health_fields(j.health)}
        for j in heartbeat_jobs(view, view.status)
    ]


def heartbeats_table(view: PageView, status: MirrorStatus) -> str:
    """Each heartbeat job's newest heartbeat with its badge and cause, then the heartbeat DAG's
    newest run."""
    rows = []
    for job in heartbeat_jobs(view, status):
        health, every = job.health, job.health.expected_s
        beat = "" if job.newest_ms is None else " " + time_html(job.newest_ms, view.now_ms)
        cause = f'<div class="sub cause">{html.escape(health.cause)}</div>' if health.cause else ""
        cells = [
            f"{html.escape(job.source)} → {html.escape(job.target)}",
            f'<span class="mono">heartbeats</span> on {html.escape(job.target)}',
            MUTED_DASH if every is None else span(every),
            f"{badge(health.level, str(health.label), health.why)}{beat}{cause}",
        ]
        rows.append(table_row(cells, status.cluster(job.target)))
    shown = table(
        "Heartbeats written into each cluster",
        ["Heartbeat job", "Into", "Every", "Newest heartbeat"],
        rows,
        "no heartbeat job",
    )
    return shown + heartbeat_run_line(view)


def heartbeat_run_line(view: PageView) -> str:
    """The heartbeat DAG's newest run: its state, when, its log; nothing without Airflow to ask."""
    if view.config is None or not view.config.heartbeat_flows or view.facts.dags is None:
        return ""
    dag = HEARTBEATS_DAG_ID
    last = view.facts.last_run.get(dag)
    if last is None:
        return f'<p class="meta">The heartbeat DAG {html.escape(dag)} has no run yet.</p>'
    run = link(run_url(dag, last.run_id), last.run_id, f"{dag}: the DAG run in Airflow")
    log = link(task_url(dag, last.run_id, "emit"), "emit log", "the emit task's log")
    when = "ended" if last.end_ms else "started"
    stopped = stopped_text(view.config, view.facts, view.now_ms)
    note = f' <span class="fg-bad">{html.escape(stopped)}</span>' if stopped else ""
    return (
        f'<p class="meta">Heartbeat DAG {html.escape(dag)}: newest run {state_badge(last.state)} '
        f'<span class="mono">{run}</span> {when} {time_html(last.at_ms, view.now_ms)} · {log}.{note}</p>'
    )


def stopped_text(config: MirrorConfig, facts: AirflowFacts, now_ms: int) -> str | None:
    """Why no heartbeat run is emitting now, and what to do; None while one runs, is about to
    start, or Airflow was not asked (or the DAG is paused: the paused hint says so)."""
    dag = HEARTBEATS_DAG_ID
    last = facts.last_run.get(dag)
    if facts.dags is None or dag in facts.paused or dag not in facts.dags or last is None:
        return None
    if last.state in ("running", "queued"):
        return None
    intervals = [f.emit_heartbeats_interval for f in config.heartbeat_flows if f.emit_heartbeats_interval]
    if not intervals:
        return None
    runs = timedelta(seconds=min(f.heartbeats_run_seconds for f in config.heartbeat_flows))
    period = heartbeat_period(intervals, runs).total_seconds()
    pause_s = min(i.total_seconds() for i in intervals) + HEARTBEAT_RUN_START_S
    ended = f" at {utc_text(last.at_ms)}" if last.at_ms else ""
    if last.state == "failed":
        what = f"its newest run {last.run_id} failed{ended}"
    elif last.at_ms and (now_ms - last.at_ms) / 1000 > pause_s:
        what = f"its newest run {last.run_id} ended{ended} ({last.state}) and no run followed"
    else:
        return None
    return (
        f"no heartbeat run is emitting: {what}; the next starts at the DAG's next slot (it runs every "
        f"{span(period)}): trigger {dag} in Airflow to emit heartbeats now"
    )


def heartbeat_run_hints(
    config: MirrorConfig | None, facts: AirflowFacts, now_ms: int
) -> list[dict[str, str]]:
    """The hint at the top of the page (and in the JSON's `hints`) when no heartbeat run emits."""
    if config is None or not config.heartbeat_flows:
        return []
    text = stopped_text(config, facts, now_ms)
    if text is None:
        return []
    return [
        {
            "kind": "heartbeat-run",
            "dag_id": HEARTBEATS_DAG_ID,
            "subject": HEARTBEATS_DAG_ID,
            "text": f"the heartbeat DAG {HEARTBEATS_DAG_ID}: {text}",
        }
    ]
