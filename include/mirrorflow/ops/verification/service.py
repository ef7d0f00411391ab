"""The verification's steps as the DAG, the Spark job and the CLI call them, each from a config
path or a loaded config: plan (checks first, stores the plan), compare, report."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from mirrorflow.clients import FlowClients, check_reachable
from mirrorflow.config import FlowConfig, MirrorConfig
from mirrorflow.config.airflow_connections import ConnectionExtra
from mirrorflow.ops.acl_check import require_job_acls
from mirrorflow.ops.verification import plan as verify_plan
from mirrorflow.ops.verification import report as verify_report
from mirrorflow.ops.verification.run import compare_job_for, verify_locally
from mirrorflow.replicate import run_reading, runs
from mirrorflow.replicate.service import flow_for
from mirrorflow.replicate.until import parse_until


def _fix_and_store(
    flow: FlowConfig,
    clients: FlowClients,
    *,
    run_id: str,
    until: str | int | None,
    sample: float | None,
    seed: int | None,
    delivery: str | None,
    ends: Mapping[tuple[str, int], int] | None,
    connect_timeout_s: float | None,
    groups: Callable[[str], object] | None = None,
    promised: Mapping[tuple[str, int], int] | None = None,
) -> tuple[verify_plan.VerifyPlan, int]:
    """Check both clusters answer and the ACLs are there, fix the plan and store it: the plan
    and its offset in the run-records topic. `groups` and `promised`: plan_verify's (who needs
    the copies on the target; None: the groups the flow checkpoints)."""
    check_reachable(flow, clients, connect_timeout_s)
    require_job_acls(flow, "verify", clients)
    fixed = verify_plan.plan_verify(
        flow,
        clients,
        run_id=run_id,
        until_ms=parse_until(until),
        sample=sample,
        seed=seed,
        delivery=delivery,
        ends=ends,
        groups=groups,
        promised=promised,
    )
    return fixed, verify_plan.store_plan(clients, fixed)


def plan(
    config: MirrorConfig | str,
    source: str,
    target: str,
    *,
    run_id: str,
    topics: str | None = None,
    until: str | int | None = None,
    sample: float | None = None,
    seed: int | None = None,
    delivery: str | None = None,
    ends: Mapping[tuple[str, int], int] | None = None,
    groups: Callable[[str], object] | None = None,
    promised: Mapping[tuple[str, int], int] | None = None,
    connection_extra: ConnectionExtra | None = None,
    connect_timeout_s: float | None = None,
) -> dict[str, Any]:
    """The plan step (_fix_and_store); returns the plan's overview, with `plan_offset`, what
    the compare step is handed."""
    flow = flow_for(config, source, target, topics)
    clients = FlowClients.resolve(flow, connection_extra)
    fixed, offset = _fix_and_store(
        flow,
        clients,
        run_id=run_id,
        until=until,
        sample=sample,
        seed=seed,
        delivery=delivery,
        ends=ends,
        connect_timeout_s=connect_timeout_s,
        groups=groups,
        promised=promised,
    )
    return verify_plan.plan_overview(fixed, offset)


def report(
    config: MirrorConfig | str,
    source: str,
    target: str,
    *,
    run_id: str,
    plan_offset: int,
    connection_extra: ConnectionExtra | None = None,
    wait_s: float = 30.0,
) -> dict[str, Any]:
    """Read the compare step's report(s) back, store the bounded summary and return it;
    VerificationFailed when a record is wrong or a partition could not be read."""
    flow = flow_for(config, source, target, None)
    clients = FlowClients.resolve(flow, connection_extra)
    try:
        bodies = run_reading.wait_for_run_records(
            clients.target_consumer,
            flow.name,
            run_id,
            verify_report.REPORT_KIND,
            start=plan_offset,
            timeout_s=wait_s,
        )
    except runs.RunRecordMissing as exc:
        raise verify_plan.VerifyError(f"{exc}: the compare job did not finish; see its task's log") from exc
    merged = verify_report.VerifyReport.merge([verify_report.VerifyReport(**body) for body in bodies])
    return verify_report.finish(clients, merged)


def run_locally(
    config: MirrorConfig | str,
    source: str,
    target: str,
    *,
    run_id: str,
    topics: str | None = None,
    until: str | int | None = None,
    sample: float | None = None,
    seed: int | None = None,
    delivery: str | None = None,
    connect_timeout_s: float | None = None,
) -> dict[str, Any]:
    """All three steps in this process and local workers (the CLI, tests): the same records in
    the run-records topic as a DAG run leaves."""
    flow = flow_for(config, source, target, topics)
    clients = FlowClients.resolve(flow)
    fixed, _ = _fix_and_store(
        flow,
        clients,
        run_id=run_id,
        until=until,
        sample=sample,
        seed=seed,
        delivery=delivery,
        ends=None,
        connect_timeout_s=connect_timeout_s,
    )
    started = int(time.time() * 1000)
    checks = verify_locally(compare_job_for(flow, clients, fixed), fixed)
    result = verify_report.VerifyReport.build(fixed, checks, started)
    verify_report.store_report(clients, result)
    return verify_report.finish(clients, result)
