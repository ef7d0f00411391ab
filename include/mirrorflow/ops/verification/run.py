"""Where a verification's comparisons run: one worker per slice of the plan, each with one
reusable reader per side; in Spark tasks (spark.verify_job) or local processes (the CLI)."""

from __future__ import annotations

from collections.abc import Iterable
from concurrent.futures import as_completed
from typing import Any

from mirrorflow import logs
from mirrorflow.clients import FlowClients
from mirrorflow.config import FlowConfig
from mirrorflow.ops.verification.checks import CompareJob, VerifySpan
from mirrorflow.ops.verification.compare import compare_partition
from mirrorflow.ops.verification.plan import VerifyPlan
from mirrorflow.ops.verification.reader import PartitionReader


def compare_job_for(flow: FlowConfig, clients: FlowClients, plan: VerifyPlan) -> CompareJob:
    return CompareJob(
        source=flow.source,
        target=flow.target,
        at_least_once=plan.delivery == "at-least-once",
        source_consumer=clients.source_consumer,
        target_consumer=clients.target_consumer,
    )


def verify_slice(job: CompareJob, spans: Iterable[VerifySpan]) -> list[dict[str, Any]]:
    """One worker's share: every partition compared with one reusable reader per side."""
    source = PartitionReader(
        job.source_consumer, f"source {job.source}", f"mirrorflow-{job.source}->{job.target}"
    )
    target = PartitionReader(job.target_consumer, f"target {job.target}", "mirrorflow-reader")
    try:
        return [compare_partition(job, span, source, target).to_dict() for span in spans]
    finally:
        source.close()
        target.close()


def verify_locally(job: CompareJob, plan: VerifyPlan) -> list[dict[str, Any]]:
    """Every partition of the plan in up to tasks.max local worker processes (spawned, as the
    copy's are: a fork would copy the locks of the parent's librdkafka threads)."""
    slices = plan.slices()
    if not slices:
        return []
    if len(slices) == 1:
        return verify_slice(job, slices[0])
    checks: list[dict[str, Any]] = []
    with logs.worker_pool(len(slices)) as pool:
        for future in as_completed([pool.submit(verify_slice, job, s) for s in slices]):
            checks.extend(future.result())
    return checks
