"""Test-side helpers for multi-cluster mirrors: an MM2 config for test clusters, and one replicate
run done the way the replicate DAG does it (plan, copy every unit, store the report, summarise)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from mirrorflow.clients import FlowClients
from mirrorflow.config import MirrorConfig, load_config
from mirrorflow.replicate import run_reading
from mirrorflow.replicate.copy import copy_unit
from mirrorflow.replicate.plan import Plan
from mirrorflow.replicate.runner import copy_job_for, store_report
from mirrorflow.replicate.service import plan_run, report_run

# The test clusters have one broker each.
SINGLE_BROKER = (
    "replication.factor = 1\n"
    "offset-syncs.topic.replication.factor = 1\n"
    "checkpoints.topic.replication.factor = 1\n"
    "heartbeats.topic.replication.factor = 1\n"
    "offset.storage.replication.factor = 1\n"
)


def mm2_text(clusters: Sequence[Any], flows: Sequence[str], extra: str = "") -> str:
    """mm2.properties for the given test clusters with `flows` ("A->B") enabled."""
    lines = [f"clusters = {', '.join(c.alias for c in clusters)}"]
    lines += [f"{c.alias}.bootstrap.servers = {c.bootstrap}" for c in clusters]
    lines += [f"{flow}.enabled = true" for flow in flows]
    return "\n".join(lines) + "\n" + SINGLE_BROKER + extra


def mm2_config(clusters: Sequence[Any], flows: Sequence[str], extra: str = "") -> MirrorConfig:
    return load_config(mm2_text(clusters, flows, extra))


def replicate_once(config: MirrorConfig, source: str, target: str, run_id: str) -> dict[str, Any]:
    """One replicate run of source->target through mirrorflow.replicate; returns its summary."""
    flow = config.flow(source, target)
    clients = FlowClients.resolve(flow)
    planned = plan_run(config, source, target, run_id=run_id)
    _, _, _, body = run_reading.read_run_record(clients.target_consumer, planned["plan_offset"])
    plan = Plan.from_json(body)
    started = int(time.time() * 1000)
    job = copy_job_for(flow, clients, plan)
    store_report(clients, plan, [copy_unit(job, unit) for unit in plan.units()], started)
    return report_run(
        config,
        source,
        target,
        run_id=run_id,
        plan_offset=planned["plan_offset"],
        topic_errors=planned["topic_errors"],
    )
