"""The status page's HTML, rendered on the server from one status snapshot, in Airflow's look.

Airflow 3's UI is Chakra UI with Airflow's own palette (airflow/ui/src/theme.ts: Tailwind 4
colours in oklch, a "brand" steel blue, a navy "black"); the page uses the same colour values,
semantic roles (bg, bg.muted, fg, fg.muted, border, {state}.solid/.subtle/.fg), font stack and
small table size as CSS variables, for both colour modes. The UI shows the page in an iframe of
the same origin and sets its colour mode as `class="dark"|"light"` and `color-scheme` on its
<html> (next-themes): the page's script follows that, live, and falls back to
`prefers-color-scheme`; `?theme=dark|light` forces one (for tests and screenshots).

The script also shows every time in the browser's time zone with its age ("3 min ago", the exact
UTC time on hover), and reloads the page's content (`ui?fragment=1`) every refresh interval
unless paused. Nothing here needs Airflow: which DAGs are paused and which run ids are Airflow's
come from an injected `AirflowFacts` reader, absent outside the api-server.
"""

from __future__ import annotations

import heapq
import html
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from mirrorflow.airflow.status_seconds import flow_seconds, topic_seconds
from mirrorflow.config import MirrorConfig
from mirrorflow.control.mirror_client import ClusterStatus, FlowStatus, MirrorStatus
from mirrorflow.control.status_health import (
    BAD,
    OK,
    UNKNOWN,
    WARN,
    Health,
    Thresholds,
    heartbeat_expected_s,
    run_expected_s,
)
from mirrorflow.control.status_snapshots import LagHistory, Point

# Rows of each table per flow: a summary holds at most 50 topics and 50 failed partitions, the
# lag now may name every topic of the flow (20,000 of them): the worst are shown, with a count.
PAGE_ROWS = 50
MIGRATE_DAG_ID = "mirrorflow_migrate"  # mirrorflow.airflow.migrate.MIGRATE_DAG_ID
HEARTBEATS_DAG_ID = "mirrorflow_heartbeats"  # mirrorflow.airflow.maintenance: one for every pair


def replicate_dag_id(source: str, target: str) -> str:
    """As mirrorflow.airflow.replicate names it (a unit test holds the two together)."""
    return f"mirrorflow__{source}__{target}__replicate"


def verify_dag_id(source: str, target: str) -> str:
    return f"mirrorflow__{source}__{target}__verify"


@dataclass(frozen=True)
class AirflowFacts:
    """What Airflow's metadata DB says of the DAGs and runs the page links to. `dags` is None when
    Airflow was not asked (no reader, or it failed): then every link is built from names alone."""

    dags: frozenset[str] | None = None  # DAG ids Airflow knows (not stale)
    paused: frozenset[str] = frozenset()
    runs: dict[tuple[str, str], str] = field(default_factory=dict)  # (dag_id, run_id) -> state


# (dag ids, (dag id, run id) pairs) -> what Airflow knows of them
AirflowReader = Callable[[Sequence[str], Sequence[tuple[str, str]]], AirflowFacts]

# --- links into Airflow's UI (routes of Airflow 3.3's React router) -----------------------------
# The page lives at <base>/mirrorflow/ui inside the UI's iframe: `../` is the UI's base, and links
# open in the whole window (target _top), not inside the iframe.


def dag_url(dag_id: str) -> str:
    return f"../dags/{quote(dag_id, safe='')}"


def run_url(dag_id: str, run_id: str) -> str:
    return f"{dag_url(dag_id)}/runs/{quote(run_id, safe='')}"


def task_url(dag_id: str, run_id: str, task_id: str) -> str:
    """The task instance's page, which opens on its logs."""
    return f"{run_url(dag_id, run_id)}/tasks/{quote(task_id, safe='')}"


def link(url: str, text: str, title: str | None = None) -> str:
    hint = f' title="{html.escape(title)}"' if title else ""
    return f'<a href="{html.escape(url)}" target="_top"{hint}>{html.escape(text)}</a>'


def run_dag(candidates: Sequence[str], run_id: str, facts: AirflowFacts) -> str | None:
    """The DAG a run id belongs to: the first candidate Airflow has that run in; without Airflow
    to ask, the first candidate; None for a run Airflow never had (one started from the CLI)."""
    if facts.dags is None:
        return candidates[0] if candidates else None
    return next((dag for dag in candidates if (dag, run_id) in facts.runs), None)


def summary_dags(flow: FlowStatus) -> list[str]:
    """DAGs that write a flow's run summaries: its replication DAG, or the migration DAG."""
    own = replicate_dag_id(str(flow.source), str(flow.target))
    mode = (flow.last_run or {}).get("mode")
    return [MIGRATE_DAG_ID, own] if mode == "migrate" else [own, MIGRATE_DAG_ID]


