"""The status page's sections below the flows: migrations and verifications, the worst topics,
failed partitions, and the clusters with their upstreams' heartbeats.

A heartbeat read from a cluster that no longer answers is shown as stale, whatever its age: the
page cannot know whether newer ones arrived, and "healthy" would claim what it does not know.
"""

from __future__ import annotations

import heapq
import html
from typing import Any

from mirrorflow.airflow.status_cells import (
    LEVEL_WORD,
    MUTED_DASH,
    badge,
    count_cell,
    lag_cell,
    number,
    sparkline,
    table,
    table_row,
    time_html,
    utc,
)
from mirrorflow.airflow.status_flows import PageView
from mirrorflow.airflow.status_links import (
    MIGRATE_DAG_ID,
    MIGRATE_TASKS,
    VERIFY_TASKS,
    link,
    log_links,
    paused_text,
    run_dag,
    run_url,
    summary_dags,
    task_url,
    upstream_heartbeat_dags,
    verification_dags,
)
from mirrorflow.airflow.status_seconds import topic_seconds
from mirrorflow.control.mirror_status import ClusterStatus, FlowStatus, MirrorStatus
from mirrorflow.control.status_copy import VERDICT_LEVEL, removed_figures
from mirrorflow.control.status_health import (
    BAD,
    HEARTBEAT_ALLOWANCE,
    HEARTBEAT_RUN_START_S,
    OK,
    WARN,
    Health,
    heartbeat_expected_s,
    span,
)

# Rows of each table per flow: a summary holds at most 50 topics and 50 failed partitions, the
# lag now may name every topic of the flow (20,000 of them): the worst are shown, with a count.
PAGE_ROWS = 50


def upstream_health(view: PageView, cluster: ClusterStatus, via: str | None, age_s: float | None) -> Health:
    """The newest heartbeat from an upstream against its emit interval plus each hop's delivery
    (status_health.heartbeat_expected_s), with the heartbeat DAG's run start-up allowed."""
    expected = None if view.config is None else heartbeat_expected_s(view.config, cluster.alias, via)
    return view.thresholds.grade(
        age_s,
        expected,
        "newest heartbeat",
        allowance_s=HEARTBEAT_RUN_START_S,
        allowance_why=HEARTBEAT_ALLOWANCE,
    )


def _fate(entry: dict[str, Any]) -> str:
    """A history entry's badge: a verification's verdict; a migration done, rejected or failed."""
    if entry["kind"] == "verification":
        verdict = str(entry.get("verdict"))
        return badge(VERDICT_LEVEL.get(verdict, BAD), verdict)
    if entry.get("done"):
        return badge(OK, "done (dry run)" if entry.get("dry_run") else "done", entry.get("outcome"))
    if entry.get("approval") == "rejected":
        return badge(WARN, "rejected", entry.get("outcome"))
    return badge(BAD, "not done", entry.get("outcome"))


def history_table(view: PageView, status: MirrorStatus) -> str:
    """Each flow's newest migrations and verifications (mirror_status.history), with their verdicts
    and links to their runs and logs."""
    rows = []
    for flow in status.flows:
        if not flow.history:
            rows.append(
                table_row(
                    [html.escape(flow.flow), '<span class="muted">no migration or verification yet</span>']
                    + [""] * 5,
                    flow,
                )
            )
            continue
        for entry in flow.history:
            run_id = str(entry.get("run_id"))
            migration = entry["kind"] == "migration"
            dag = run_dag([MIGRATE_DAG_ID] if migration else verification_dags(flow), run_id, view.facts)
            run = html.escape(run_id)
            if dag:
                tasks = MIGRATE_TASKS if migration else VERIFY_TASKS
                run = (
                    link(run_url(dag, run_id), run_id, f"{dag}: the DAG run in Airflow")
                    + f'<div class="sub">{log_links(dag, run_id, tasks)}</div>'
                )
            if migration:
                figures = (
                    f"{number(entry.get('records') or 0)} record(s) copied; verification "
                    f"{entry.get('verdict') or 'not run'}; {entry.get('groups_moved', 0)} group(s) moved"
                )
                if entry.get("groups_blocked"):
                    figures += f", {entry['groups_blocked']} blocked"
                note = html.escape(entry.get("outcome") or "")
            else:
                figures = (
                    f"{number(entry.get('matched', 0))} equal, {count_cell(entry.get('wrong_total', 0))} wrong, "
                    f"{number(entry.get('pending', 0))} not copied yet"
                )
                figures += "".join(f", {html.escape(part)}" for part in removed_figures(entry))
                note = (
                    "all records"
                    if entry.get("sample") is None
                    else f"sample {float(entry['sample']) * 100:.6g}%"
                )
            rows.append(
                table_row(
                    [
                        html.escape(flow.flow),
                        "migration" if migration else "verification",
                        time_html(entry.get("at_ms"), view.now_ms),
                        f'<span class="mono">{run}</span>',
                        _fate(entry),
                        figures,
                        f'<span class="sub">{note}</span>',
                    ],
                    flow,
                )
            )
    headers = ["Flow", "What", "Finished", "Run", "Verdict", "Figures", "Notes"]
    return table("Migrations and verifications, the newest first", headers, rows, "no flow")


