"""The status page's small pieces: times with their age, numbers, sparklines, badges, and the
table and row every section is built from."""

from __future__ import annotations

import html
import time
from collections.abc import Iterable, Sequence
from typing import Any

from mirrorflow.control.mirror_status import ClusterStatus, FlowStatus
from mirrorflow.control.status_health import BAD, OK, UNKNOWN, WARN, Health
from mirrorflow.control.status_snapshots import Point

MUTED_DASH = '<span class="muted">-</span>'


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


def byte_rate(value: float) -> str:
    """Bytes per second in binary units, as the cap's key is usually written (1 MiB = 1048576)."""
    for unit in ("B/s", "KiB/s", "MiB/s"):
        if value < 1024:
            return f"{value:,.1f} {unit}" if unit != "B/s" else f"{value:,.0f} {unit}"
        value /= 1024
    return f"{value:,.1f} GiB/s"


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


# An age's word where a grade gave none: red is "late" as amber is, only later.
LEVEL_WORD = {OK: "healthy", WARN: "late", BAD: "late", UNKNOWN: "no schedule"}


def badge_with_cause(health: Health) -> str:
    """A health badge with its cause under it (not only on hover), its rule on hover."""
    shown = badge(health.level, health.label or LEVEL_WORD[health.level], health.why)
    if health.cause:
        shown += f'<div class="sub cause">{html.escape(health.cause)}</div>'
    return shown


def table(title: str, headers: list[str], rows: list[str], empty: str) -> str:
    head = "".join(f"<th>{h}</th>" for h in headers)
    body = "".join(rows) or f'<tr><td colspan="{len(headers)}" class="muted">{empty}</td></tr>'
    # A wide table scrolls inside its own box instead of running off the page's right edge.
    return (
        f'<h2>{title}</h2><div class="table-box"><table><thead><tr>{head}</tr></thead>'
        f"<tbody>{body}</tbody></table></div>"
    )


def table_row(cells: Iterable[str], flow_or_cluster: FlowStatus | ClusterStatus | None = None) -> str:
    attrs = ""
    if flow_or_cluster is not None and flow_or_cluster.stale:
        as_of = utc(flow_or_cluster.as_of_ms) if flow_or_cluster.as_of_ms else "never"
        why = f"values as of {as_of}" + (f": {flow_or_cluster.error}" if flow_or_cluster.error else "")
        attrs = f' class="stale" title="{html.escape(why)}"'
    return f"<tr{attrs}>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>"


def count_cell(value: int | None, bad_when_positive: bool = True) -> str:
    if value is None:
        return MUTED_DASH
    cls = "fg-bad" if value and bad_when_positive else ("fg-ok" if not value else "")
    return f'<span class="{cls}">{number(value)}</span>'


def lag_cell(value: int | None) -> str:
    """Lag is work still to do, not a fault: caught up is green, anything else plain."""
    if value is None:
        return MUTED_DASH
    return '<span class="fg-ok">0</span>' if value == 0 else number(value)


def state_badge(state: str | None) -> str:
    return f'<span class="badge state-{html.escape(state)}">{html.escape(state)}</span>' if state else ""