def verification_dags(flow: FlowStatus) -> list[str]:
    return [verify_dag_id(str(flow.source), str(flow.target)), MIGRATE_DAG_ID]


def wanted_from_airflow(
    status: MirrorStatus, config: MirrorConfig | None
) -> tuple[list[str], list[tuple[str, str]]]:
    """The DAG ids and (DAG, run) pairs the page asks Airflow about."""
    dags: set[str] = set()
    runs: set[tuple[str, str]] = set()
    for flow in status.flows:
        dags.add(replicate_dag_id(str(flow.source), str(flow.target)))
        if flow.last_run and flow.last_run.get("run_id"):
            runs.update((dag, flow.last_run["run_id"]) for dag in summary_dags(flow))
        if flow.last_verification and flow.last_verification.get("run_id"):
            runs.update((dag, flow.last_verification["run_id"]) for dag in verification_dags(flow))
    if config is not None and config.heartbeat_flows:
        dags.add(HEARTBEATS_DAG_ID)
    return sorted(dags), sorted(runs)


# --- paused DAGs -----------------------------------------------------------------------------------


def paused_text(kind: str, dag_id: str) -> str:
    return f"the {kind} DAG {dag_id} is paused: unpause it in Airflow"


def upstream_heartbeat_dags(config: MirrorConfig, cluster: str) -> list[str]:
    """The heartbeat DAG, if its heartbeats make upstream clusters show on `cluster`: when a pair
    writes into a source of a flow into it (`A.heartbeats` on B is A's `heartbeats`, copied by
    A->B)."""
    sources = {f.source for f in config.replication_flows if f.target == cluster}
    return [HEARTBEATS_DAG_ID] if any(f.target in sources for f in config.heartbeat_flows) else []


def paused_hints(
    status: MirrorStatus, config: MirrorConfig | None, facts: AirflowFacts
) -> list[dict[str, str]]:
    """One hint per paused DAG the page's figures wait on: a flow's replication DAG, and the
    heartbeat DAGs behind each cluster's upstreams (generated DAGs start paused)."""
    if config is None or not facts.paused:
        return []
    hints: list[dict[str, str]] = []
    for flow in status.flows:
        dag = replicate_dag_id(str(flow.source), str(flow.target))
        if dag in facts.paused:
            text = f"{flow.flow}: " + paused_text("replication", dag)
            hints.append({"kind": "replication", "dag_id": dag, "subject": flow.flow, "text": text})
    seen: set[str] = set()
    for cluster in status.clusters:
        for dag in upstream_heartbeat_dags(config, cluster.alias):
            if dag in facts.paused and dag not in seen:
                seen.add(dag)
                text = f"upstreams of {cluster.alias}: " + paused_text("heartbeat", dag)
                hints.append({"kind": "heartbeats", "dag_id": dag, "subject": cluster.alias, "text": text})
    return hints


# --- times, figures, sparklines --------------------------------------------------------------------


def utc(ms: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(ms / 1000))


def ago(seconds: float) -> str:
    """`35 s ago`, `2 min 5 s ago`, `3 h 4 min ago`, `2 d 1 h ago` (the script's `ago` is the same)."""
    whole = int(max(0, seconds))
    days, rest = divmod(whole, 86_400)
    hours, rest = divmod(rest, 3_600)
    minutes, secs = divmod(rest, 60)
    parts = [(days, "d"), (hours, "h"), (minutes, "min"), (secs, "s")]
    shown = [f"{n} {unit}" for n, unit in parts if n][:2] or ["0 s"]
    return " ".join(shown) + " ago"


def time_html(ms: int | None, now_ms: int, cls: str = "") -> str:
    """A time as its age, the exact UTC time on hover; the script rewrites the text in the
    browser's time zone and keeps the age current."""
    if ms is None:
        return '<span class="muted">never</span>'
    iso = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ms / 1000))
    klass = f' class="{cls}"' if cls else ""
    return (
        f'<time datetime="{iso}" data-ms="{int(ms)}" title="{utc(ms)}"{klass}>'
        f"{utc(ms)} · {ago((now_ms - ms) / 1000)}</time>"
    )


def number(value: Any) -> str:
    return f"{value:,}" if isinstance(value, int) else html.escape(str(value))