def topic_rows(flow: FlowStatus, limit: int = PAGE_ROWS) -> tuple[list[dict[str, Any]], int]:
    """The flow's `limit` worst topics (failed partitions, then offsets lost, then lag now, then
    lag left), from its lag now (every topic) and its last run's topic rows (the worst 50), and
    how many topics there are in all. Where the lag now was measured (and found topics), it names
    the flow's topics as they are (its topic filter and the source now): a topic the last run
    copied that has left the flow since is not shown (a micro-batch window's summary, which holds it, comes only at
    the window's end)."""
    run = flow.last_run or {}
    run_topics: dict[str, dict[str, Any]] = run.get("topics") or {}
    lag = flow.lag or {}
    if lag:
        run_topics = {name: row for name, row in run_topics.items() if name in lag}
    names = set(lag) | set(run_topics)

    def key(name: str) -> tuple:
        row = run_topics.get(name, {})
        return (
            -(row.get("failed") or 0),
            -(row.get("lost_to_retention") or 0),
            -lag.get(name, 0),
            -(row.get("lag_left") or 0),
            name,
        )

    shown = heapq.nsmallest(limit, names, key=key)
    total = len(names) if lag else max(len(names), run.get("topics_count") or 0)
    return [{"topic": name, "lag": lag.get(name), **run_topics.get(name, {})} for name in shown], total


def topics_table(view: PageView, status: MirrorStatus) -> str:
    rows = []
    for flow in status.flows:
        shown, total = topic_rows(flow)
        for row in shown:
            history = view.history.topic(flow.flow, row["topic"])
            now = MUTED_DASH if row["lag"] is None else lag_cell(row["lag"])
            in_run = "partitions" in row
            rows.append(
                table_row(
                    [
                        html.escape(flow.flow),
                        f'<span class="mono">{html.escape(row["topic"])}</span>',
                        f"{now} {sparkline(history, 'lag now')}{topic_seconds(flow.window, row['topic'])}",
                        number(row.get("partitions", "-")) if in_run else MUTED_DASH,
                        number(row.get("records", "-")) if in_run else MUTED_DASH,
                        count_cell(row.get("failed")) if in_run else MUTED_DASH,
                        count_cell(row.get("lost_to_retention")) if in_run else MUTED_DASH,
                        lag_cell(row.get("lag_left")) if "lag_left" in row else MUTED_DASH,
                    ],
                    flow,
                )
            )
        if total > len(shown):
            rows.append(
                f'<tr><td>{html.escape(flow.flow)}</td><td colspan="7" class="muted">… and '
                f"{total - len(shown):,} more topic(s): the flow's row counts every one</td></tr>"
            )
    headers = [
        "Flow",
        "Topic",
        "Lag now",
        "Partitions copied",
        "Records",
        "Failed partitions",
        "Lost to retention",
        "Lag left",
    ]
    return table(
        "Topics, the worst first (lag now and the last run)", headers, rows, "no topic replicated yet"
    )


def failed_table(view: PageView, status: MirrorStatus) -> str:
    rows = []
    for flow in status.flows:
        run = flow.last_run or {}
        failed = (run.get("failed") or [])[:PAGE_ROWS]
        dag = run_dag(summary_dags(flow), str(run.get("run_id")), view.facts) if run else None
        for p in failed:
            where = f"{p.get('topic')}-{p.get('partition')}"
            log = link(task_url(dag, str(run["run_id"]), "copy"), "copy log") if dag else ""
            rows.append(
                table_row(
                    [
                        html.escape(flow.flow),
                        f'<span class="mono">{html.escape(where)}</span>',
                        f'<span class="fg-bad">{html.escape(str(p.get("error")))}</span>',
                        log,
                    ],
                    flow,
                )
            )
        more = (run.get("totals", {}).get("failed_partitions") or 0) - len(failed)
        if more > 0:
            rows.append(
                f'<tr><td>{html.escape(flow.flow)}</td><td colspan="3" class="muted">… and {more:,} more '
                "failed partition(s): the run's report lists every one</td></tr>"
            )
    return table("Failed partitions of the last runs", ["Flow", "Partition", "Error", "Log"], rows, "none")


