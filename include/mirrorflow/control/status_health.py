"""Health colours of the status page and the thresholds behind them.

An age is only good or bad against how often the thing is expected to happen, so every threshold
is a multiple of an interval taken from the config:

* a flow's last run against its replication DAG's schedule (`mirrorflow.replicate.schedule`:
  every 5 minutes by default): green while the run is younger than AMBER x the schedule's period,
  amber up to RED x, red beyond;
* the newest heartbeat from an upstream cluster against the time a heartbeat needs to arrive:
  the emit interval of the heartbeats written into the upstream cluster
  (`emit.heartbeats.interval.seconds`) plus, for each replication hop it travelled, that flow's
  replication schedule (a heartbeat reaches a downstream cluster only with the next copy).

AMBER is 3 and RED is 10 unless MIRRORFLOW_STATUS_AMBER_FACTOR / MIRRORFLOW_STATUS_RED_FACTOR
say otherwise. Whatever else is wrong is red whatever its age: failed partitions, offsets lost to
retention, a failed verification, a cluster or flow that cannot be read.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from croniter import croniter

from mirrorflow.config import MirrorConfig
from mirrorflow.control.mirror_client import all_sources, cluster_policy

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


@dataclass(frozen=True)
class Health:
    level: str  # OK, WARN, BAD or UNKNOWN
    why: str  # what the level was judged against, for the page's tooltip
    label: str | None = None  # the badge's word where the level's own would mislead


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

    def grade(self, age_s: float | None, expected_s: float | None, what: str) -> Health:
        """Green under amber x `expected_s`, amber under red x, red beyond."""
        if expected_s is None:
            return Health(UNKNOWN, f"{what}: no schedule to judge its age by")
        if age_s is None:
            return Health(BAD, f"{what}: none yet (expected every {span(expected_s)})")
        rule = (
            f"{what}: expected every {span(expected_s)}; green under {span(self.amber * expected_s)}, "
            f"amber under {span(self.red * expected_s)}, red beyond"
        )
        if age_s < self.amber * expected_s:
            return Health(OK, rule)
        return Health(WARN if age_s < self.red * expected_s else BAD, rule)


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
    """`45 s`, `5 min`, `2 h 30 min`, `3 d`: a threshold as people read it."""
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


def run_expected_s(config: MirrorConfig, source: str, target: str) -> float | None:
    try:
        return schedule_period_s(config.flow(source, target).replicate_schedule)
    except (KeyError, ValueError):
        return None


def heartbeat_expected_s(config: MirrorConfig, cluster: str, via: str | None) -> float | None:
    """How often a heartbeat should arrive in `cluster` through heartbeat topic `via`: the emit
    interval into the cluster it started from plus the schedule of every replication hop on the
    way (`B.A.heartbeats` on C: written into A, copied A->B, then B->C). None if a part has no
    interval (heartbeats disabled there, or a hop only run by hand)."""
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
        try:
            period = schedule_period_s(config.flow(source, target).replicate_schedule)
        except (KeyError, ValueError):  # a chain through a cycle, or a flow the config rejects
            return None
        if period is None:
            return None
        total += period
    return total