def sparkline(points: Sequence[Point], what: str, width: int = 96, height: int = 22) -> str:
    """An inline SVG line of a history (oldest left), its range in the tooltip; empty below two
    points."""
    if len(points) < 2:
        return ""
    values = [v for _, v in points]
    low, high = min(values), max(values)
    first, last = points[0][0], points[-1][0]
    spread_t = max(1, last - first)
    spread_v = max(1, high - low)
    pad = 2
    coords = [
        (
            pad + (t - first) * (width - 2 * pad) / spread_t,
            height - pad - (v - low) * (height - 2 * pad) / spread_v,
        )
        for t, v in points
    ]
    line = " ".join(f"{x:.1f},{y:.1f}" for x, y in coords)
    x, y = coords[-1]
    title = (
        f"{what} over the last {len(points)} reads ({ago((last - first) / 1000).removesuffix(' ago')}): "
        f"min {low:,}, max {high:,}, now {values[-1]:,}"
    )
    return (
        f'<svg class="spark" width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img">'
        f"<title>{html.escape(title)}</title>"
        f'<polyline points="{line}"/><circle cx="{x:.1f}" cy="{y:.1f}" r="2"/></svg>'
    )


def badge(level: str, text: str, why: str | None = None) -> str:
    tip = f' title="{html.escape(why)}"' if why else ""
    return f'<span class="badge {level}"{tip}>{html.escape(text)}</span>'


LEVEL_WORD = {OK: "healthy", WARN: "late", BAD: "failing", UNKNOWN: "no schedule"}

# --- the page ---------------------------------------------------------------------------------------


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


def flow_health(view: PageView, flow: FlowStatus) -> Health:
    """The flow's colour: red for failed partitions, offsets lost, a failed verification or
    nothing readable; the last run's age against the schedule otherwise; stale is at least amber."""
    run = flow.last_run or {}
    totals = run.get("totals", {})
    problems = []
    if flow.error and not (flow.last_run or flow.lag):
        problems.append("cannot be read")
    if totals.get("failed_partitions"):
        problems.append(f"{totals['failed_partitions']} failed partition(s)")
    if run.get("lost_to_retention"):
        problems.append(f"{run['lost_to_retention']} offset(s) lost to retention")
    if (flow.last_verification or {}).get("verdict") == "failed":
        problems.append("last verification failed")
    if problems:
        return Health(BAD, "; ".join(problems))
    if flow.last_run is None and not flow.stale:
        return Health(UNKNOWN, "no mirrorflow run of this flow yet", label="no run yet")
    expected = (
        None if view.config is None else run_expected_s(view.config, str(flow.source), str(flow.target))
    )
    age = None if flow.last_run_ms is None else (view.now_ms - flow.last_run_ms) / 1000
    health = view.thresholds.grade(age, expected, "last run")
    if flow.stale and health.level in (OK, UNKNOWN):
        return Health(WARN, f"values as last read: {flow.error}")
    return health


def upstream_health(view: PageView, cluster: ClusterStatus, via: str | None, age_s: float | None) -> Health:
    expected = None if view.config is None else heartbeat_expected_s(view.config, cluster.alias, via)
    return view.thresholds.grade(age_s, expected, "newest heartbeat")


def render_page(view: PageView, *, refresh_s: float, theme: str | None) -> str:
    forced = f' data-theme="{theme}" style="color-scheme:{theme}"' if theme in ("dark", "light") else ""
    return (
        PAGE.replace("<html>", f"<html{forced}>", 1)
        .replace("/*CSS*/", CSS)
        .replace("REFRESH_MS", str(int(max(5.0, refresh_s) * 1000)))
        .replace("<!--CONTENT-->", render_content(view))
    )


def render_content(view: PageView) -> str:
    """The part the script reloads: everything but the title bar."""
    out = [_summary_line(view)]
    out += [_banner_html(b, view.now_ms) for b in view.banners]
    out += [f'<div class="hint">{html.escape(h["text"])}</div>' for h in view.hints]
    status = view.status
    if status is None:
        return "".join(out)
    out.append(_flows_table(view, status))
    out.append(_verifications_table(view, status))
    out.append(_topics_table(view, status))
    out.append(_failed_table(view, status))
    out.append(_clusters_table(view, status))
    out.append(_legend(view))
    return "".join(out)


def _summary_line(view: PageView) -> str:
    snap = view.snapshot
    if view.status is None:
        error = snap.get("refresh_error")
        why = f" (the last attempt failed: {html.escape(error)})" if error else ""
        return f'<p class="meta" data-collecting="1">Collecting the first status snapshot{why}…</p>'
    text = (
        f'<p class="meta">Read from Kafka {time_html(view.status.generated_ms, view.now_ms)}, '
        f"every {snap['refresh_interval_s']:g} s"
    )
    if snap.get("refresh_error"):
        text += f'; <span class="fg-bad">the last refresh failed: {html.escape(snap["refresh_error"])}</span>'
    return text + "</p>"


