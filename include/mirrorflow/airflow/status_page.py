"""The status page's HTML, rendered on the server from one status snapshot, in Airflow's look.

The page (status_style: Airflow 3.3's colours, in both colour modes, and the script that follows
the UI's mode, shows times in the browser's zone and reloads the content every refresh interval)
holds, top to bottom: when the snapshot was read, a banner per unreachable cluster, a hint per
paused DAG the figures wait on, the flows (status_flows), then migrations and verifications,
the worst topics, failed partitions and the clusters (status_tables), the heartbeats written
into each cluster with the heartbeat DAG's newest run (status_heartbeats). Nothing here needs
Airflow: which DAGs are paused, which runs are Airflow's and how they ended come from an
injected reader (status_links.AirflowFacts), absent outside the api-server.
"""

from __future__ import annotations

import html
from typing import Any

from mirrorflow.airflow.status_cells import time_html
from mirrorflow.airflow.status_flows import PageView, flows_table
from mirrorflow.airflow.status_heartbeats import heartbeats_table
from mirrorflow.airflow.status_style import CSS, PAGE
from mirrorflow.airflow.status_tables import (
    clusters_table,
    failed_table,
    history_table,
    legend,
    topics_table,
)


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
    out.append(flows_table(view, status))
    out.append(history_table(view, status))
    out.append(topics_table(view, status))
    out.append(failed_table(view, status))
    out.append(clusters_table(view, status))
    out.append(heartbeats_table(view, status))
    out.append(legend(view))
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