def clusters_table(view: PageView, status: MirrorStatus) -> str:
    rows = []
    for cluster in status.clusters:
        alias = html.escape(cluster.alias) + (" (last known)" if cluster.stale else "")
        if cluster.error and not cluster.as_of_ms:
            rows.append(
                table_row(
                    [alias, f'<span class="fg-bad">{html.escape(cluster.error)}</span>', "", "", ""], cluster
                )
            )
            continue
        if not cluster.upstreams:
            text = "no upstream clusters"
            paused = (
                []
                if view.config is None
                else [
                    d for d in upstream_heartbeat_dags(view.config, cluster.alias) if d in view.facts.paused
                ]
            )
            note = "".join(
                f'<div class="hint-inline">{html.escape(paused_text("heartbeat", d))}</div>' for d in paused
            )
            rows.append(table_row([alias, f'<span class="muted">{text}</span>{note}', "", "", ""], cluster))
        for u in cluster.upstreams:
            health = upstream_health(view, cluster, u.via, u.age_s)
            if cluster.stale or cluster.error:
                since = utc(cluster.unreachable_since_ms) if cluster.unreachable_since_ms else "the last read"
                health = Health(
                    WARN,
                    f"{cluster.alias} does not answer since {since}: this is the newest heartbeat read before, "
                    "no newer one can be read",
                    label="stale",
                )
            beat = (
                '<span class="muted">none</span>'
                if u.last_heartbeat_ms is None
                else time_html(u.last_heartbeat_ms, view.now_ms)
            )
            cause = f'<div class="sub cause">{html.escape(health.cause)}</div>' if health.cause else ""
            rows.append(
                table_row(
                    [
                        alias,
                        html.escape(u.alias),
                        str(u.hops),
                        f"{badge(health.level, health.label or LEVEL_WORD[health.level], health.why)} {beat}{cause}",
                        f'<span class="mono">{html.escape(u.via or "-")}</span>',
                    ],
                    cluster,
                )
            )
    return table("Clusters", ["Cluster", "Upstream", "Hops", "Newest heartbeat", "Via"], rows, "no cluster")


def legend(view: PageView) -> str:
    """What each badge means; every age is judged against an interval, by the same factors."""
    t = view.thresholds
    ages = f"green under {t.amber:g}× the interval it is expected at, amber under {t.red:g}×, red beyond"
    return (
        '<div class="legend"><p><strong>Copy</strong> (is the flow copying): '
        '<span class="badge ok">copying</span> its newest sign of copying is recent: a batch flow\'s '
        "last run against its replication schedule; a micro-batch flow's running window, whose tasks "
        "store their status every few seconds (without one: its last window's summary against the "
        'window\'s length); <span class="badge warn">late</span> / <span class="badge bad">late</span> '
        f"older than that ({ages}); "
        '<span class="badge bad">failed</span> its last finished run failed, or the last run has failed '
        'partitions or offsets lost to retention; <span class="badge bad">unreadable</span> nothing of '
        'the flow could be read; <span class="badge warn">stale</span> values as last read from a cluster '
        'that does not answer; <span class="badge unknown">no run yet</span>, '
        '<span class="badge unknown">no schedule</span> (a batch flow run only by hand).</p>'
        "<p><strong>Verification</strong> (the last verification's verdict, whenever it ran; it never "
        'colours the copy): <span class="badge ok">verified</span>, <span class="badge ok">sample '
        'passed</span>, <span class="badge warn">incomplete</span> nothing found wrong, but not all compared, '
        '<span class="badge bad">failed</span> records wrong on the target, or partitions not read; '
        '<span class="badge unknown">never verified</span>.</p>'
        '<p><strong>Heartbeats</strong>: <span class="badge ok">healthy</span> younger than expected, '
        '<span class="badge warn">late</span> / <span class="badge bad">late</span> older '
        f"({ages}, each {span(HEARTBEAT_RUN_START_S)} later: once per heartbeat run, Airflow starts the "
        "next). A heartbeat written into a cluster is expected every emit.heartbeats.interval.seconds "
        "of its job, whatever any schedule says; one from an upstream cluster, that interval plus, per "
        "replication hop, the flow's schedule (batch) or its mirrorflow.microbatch.interval.ms "
        '(micro-batch). <span class="badge warn">stale</span> as last read from a cluster that does not '
        'answer; <span class="badge unknown">none yet</span>.</p>'
        "<p>The cause is under each badge; hover for the rule it was judged by. Lag and offsets not "
        "copied yet are work to do, never red.</p></div>"
    )