def _banner_html(banner: dict[str, Any], now_ms: int) -> str:
    """The banner's words with its times shown as every other time of the page (local time and
    age, UTC on hover); the JSON keeps the plain text."""
    if "subject" in banner and "what" in banner:
        shown = (
            f"showing values as of {time_html(banner['as_of_ms'], now_ms)}"
            if banner.get("as_of_ms") is not None
            else "no values read since the status page started"
        )
        text = (
            f"{html.escape(banner['subject'])} {html.escape(banner['what'])} since "
            f"{time_html(banner['since_ms'], now_ms)}; {shown}"
        )
    else:
        text = html.escape(banner["text"])
    return (
        f'<div class="banner"><strong>{text}</strong>'
        f'<div class="detail">{html.escape(banner["error"] or "")}</div></div>'
    )


def _table(title: str, headers: list[str], rows: list[str], empty: str) -> str:
    head = "".join(f"<th>{h}</th>" for h in headers)
    body = "".join(rows) or f'<tr><td colspan="{len(headers)}" class="muted">{empty}</td></tr>'
    # A wide table scrolls inside its own box instead of running off the page's right edge.
    return (
        f'<h2>{title}</h2><div class="table-box"><table><thead><tr>{head}</tr></thead>'
        f"<tbody>{body}</tbody></table></div>"
    )


def _row(cells: Iterable[str], flow_or_cluster: FlowStatus | ClusterStatus | None = None) -> str:
    attrs = ""
    if flow_or_cluster is not None and flow_or_cluster.stale:
        as_of = utc(flow_or_cluster.as_of_ms) if flow_or_cluster.as_of_ms else "never"
        why = f"values as of {as_of}" + (f": {flow_or_cluster.error}" if flow_or_cluster.error else "")
        attrs = f' class="stale" title="{html.escape(why)}"'
    return f"<tr{attrs}>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>"


def _count(value: int | None, bad_when_positive: bool = True) -> str:
    if value is None:
        return '<span class="muted">-</span>'
    cls = "fg-bad" if value and bad_when_positive else ("fg-ok" if not value else "")
    return f'<span class="{cls}">{number(value)}</span>'


def _lag(value: int | None) -> str:
    """Lag is work still to do, not a fault: caught up is green, anything else plain."""
    if value is None:
        return '<span class="muted">-</span>'
    return '<span class="fg-ok">0</span>' if value == 0 else number(value)


def _run_cell(view: PageView, flow: FlowStatus) -> str:
    run = flow.last_run or {}
    run_id = str(run.get("run_id", ""))
    dag = run_dag(summary_dags(flow), run_id, view.facts)
    if dag is None:
        return f'<span class="mono" title="not an Airflow run (started from the CLI?)">{html.escape(run_id)}</span>'
    state = view.facts.runs.get((dag, run_id))
    shown = link(run_url(dag, run_id), run_id, f"{dag}: the DAG run in Airflow")
    logs = link(task_url(dag, run_id, "report"), "report log", "the report task's log")
    return f'<span class="mono">{shown}</span> {_state(state)}<div class="sub">{logs}</div>'


def _state(state: str | None) -> str:
    return f'<span class="badge state-{html.escape(state)}">{html.escape(state)}</span>' if state else ""


def _flows_table(view: PageView, status: MirrorStatus) -> str:
    rows = []
    for flow in status.flows:
        health = flow_health(view, flow)
        dag = replicate_dag_id(str(flow.source), str(flow.target))
        name = link(dag_url(dag), flow.flow, f"the DAG {dag}") + (" (last known)" if flow.stale else "")
        if dag in view.facts.paused:
            name += ' <span class="badge warn" title="unpause it in Airflow">paused</span>'
        cells = [name, badge(health.level, health.label or LEVEL_WORD[health.level], health.why)]
        if flow.lag is None:
            cells.append('<span class="muted">-</span>' + flow_seconds(flow.window))
        else:
            lag = sum(flow.lag.values())
            cells.append(
                f"{_lag(lag)} {sparkline(view.history.flow(flow.flow), 'lag now')}{flow_seconds(flow.window)}"
            )
        if flow.error and not flow.last_run and not flow.lag and not flow.last_verification:
            cells.append(f'<span class="fg-bad">{html.escape(flow.error)}</span>')
            rows.append(_row(cells + [""] * 6, flow))
            continue
        if not flow.last_run:
            rows.append(_row(cells + ['<span class="muted">no mirrorflow run</span>'] + [""] * 6, flow))
            continue
        run, totals = flow.last_run, flow.last_run.get("totals", {})
        lag_left = (
            "unknown"
            if run.get("lag_unknown")
            else totals.get("lag_left", sum(run.get("lag_left", {}).values()))
        )
        restarted = run.get("restarted_count") or 0
        again = _count(restarted)
        if restarted:
            shown = "; ".join(f"{p}: {why}" for p, why in list((run.get("restarted") or {}).items())[:3])
            again += f'<div class="sub">{html.escape(shown)}</div>'
        failed = totals.get("failed_partitions", 0)
        failed_cell = _count(failed)
        dag_of_run = run_dag(summary_dags(flow), str(run.get("run_id")), view.facts)
        if failed and dag_of_run:
            failed_cell += (
                f'<div class="sub">{link(task_url(dag_of_run, str(run["run_id"]), "copy"), "copy log")}</div>'
            )
        expected = (
            None if view.config is None else run_expected_s(view.config, str(flow.source), str(flow.target))
        )
        age = None if flow.last_run_ms is None else (view.now_ms - flow.last_run_ms) / 1000
        run_age = view.thresholds.grade(age, expected, "last run")
        cells += [
            _run_cell(view, flow),
            f'<span class="dot {run_age.level}" title="{html.escape(run_age.why)}"></span>'
            + time_html(flow.last_run_ms, view.now_ms),
            number(totals.get("records", 0)),
            failed_cell,
            _lag(lag_left) if isinstance(lag_left, int) else html.escape(str(lag_left)),
            _count(run.get("lost_to_retention") or 0),
            again,
        ]
        rows.append(_row(cells, flow))
    headers = [
        "Flow",
        "Health",
        "Lag now",
        "Last run",
        "Finished",
        "Records",
        "Failed partitions",
        "Lag left",
        "Lost to retention",
        "Copied again (topic recreated)",
    ]
    return _table("Flows", headers, rows, "no replication flow is enabled in the config")


