"""A flow's two states on the status page, each judged on its own: is it copying, and what did its
last verification find.

The copy state is one of COPY_STATES:

* `failed` (red): its last finished Airflow run failed, or its last run summary has failed
  partitions or offsets lost to retention;
* `unreadable` (red): nothing of the flow could be read;
* `no run yet` (grey): no run summary and no running window;
* `copying` (green) / `late` (amber, then red): the newest sign of copying against what the flow
  does (status_health): a batch flow's last run against its schedule; a micro-batch flow's running
  window against the few seconds between its tasks' status records (the window's summary comes
  only at its end, an hour by default), or, with no window to read, its last window's summary
  against the window's length;
* `no schedule` (grey): a batch flow run only by hand;
* `stale` (amber): values as last read from a cluster that does not answer, where they would
  otherwise be green or grey.

A verification is a separate check, done when someone asks for one: its verdict is the
verification badge's, never the copy's. A verification that failed yesterday says nothing of
whether the flow copies now.
"""

from __future__ import annotations

from typing import Any

from mirrorflow.config import FlowConfig
from mirrorflow.config.replicate_mode import MICRO_BATCH
from mirrorflow.control.mirror_status import FlowStatus
from mirrorflow.control.status_health import (
    BAD,
    OK,
    UNKNOWN,
    WARN,
    Health,
    Thresholds,
    schedule_period_s,
    window_status_every_s,
)

COPYING, LATE, FAILED, UNREADABLE, NO_RUN, NO_SCHEDULE, STALE = (
    "copying",
    "late",
    "failed",
    "unreadable",
    "no run yet",
    "no schedule",
    "stale",
)
COPY_STATES = (COPYING, LATE, FAILED, UNREADABLE, NO_RUN, NO_SCHEDULE, STALE)
NEVER_VERIFIED = "never verified"
VERDICT_LEVEL = {"verified": OK, "sample passed": OK, "incomplete": WARN, "failed": BAD}
VERIFICATION_STATES = (*VERDICT_LEVEL, NEVER_VERIFIED)
ERROR_SHOWN = 160  # characters of a read error under the badge; the banner has all of it


def copy_failures(flow: FlowStatus, failed_run: str | None) -> list[str]:
    """What makes the copy `failed`: the last finished run failed (`failed_run` says how, from
    Airflow), failed partitions, offsets lost to retention in the last run summary."""
    run = flow.last_run or {}
    totals = run.get("totals", {})
    problems = [failed_run] if failed_run else []
    if totals.get("failed_partitions"):
        problems.append(f"{totals['failed_partitions']} failed partition(s) in the last run")
    if run.get("lost_to_retention"):
        problems.append(f"{run['lost_to_retention']} offset(s) lost to retention in the last run")
    return problems


def copy_evidence(
    flow: FlowStatus, config: FlowConfig | None, now_ms: int, read_ms: int | None = None
) -> tuple[str, float | None, float | None]:
    """(what was judged, its age in seconds, the interval expected) of the newest sign that the
    flow copies, by its mode. A window's status is aged at `read_ms`, the read of the page's
    snapshot (as heartbeats are: the page refreshes every 15 s, a window's status comes every
    5 s); a run summary at `now_ms`."""
    last_ms = flow.last_run_ms
    if config is not None and config.replicate_mode == MICRO_BATCH:
        window = flow.window
        if window is not None and window.get("at_ms"):
            newest = max(int(window["at_ms"]), last_ms or 0)
            at = now_ms if read_ms is None else read_ms
            return "window status", max(0.0, (at - newest) / 1000), window_status_every_s(config)
        age = None if last_ms is None else max(0.0, (now_ms - last_ms) / 1000)
        return "last window's summary", age, float(config.microbatch_window_seconds)
    age = None if last_ms is None else max(0.0, (now_ms - last_ms) / 1000)
    expected = None if config is None else schedule_period_s(config.replicate_schedule)
    return "last run", age, expected


def copy_health(
    flow: FlowStatus,
    config: FlowConfig | None,
    *,
    failed_run: str | None,
    now_ms: int,
    thresholds: Thresholds,
    read_ms: int | None = None,
) -> Health:
    """The flow's copy badge (its `label` is one of COPY_STATES); `config` is the flow as the
    config has it now, `failed_run` why its last finished Airflow run makes it red (or None),
    `read_ms` when the status was read (copy_evidence)."""
    if problems := copy_failures(flow, failed_run):
        return Health(BAD, "; ".join(problems), FAILED, "; ".join(problems))
    if flow.error and not (flow.last_run or flow.lag or flow.window):
        shown = flow.error if len(flow.error) <= ERROR_SHOWN else flow.error[: ERROR_SHOWN - 1] + "…"
        return Health(BAD, f"cannot be read: {flow.error}", UNREADABLE, f"cannot be read: {shown}")
    if flow.last_run is None and flow.window is None and not flow.stale:
        return Health(UNKNOWN, "no mirrorflow run of this flow yet", NO_RUN, "no mirrorflow run yet")
    what, age, expected = copy_evidence(flow, config, now_ms, read_ms)
    health = thresholds.grade(age, expected, what, ok_word=COPYING)
    if health.label == "none yet":  # a stale flow never read: nothing to age
        health = Health(UNKNOWN, health.why, NO_RUN, health.cause, None, expected)
    if flow.stale and health.level in (OK, UNKNOWN):
        return Health(WARN, f"values as last read: {flow.error}", STALE, "values as last read", age, expected)
    return health


def verification_health(flow: FlowStatus) -> Health:
    """The flow's verification badge: its last verification's verdict (one of
    VERIFICATION_STATES) with its figures under it."""
    last = flow.last_verification
    if not last:
        return Health(UNKNOWN, "no verification of this flow yet", NEVER_VERIFIED, None)
    verdict = str(last.get("verdict"))
    return Health(
        VERDICT_LEVEL.get(verdict, BAD),
        f"the last verification {last.get('run_id')}: {verdict}",
        verdict,
        figures(last),
    )


def removed_figures(last: dict[str, Any]) -> list[str]:
    """The copies the target removed (its retention, DeleteRecords), as a verification overview
    counts them: those a group to move or a migration still needs (the verdict is incomplete),
    and those below every position still needed (explained, but no longer on the target)."""
    parts = []
    if last.get("removed_needed"):
        parts.append(f"{last['removed_needed']:,} removed from the target though still needed")
    if last.get("removed_from_target"):
        parts.append(f"{last['removed_from_target']:,} removed from the target below every group's position")
    return parts


def figures(last: dict[str, Any]) -> str:
    """`3 wrong, 20 equal, 5 not copied yet` of a verification overview (mirror_status)."""
    parts = []
    if last.get("wrong_total"):
        parts.append(f"{last['wrong_total']:,} wrong")
    if last.get("failed_partitions"):
        parts.append(f"{last['failed_partitions']:,} partition(s) not read")
    parts.append(f"{last.get('matched', 0):,} equal")
    if last.get("pending"):
        parts.append(f"{last['pending']:,} not copied yet")
    parts += removed_figures(last)
    sample = last.get("sample")
    if sample is not None:
        parts.append(f"sample {float(sample) * 100:.6g}%")
    return ", ".join(parts)
