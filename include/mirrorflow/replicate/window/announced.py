"""The writer-slot counts of the flow's windows that may still be writing, for a window's copy
job to fence before it reads progress.

A change of tasks.max (or of the mode) moves partitions to other transactional ids, and the next
window fences the old count's ids before it settles progress. It learns the old count from the
progress that count committed (runner.copy_job_for); a window that has committed nothing yet (its
flow idle, or just started) leaves no such trace, and a batch it commits right after the next
window read progress would be copied again by the next window. Every window's task stores a
takeover naming its count before it opens a writer, so the counts of the takeovers stored in the
run-records topic over the time a window can still be writing are the rest. Read once per window,
by its driver, after its plan is stored: a takeover stored later than this read comes after the
plan, and the window's tasks read it from their own tail (task.py).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any

from confluent_kafka.admin import OffsetSpec

from mirrorflow.clients import FlowClients
from mirrorflow.config import FlowConfig
from mirrorflow.kafka import KafkaCallError, admin_client
from mirrorflow.kafka_offsets import list_offsets
from mirrorflow.replicate.copy import CopyJob
from mirrorflow.replicate.plan import COPY_SLOTS, Plan
from mirrorflow.replicate.run_history import read_ranges, runs_bounds
from mirrorflow.replicate.run_reading import parse_key
from mirrorflow.replicate.runner import copy_job_for
from mirrorflow.replicate.runs import RUNS_TOPIC
from mirrorflow.replicate.window.channel import TAKEOVER
from mirrorflow.replicate.window.settings import HANDOVER_MAX_S, WindowSettings

log = logging.getLogger("mirrorflow.window")

LIVE_S = 3600.0 + HANDOVER_MAX_S + 60.0
"""How far back a window looks for takeovers, at least: the default window (an hour), its wait
for the next window, and a minute to spare. A longer window looks back its own length instead."""
TIMEOUT_S = 30.0


class CountsUnread(KafkaCallError):
    """The run-records topic could not be read back far enough to know the counts (the CLI and
    the window's Spark job fail as on any failed Kafka call, naming it)."""


def announced_counts(
    consumer_config: Mapping[str, Any],
    admin_config: Mapping[str, Any],
    flow: str,
    *,
    since_ms: int,
    timeout_s: float = TIMEOUT_S,
) -> set[int]:
    """The writer-slot counts of `flow`'s takeovers stored at or after `since_ms`: one ListOffsets
    for the first run record of that time, then one read from it to the topic's end (the records
    of a window's length, never the topic's month). CountsUnread when the topic cannot be read."""
    config = dict(consumer_config)
    counts: set[int] = set()
    try:
        bounds = runs_bounds(config, timeout_s)
        if bounds is None:
            return counts
        where = (RUNS_TOPIC, 0)
        first = list_offsets(
            admin_client(dict(admin_config)), [where], OffsetSpec.for_timestamp(since_ms), timeout_s=timeout_s
        )[where]
        low, end = bounds
        # -1: no record of that time or later.
        start = end if first < 0 else max(low, first)
        for message in read_ranges(config, {where: (start, end)}, timeout_s):
            name, _, kind, chunked = parse_key(message)
            if name == flow and kind == TAKEOVER and not chunked:
                counts.add(int(json.loads(message.value()).get("writer_slots", COPY_SLOTS)))
    except Exception as exc:  # noqa: BLE001 - any failure to read is the same refusal
        raise CountsUnread(
            f"the takeovers of {flow}'s windows in {RUNS_TOPIC} could not be read ({exc}): a window of "
            "another tasks.max still writing could not be fenced, so this window does not start"
        ) from exc
    return counts


def window_copy_job(
    flow: FlowConfig,
    clients: FlowClients,
    plan: Plan,
    settings: WindowSettings,
    *,
    workers: int | None = None,
) -> CopyJob:
    """The copy job of a window of `plan` (stored already): copy_job_for's, with the counts of
    the flow's windows that may still be writing among the older counts its writers fence."""
    length_s = (settings.ends_ms - plan.created_ms) / 1000
    since_ms = plan.created_ms - int(max(LIVE_S, length_s + HANDOVER_MAX_S + 60.0) * 1000)
    counts = announced_counts(clients.target_consumer, clients.target_admin, flow.name, since_ms=since_ms)
    job = copy_job_for(flow, clients, plan, workers=workers, announced=counts)
    if set(job.older_slots) - {s.progress_slots for s in plan.spans}:
        log.info(
            "window %s of %s: windows of %s writer slots may still be writing (their takeovers); "
            "this window's writers fence their ids before they read progress",
            plan.run_id,
            flow.name,
            ", ".join(map(str, sorted(set(job.older_slots)))),
        )
    return job
