"""Health colours of the status page and the thresholds behind them.

An age is only good or bad against how often the thing is expected to happen, so every threshold
is a multiple of an interval taken from what the config says the thing does:

* a flow's copy (control.status_copy) against its mode: a batch flow's last run against its
  replication schedule (`mirrorflow.replicate.schedule`, every 5 minutes by default); a
  micro-batch flow's running window, whose tasks store their figures every few seconds
  (`window_status_every_s`), or, without one, its last window's summary against the window's
  length (`mirrorflow.microbatch.window.seconds`);
* a heartbeat written into a cluster against its emit interval (`emit.heartbeats.interval.seconds`,
  MM2's key) and nothing else: a heartbeat job emits at that interval whatever any schedule says;
* the newest heartbeat from an upstream cluster against the time a heartbeat needs to arrive:
  that emit interval plus, for each replication hop it travelled, the longest a record waits for
  that flow to copy it (`hop_delivery_s`: a batch flow's schedule, a micro-batch flow's interval).

Green while younger than AMBER x the interval, amber up to RED x, red beyond. AMBER is 3 and RED
is 10 unless MIRRORFLOW_STATUS_AMBER_FACTOR / MIRRORFLOW_STATUS_RED_FACTOR say otherwise. A
heartbeat's thresholds are each HEARTBEAT_RUN_START_S later: once per run of the heartbeat DAG,
its newest heartbeat ages by the time Airflow takes to start the next run.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from croniter import croniter

from mirrorflow.config import FlowConfig, MirrorConfig
from mirrorflow.config.replicate_mode import MICRO_BATCH
from mirrorflow.control.mirror_client import all_sources, cluster_policy
from mirrorflow.replicate.window.settings import STATUS_S

OK, WARN, BAD, UNKNOWN = "ok", "warn", "bad", "unknown"
AMBER_ENV = "MIRRORFLOW_STATUS_AMBER_FACTOR"
RED_ENV = "MIRRORFLOW_STATUS_RED_FACTOR"
DEFAULT_AMBER = 3.0
DEFAULT_RED = 10.0
# @continuous starts the next run when one ends: a run every minute or so is what it looks like.
CONTINUOUS_S = 60.0
PRESET_S = {
    "@continuous": CONTINUOUS_S,
    "@hourly": 3_600.0,
    "@daily": 86_400.0,
    "@weekly": 7 * 86_400.0,
    "@monthly": 31 * 86_400.0,
    "@quarterly": 92 * 86_400.0,
    "@yearly": 366 * 86_400.0,
}
CRON_SAMPLES = 32  # fire times looked at for a cron's longest gap (weekday-only schedules and such)
HEARTBEAT_RUN_START_S = 60.0
"""Added to a heartbeat's thresholds: the heartbeat DAG's run ends one interval before the next is
due, and Airflow takes up to about this long to start the next one (docs/concepts/
heartbeats-and-sync.md), so once per run the newest heartbeat is that much older."""
HEARTBEAT_ALLOWANCE = "once per heartbeat run, while Airflow starts the next"
LATE = "late"  # the badge of an age beyond amber x its interval (amber), or red x (red)
NONE_YET = "none yet"


@dataclass(frozen=True)
class Health:
    level: str  # OK, WARN, BAD or UNKNOWN
    why: str  # the rule the level was judged by, for the page's tooltip
    label: str | None = None  # the badge's word (None: the level's own)
    cause: str | None = None  # what made the level, shown under the badge
    age_s: float | None = None  # the age judged, if an age was
    expected_s: float | None = None  # the interval it was judged against


@dataclass(frozen=True)
class Thresholds:
    amber: float = DEFAULT_AMBER
    red: float = DEFAULT_RED

    def __post_init__(self) -> None:
        if not (0 < self.amber < self.red and math.isfinite(self.red)):
            raise ValueError(
                f"status thresholds: {AMBER_ENV} ({self.amber:g}) must be above 0 and below "
                f"{RED_ENV} ({self.red:g})"
            )

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Thresholds:
        env = os.environ if environ is None else environ
        return cls(_factor(env, AMBER_ENV, DEFAULT_AMBER), _factor(env, RED_ENV, DEFAULT_RED))

    def grade(
        self,
        age_s: float | None,
        expected_s: float | None,
        what: str,
        *,
        ok_word: str = "healthy",
        allowance_s: float = 0.0,
        allowance_why: str = "",
    ) -> Health:
        """Green (`ok_word`) under amber x `expected_s`, amber under red x, red beyond (both
        "late"), each threshold `allowance_s` later; grey without an interval to judge by."""
        if expected_s is None:
            return Health(
                UNKNOWN, f"{what}: no schedule to judge its age by", "no schedule", f"{what}: no schedule"
            )
        every = f"expected every {span(expected_s)}"
        if age_s is None:
            return Health(
                BAD, f"{what}: none yet ({every})", NONE_YET, f"no {what} yet; {every}", None, expected_s
            )
        rule = (
            f"{what}: {every}; green under {span(self.amber * expected_s)}, "
            f"amber under {span(self.red * expected_s)}, red beyond"
        )
        if allowance_s:
            rule += f"; each {span(allowance_s)} later {allowance_why}".rstrip()
        cause = f"{what} {span(age_s)} ago; {every}"
        if age_s < self.amber * expected_s + allowance_s:
            return Health(OK, rule, ok_word, cause, age_s, expected_s)
        level = WARN if age_s < self.red * expected_s + allowance_s else BAD
        return Health(level, rule, LATE, cause, age_s, expected_s)


def _factor(env: Mapping[str, str], name: str, default: float) -> float:
    raw = env.get(name)
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not (value > 0 and math.isfinite(value)):
        raise ValueError(f"{name}={raw!r}: give a number above 0 (default {default:g})")
    return value


def span(seconds: float) -> str:
    """`0.25 s`, `45 s`, `5 min`, `2 h 30 min`, `3 d`: a threshold as people read it."""
    if seconds < 10 and seconds != round(seconds):
        return f"{round(seconds, 2):g} s"
    whole = round(seconds)
    if whole < 120:
        return f"{whole} s"
    minutes = whole // 60
    if minutes < 120:
        return f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours} h" + (f" {minutes} min" if minutes else "")
    return f"{hours // 24} d" + (f" {hours % 24} h" if hours % 24 else "")


def schedule_period_s(schedule: str | None) -> float | None:
    """Longest gap between two runs of a schedule (a cron or Airflow preset); None for a DAG
    that only runs when triggered (@once, none)."""
    if schedule is None or schedule in ("@once", "None", ""):
        return None
    if schedule in PRESET_S:
        return PRESET_S[schedule]
    if not croniter.is_valid(schedule):
        return None
    fires = croniter(schedule, datetime(2024, 1, 1))
    times = [fires.get_next(float) for _ in range(CRON_SAMPLES)]
    return max(b - a for a, b in zip(times, times[1:], strict=False))


def flow_config(config: MirrorConfig | None, source: str, target: str) -> FlowConfig | None:
    """The flow as the config has it now (None: no config, or a pair it rejects)."""
    if config is None:
        return None
    try:
        return config.flow(source, target)
    except (KeyError, ValueError):
        return None


def hop_delivery_s(flow: FlowConfig) -> float | None:
    """The longest a record written into the flow's source waits for the flow to copy it: a
    micro-batch flow copies every `mirrorflow.microbatch.interval.ms`, a batch flow on its
    schedule; None for a flow only run by hand."""
    if flow.replicate_mode == MICRO_BATCH:
        return flow.microbatch_interval_ms / 1000
    return schedule_period_s(flow.replicate_schedule)


def window_status_every_s(flow: FlowConfig) -> float:
    """How often a micro-batch window's tasks store their figures: every STATUS_S or so, in whole
    batches (replicate.window.settings.WindowSettings.status_every)."""
    interval = flow.microbatch_interval_ms / 1000
    return max(1, math.ceil(STATUS_S / interval)) * interval


def heartbeat_job_expected_s(config: MirrorConfig, source: str, target: str) -> float | None:
    """How often the heartbeat job of pair source->target writes into the target's `heartbeats`:
    its `emit.heartbeats.interval.seconds`; None if the config gives the pair no heartbeat job."""
    for flow in config.heartbeat_flows:
        if (flow.source, flow.target) == (source, target) and flow.emit_heartbeats_interval is not None:
            return flow.emit_heartbeats_interval.total_seconds()
    return None


def heartbeat_expected_s(config: MirrorConfig, cluster: str, via: str | None) -> float | None:
    """How often a heartbeat should arrive in `cluster` through heartbeat topic `via`: the emit
    interval into the cluster it started from plus, for every replication hop on the way
    (`B.A.heartbeats` on C: written into A, copied A->B, then B->C), how long that flow leaves a
    record waiting (hop_delivery_s: its schedule, or its micro-batch interval). None if a part has
    no interval (heartbeats disabled there, or a hop only run by hand)."""
    if via is None:
        return None
    chain = list(reversed(all_sources(cluster_policy(config, cluster), via)))
    if not chain or any(alias not in config.clusters for alias in chain):
        return None
    intervals = [
        f.emit_heartbeats_interval.total_seconds()
        for f in config.heartbeat_flows
        if f.target == chain[0] and f.emit_heartbeats_interval is not None
    ]
    if not intervals:
        return None
    total = min(intervals)
    for source, target in zip(chain, [*chain[1:], cluster], strict=True):
        hop = flow_config(config, source, target)  # None: a chain through a cycle, or a rejected flow
        period = None if hop is None else hop_delivery_s(hop)
        if period is None:
            return None
        total += period
    return total