VERDICT_LEVEL = {"verified": OK, "sample passed": OK, "incomplete": WARN, "failed": BAD}


def _verifications_table(view: PageView, status: MirrorStatus) -> str:
    rows = []
    for flow in status.flows:
        v = flow.last_verification
        if not v:
            rows.append(
                _row([html.escape(flow.flow), '<span class="muted">never verified</span>'] + [""] * 8, flow)
            )
            continue
        run_id = str(v.get("run_id"))
        dag = run_dag(verification_dags(flow), run_id, view.facts)
        run = (
            link(run_url(dag, run_id), run_id, f"{dag}: the DAG run in Airflow")
            + f' <span class="sub">{link(task_url(dag, run_id, "verify"), "verify log")}</span>'
            if dag
            else html.escape(run_id)
        )
        whole = v.get("sample") is None
        sample = (
            "all records"
            if whole
            else f"{float(v['sample']) * 100:.6g}%" + (f": {v['confidence']}" if v.get("confidence") else "")
        )
        rows.append(
            _row(
                [
                    html.escape(flow.flow),
                    badge(VERDICT_LEVEL.get(str(v.get("verdict")), BAD), str(v.get("verdict"))),
                    time_html(v.get("finished_ms") or flow.last_verification_ms, view.now_ms),
                    f'<span class="mono">{run}</span>',
                    number(v.get("matched", 0)),
                    _count(v.get("wrong_total", 0)),
                    number(v.get("explained_total", 0)),
                    _count(v.get("pending", 0)),
                    _count(v.get("failed_partitions", 0)),
                    html.escape(sample),
                ],
                flow,
            )
        )
    headers = [
        "Flow",
        "Verdict",
        "Finished",
        "Verification",
        "Matched",
        "Wrong",
        "Explained",
        "Pending",
        "Partitions not read",
        "Sample",
    ]
    return _table("Last verification per flow", headers, rows, "no flow")


def topic_rows(flow: FlowStatus, limit: int = PAGE_ROWS) -> tuple[list[dict[str, Any]], int]:
    """The flow's `limit` worst topics (failed partitions, then offsets lost, then lag now, then
    lag left), from its lag now (every topic) and its last run's topic rows (the worst 50), and
    how many topics there are in all."""
    run = flow.last_run or {}
    run_topics: dict[str, dict[str, Any]] = run.get("topics") or {}
    lag = flow.lag or {}
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
    total = max(len(names), run.get("topics_count") or 0)
    return [{"topic": name, "lag": lag.get(name), **run_topics.get(name, {})} for name in shown], total


