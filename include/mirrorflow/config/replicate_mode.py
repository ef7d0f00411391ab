"""Whether a flow's replication settings fit its mode (mirrorflow.replicate.mode).

Each key parses on its own (mirrorflow_keys); what only the combination decides is here: a
micro-batch window must last longer than one of its intervals, and a micro-batch flow's DAG runs
once per window, so a replication schedule set for it is not used.
"""

from __future__ import annotations

from collections.abc import Iterable

from mirrorflow.config.flow import FlowConfig
from mirrorflow.config.mirrorflow_keys import MICROBATCH_INTERVAL_MS
from mirrorflow.config.problems import Problem, error, warning

MICRO_BATCH = "micro-batch"


def check_replicate_modes(flows: Iterable[FlowConfig]) -> list[Problem]:
    problems = []
    for flow in flows:
        if flow.replicate_mode != MICRO_BATCH:
            continue
        interval = flow.settings.get("mirrorflow.microbatch.interval.ms")
        if flow.microbatch_interval_ms >= flow.microbatch_window_seconds * 1000:
            problems.append(
                error(
                    interval.origin if interval else f"{flow.name}.mirrorflow.microbatch.window.seconds",
                    f"a micro-batch window of {flow.microbatch_window_seconds} s is not longer than one "
                    f"interval ({flow.microbatch_interval_ms} ms)",
                    "make mirrorflow.microbatch.interval.ms shorter than the window "
                    f"(default {MICROBATCH_INTERVAL_MS}), or the window longer (mirrorflow.microbatch.window.seconds, default 3600)",
                )
            )
        schedule = flow.settings.get("mirrorflow.replicate.schedule")
        if schedule is not None:
            problems.append(
                warning(
                    schedule.origin,
                    f"{flow.name} replicates in micro-batch mode, where the replication DAG runs once per "
                    f"window (every {flow.microbatch_window_seconds} s); mirrorflow.replicate.schedule is not used",
                    "remove it, or set mirrorflow.replicate.mode = batch to replicate on this schedule",
                )
            )
    return problems