def _topics_table(view: PageView, status: MirrorStatus) -> str:
    rows = []
    for flow in status.flows:
        shown, total = topic_rows(flow)
        for row in shown:
            history = view.history.topic(flow.flow, row["topic"])
            now = '<span class="muted">-</span>' if row["lag"] is None else _lag(row["lag"])
            in_run = "partitions" in row
            rows.append(
                _row(
                    [
                        html.escape(flow.flow),
                        f'<span class="mono">{html.escape(row["topic"])}</span>',
                        f"{now} {sparkline(history, 'lag now')}{topic_seconds(flow.window, row['topic'])}",
                        number(row.get("partitions", "-")) if in_run else '<span class="muted">-</span>',
                        number(row.get("records", "-")) if in_run else '<span class="muted">-</span>',
                        _count(row.get("failed")) if in_run else '<span class="muted">-</span>',
                        _count(row.get("lost_to_retention")) if in_run else '<span class="muted">-</span>',
                        _lag(row.get("lag_left")) if "lag_left" in row else '<span class="muted">-</span>',
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
    return _table(
        "Topics, the worst first (lag now and the last run)", headers, rows, "no topic replicated yet"
    )


def _failed_table(view: PageView, status: MirrorStatus) -> str:
    rows = []
    for flow in status.flows:
        run = flow.last_run or {}
        failed = (run.get("failed") or [])[:PAGE_ROWS]
        dag = run_dag(summary_dags(flow), str(run.get("run_id")), view.facts) if run else None
        for p in failed:
            where = f"{p.get('topic')}-{p.get('partition')}"
            log = link(task_url(dag, str(run["run_id"]), "copy"), "copy log") if dag else ""
            rows.append(
                _row(
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
    return _table("Failed partitions of the last runs", ["Flow", "Partition", "Error", "Log"], rows, "none")


def _clusters_table(view: PageView, status: MirrorStatus) -> str:
    rows = []
    for cluster in status.clusters:
        alias = html.escape(cluster.alias) + (" (last known)" if cluster.stale else "")
        if cluster.error and not cluster.as_of_ms:
            rows.append(
                _row(
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
            rows.append(_row([alias, f'<span class="muted">{text}</span>{note}', "", "", ""], cluster))
        for u in cluster.upstreams:
            health = upstream_health(view, cluster, u.via, u.age_s)
            beat = (
                '<span class="muted">none</span>'
                if u.last_heartbeat_ms is None
                else time_html(u.last_heartbeat_ms, view.now_ms)
            )
            rows.append(
                _row(
                    [
                        alias,
                        html.escape(u.alias),
                        str(u.hops),
                        f"{badge(health.level, LEVEL_WORD[health.level], health.why)} {beat}",
                        f'<span class="mono">{html.escape(u.via or "-")}</span>',
                    ],
                    cluster,
                )
            )
    return _table("Clusters", ["Cluster", "Upstream", "Hops", "Newest heartbeat", "Via"], rows, "no cluster")


def _legend(view: PageView) -> str:
    t = view.thresholds
    return (
        '<p class="legend">Health: <span class="badge ok">healthy</span> the last run or heartbeat is '
        f"younger than {t.amber:g}× its expected interval (the replication schedule; for a heartbeat "
        f'its emit interval plus each hop\'s schedule), <span class="badge warn">late</span> younger '
        f'than {t.red:g}×, <span class="badge bad">failing</span> older, or failed partitions, offsets '
        "lost to retention, a failed verification. Hover a badge for its figures.</p>"
    )


CSS_TOKENS = {
    # Airflow 3.3's palette (Tailwind 4 values, some darkened by Airflow), in oklch
    "gray-50": "oklch(0.985 0.004 253)",
    "gray-100": "oklch(0.955 0.006 253)",
    "gray-200": "oklch(0.915 0.01 253)",
    "gray-400": "oklch(0.75 0.025 252)",
    "gray-600": "oklch(0.45 0.055 251)",
    "gray-800": "oklch(0.28 0.035 251)",
    "gray-900": "oklch(0.18 0.03 251)",
    "gray-950": "oklch(0.11 0.025 251)",
    "black": "oklch(0.23185 0.0323 266.44)",
    "brand-600": "oklch(0.469 0.084 257.657)",
    "blue-300": "oklch(0.809 0.105 251.813)",
    "blue-600": "oklch(0.546 0.245 262.881)",
    "green-100": "oklch(0.962 0.044 156.743)",
    "green-300": "oklch(0.75 0.18 153.0)",
    "green-600": "oklch(0.47 0.20 149.0)",
    "green-900": "oklch(0.393 0.095 152.535)",
    "red-100": "oklch(0.936 0.032 17.717)",
    "red-200": "oklch(0.885 0.062 18.334)",
    "red-400": "oklch(0.704 0.191 22.216)",
    "red-500": "oklch(0.637 0.237 25.331)",
    "red-600": "oklch(0.577 0.245 27.325)",
    "red-800": "oklch(0.444 0.177 26.899)",
    "red-900": "oklch(0.396 0.141 25.723)",
    "amber-100": "oklch(0.962 0.059 95.617)",
    "amber-200": "oklch(0.924 0.12 95.746)",
    "amber-600": "oklch(0.666 0.179 58.318)",
    "amber-800": "oklch(0.473 0.137 46.201)",
    "amber-900": "oklch(0.414 0.112 45.904)",
    "cyan-600": "oklch(0.609 0.126 221.723)",
    "stone-600": "oklch(0.444 0.011 73.639)",
    "orange-600": "oklch(0.5902 0.198 35.93)",
    "yellow-600": "oklch(0.681 0.162 75.834)",
    "zinc-600": "oklch(0.442 0.017 285.786)",
}
# Chakra's semantic roles as Airflow resolves them: (light, dark)
CSS_ROLES = {
    "bg": ("var(--white)", "var(--black)"),
    "bg-subtle": ("var(--gray-50)", "var(--gray-950)"),
    "bg-muted": ("var(--gray-100)", "var(--gray-900)"),
    "fg": ("var(--black)", "var(--gray-50)"),
    "fg-muted": ("var(--gray-600)", "var(--gray-400)"),
    "border": ("var(--gray-200)", "var(--gray-800)"),
    "link": ("var(--blue-600)", "var(--blue-300)"),
    "ok-fg": ("var(--green-600)", "var(--green-300)"),
    "bad-fg": ("var(--red-500)", "var(--red-400)"),
    "error-subtle": ("var(--red-100)", "var(--red-900)"),
    "error-fg": ("var(--red-800)", "var(--red-200)"),
    "warning-subtle": ("var(--amber-100)", "var(--amber-900)"),
    "warning-fg": ("var(--amber-800)", "var(--amber-200)"),
}


def _css() -> str:
    tokens = "".join(f"--{k}:{v};" for k, v in CSS_TOKENS.items()) + "--white:#fff;"
    light = "".join(f"--{k}:{v[0]};" for k, v in CSS_ROLES.items())
    dark = "".join(f"--{k}:{v[1]};" for k, v in CSS_ROLES.items())
    return (
        f":root{{{tokens}{light}color-scheme:light}}"
        f':root[data-theme="dark"]{{{dark}color-scheme:dark}}'
        f'@media (prefers-color-scheme:dark){{:root:not([data-theme="light"]){{{dark}color-scheme:dark}}}}'
        + STYLE
    )


STYLE = """
body{margin:0;padding:1rem 1.5rem;background:var(--bg);color:var(--fg);
 font-family:Inter,-apple-system,BlinkMacSystemFont,"Segoe UI",Helvetica,Arial,sans-serif;
 font-size:.875rem;line-height:1.25rem;-webkit-font-smoothing:antialiased}
h1{font-size:1.5rem;line-height:2rem;font-weight:600;margin:0}
h2{font-size:1.125rem;line-height:1.75rem;font-weight:600;margin:1.5rem 0 .5rem}
a{color:var(--link);text-decoration:none}a:hover{text-decoration:underline}
.bar{display:flex;align-items:center;gap:1rem;flex-wrap:wrap;padding-bottom:.75rem;border-bottom:1px solid var(--border)}
.bar .tools{margin-left:auto;display:flex;align-items:center;gap:.75rem;color:var(--fg-muted)}
button{font:inherit;color:var(--fg);background:var(--bg);border:1px solid var(--border);border-radius:.375rem;
 padding:.25rem .75rem;cursor:pointer}button:hover{background:var(--bg-muted)}
.table-box{overflow-x:auto;max-width:100%}
table{border-collapse:collapse;width:100%;border:1px solid var(--border);border-radius:.375rem}
th,td{padding:.5rem .75rem;text-align:start;border-bottom:1px solid var(--border);vertical-align:top}
th{background:var(--bg-muted);font-weight:500;color:var(--fg);white-space:nowrap}
tbody tr:hover{background:var(--bg-subtle)}
td:first-child{white-space:nowrap}
.muted,.sub{color:var(--fg-muted)}.sub{font-size:.75rem;margin-top:.125rem}
.meta{color:var(--fg-muted);margin:.75rem 0}
.mono{font-family:SFMono-Regular,Menlo,Monaco,Consolas,"Liberation Mono","Courier New",monospace;font-size:.8125rem}
.fg-bad{color:var(--bad-fg);font-weight:600}.fg-ok{color:var(--ok-fg)}
.badge{display:inline-block;border-radius:9999px;padding:0 .5rem;font-size:.75rem;line-height:1.25rem;
 font-weight:500;color:#fff;background:var(--gray-600);white-space:nowrap}
.badge.ok,.state-success{background:var(--green-600)}.badge.warn{background:var(--amber-600)}
.badge.bad,.state-failed{background:var(--red-600)}.state-running{background:var(--cyan-600)}
.state-queued{background:var(--stone-600)}.state-upstream_failed{background:var(--orange-600)}
.state-up_for_retry{background:var(--yellow-600)}.state-scheduled{background:var(--zinc-600)}
.dot{display:inline-block;width:.5rem;height:.5rem;border-radius:9999px;margin-right:.375rem;background:var(--gray-400)}
.dot.ok{background:var(--green-600)}.dot.warn{background:var(--amber-600)}.dot.bad{background:var(--red-600)}
.banner,.hint{padding:.75rem 1rem;margin:.5rem 0;border-radius:.375rem}
.banner{background:var(--error-subtle);color:var(--error-fg)}
.banner .detail{font-size:.75rem;margin-top:.25rem;opacity:.85}
.hint{background:var(--warning-subtle);color:var(--warning-fg)}
.hint-inline{color:var(--warning-fg);font-weight:500}
tr.stale td{color:var(--fg-muted)}
svg.spark{vertical-align:middle;margin-left:.375rem}
svg.spark polyline{fill:none;stroke:var(--brand-600);stroke-width:1.5}
:root[data-theme="dark"] svg.spark polyline{stroke:var(--blue-300)}
svg.spark circle{fill:var(--link)}
.legend{color:var(--fg-muted);margin-top:1.5rem;font-size:.75rem}
"""

CSS = _css()

SCRIPT = """
(()=>{
const REFRESH=REFRESH_MS, root=document.documentElement, KEY="mirrorflow-status-paused";
const forced=new URLSearchParams(location.search).get("theme");
const media=matchMedia("(prefers-color-scheme: dark)");
// The UI sets class="dark"|"light" and color-scheme on its <html> (next-themes); same origin.
function parentMode(){try{if(window.parent===window)return null;const h=window.parent.document.documentElement;
  if(h.classList.contains("dark"))return "dark";if(h.classList.contains("light"))return "light";
  const s=h.style.colorScheme;return s==="dark"||s==="light"?s:null;}catch(e){return null;}}
function theme(){const m=(forced==="dark"||forced==="light")?forced:(parentMode()||(media.matches?"dark":"light"));
  if(root.dataset.theme!==m){root.dataset.theme=m;root.style.colorScheme=m;}}
theme();media.addEventListener("change",theme);
try{if(window.parent!==window)new MutationObserver(theme).observe(window.parent.document.documentElement,
  {attributes:true,attributeFilter:["class","style","data-theme"]});}catch(e){}
function ago(s){let w=Math.max(0,Math.floor(s));const d=Math.floor(w/86400);w%=86400;const h=Math.floor(w/3600);
  w%=3600;const m=Math.floor(w/60),x=w%60;const p=[[d,"d"],[h,"h"],[m,"min"],[x,"s"]].filter(a=>a[0]).slice(0,2)
  .map(a=>a[0]+" "+a[1]);return (p.length?p.join(" "):"0 s")+" ago";}
const fmt=new Intl.DateTimeFormat(undefined,{month:"short",day:"numeric",hour:"2-digit",
  minute:"2-digit",second:"2-digit"});
let paused=false,last=Date.now(),failure="",timer=null;
try{paused=localStorage.getItem(KEY)==="1";}catch(e){}
const button=document.getElementById("pause"),label=document.getElementById("updated");
function stamp(){const now=Date.now();
  for(const t of document.querySelectorAll("time[data-ms]")){const ms=+t.dataset.ms;
    t.textContent=fmt.format(new Date(ms))+" · "+ago((now-ms)/1000);}
  label.textContent=(failure?"update failed ("+failure+"); ":"")+"page updated "+ago((now-last)/1000)+
    (paused?", auto-refresh paused":", refreshes every "+Math.round(REFRESH/1000)+" s");
  button.textContent=paused?"Resume":"Pause";button.setAttribute("aria-pressed",String(paused));}
function plan(){clearTimeout(timer);if(paused)return;
  timer=setTimeout(load,document.querySelector("[data-collecting]")?3000:REFRESH);}
async function load(){try{const r=await fetch("ui?fragment=1",{credentials:"same-origin"});
    if(!r.ok)throw new Error("HTTP "+r.status);document.getElementById("content").innerHTML=await r.text();
    last=Date.now();failure="";}catch(e){failure=String(e.message||e);}
  stamp();plan();}
button.addEventListener("click",()=>{paused=!paused;try{localStorage.setItem(KEY,paused?"1":"0");}catch(e){}
  if(!paused)load();else{clearTimeout(timer);stamp();}});
stamp();plan();setInterval(stamp,1000);
})();
"""

PAGE = (
    """<!doctype html>
<html><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>mirrorflow replication status</title><style>/*CSS*/</style></head>
<body><div class="bar"><h1>Replication status</h1><div class="tools"><span id="updated" aria-live="polite"></span>
<button id="pause" type="button" aria-pressed="false">Pause</button></div></div>
<div id="content"><!--CONTENT--></div>
<script>"""
    + SCRIPT
    + """</script></body></html>
"""
)
