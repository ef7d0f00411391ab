"""Glue between a plan and the copy engine, shared by the Spark job, the CLI and tests.

The Spark job fans units out over executors; the CLI runs them in local worker processes. Both
build the CopyJob, store the report and measure the lag left the same way, here.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import as_completed
from typing import Any

from confluent_kafka.admin import OffsetSpec

from mirrorflow import logs
from mirrorflow.clients import FlowClients
from mirrorflow.config import FlowConfig
from mirrorflow.config.replicate_mode import MICRO_BATCH
from mirrorflow.kafka import admin_client
from mirrorflow.kafka_offsets import list_offsets
from mirrorflow.replicate import runs
from mirrorflow.replicate.copy import CopyJob, UnitResult, copy_slice
from mirrorflow.replicate.copy.job import GROUP_PARTITIONS, WINDOW_GROUP_PARTITIONS
from mirrorflow.replicate.plan import Plan
from mirrorflow.replicate.progress import read_progress
from mirrorflow.replicate.report import RunReport


def copy_job_for(
    flow: FlowConfig,
    clients: FlowClients,
    plan: Plan,
    *,
    workers: int | None = None,
    announced: Iterable[int] = (),
) -> CopyJob:
    """The copy job of `plan`; `workers` is how many processes copy at once (the byte-rate cap is
    shared among them), by default the plan's slices (a micro-batch window passes its tasks: its
    plan may have nothing pending yet). Its writers fence the ids of the other writer-slot counts
    the plan's progress names, and of those `announced` (window/announced.py)."""
    syncs_on_target = flow.offset_syncs_cluster == flow.target
    return CopyJob(
        run_id=plan.run_id,
        source=flow.source,
        target=flow.target,
        exactly_once=plan.delivery == "exactly-once",
        max_records=plan.max_records,
        max_bytes=plan.max_bytes,
        provenance=flow.provenance_headers_enabled,
        progress_topic=flow.offset_storage_topic,
        offset_syncs_topic=flow.offset_syncs_topic if flow.emit_offset_syncs_enabled else None,
        offset_syncs_on_target=syncs_on_target,
        source_consumer=clients.source_consumer,
        target_producer=clients.target_producer,
        target_consumer=clients.target_consumer,
        source_producer=clients.source_producer,
        source_admin=clients.source_admin,
        target_admin=clients.target_admin,
        unreachable_timeout_s=flow.cluster_unreachable_timeout_ms / 1000,
        max_bytes_per_second=flow.replicate_max_bytes_per_second,
        workers=workers or max(1, len(plan.slices())),
        remote_topics={span.topic: span.remote_topic for span in plan.spans},
        slots=plan.slots,
        older_slots=tuple(
            sorted(({s.progress_slots for s in plan.spans} | set(announced)) - {plan.slots, 0})
        ),
        progress_start=plan.progress_read,
        group_partitions=WINDOW_GROUP_PARTITIONS if flow.replicate_mode == MICRO_BATCH else GROUP_PARTITIONS,
    )


def run_locally(
    job: CopyJob, plan: Plan, *, on_result: Callable[[UnitResult], None] | None = None
) -> list[UnitResult]:
    """Copy every unit of the plan with up to tasks.max local worker processes.

    Workers are spawned, not forked: a fork copies whatever locks the parent's librdkafka
    threads (the progress watcher's, clients not yet collected) hold at that moment, and a worker
    whose clients meet such a lock sits in its copy loop receiving nothing."""
    slices = plan.slices()
    results: list[UnitResult] = []
    if not slices:
        return results
    with logs.worker_pool(len(slices)) as pool:
        futures = [pool.submit(copy_slice, job, s) for s in slices]
        for future in as_completed(futures):
            for result in future.result():
                results.append(result)
                if on_result is not None:
                    on_result(result)
    return results


def lag_left(
    flow: FlowConfig, clients: FlowClients, plan: Plan, *, timeout_s: float = 60.0
) -> dict[str, int]:
    """Offsets still to copy per source topic, measured now (the source kept moving)."""
    parts = [(s.topic, s.partition) for s in plan.spans]
    if not parts:
        return {}
    stable = list_offsets(admin_client(clients.source_admin), parts, OffsetSpec.latest(), timeout_s=timeout_s)
    progress = read_progress(
        clients.target_consumer, flow.offset_storage_topic, flow.source, timeout_s=timeout_s
    )
    lag: dict[str, int] = {}
    for topic, partition in parts:
        done = progress.get((topic, partition), -1)
        lag[topic] = lag.get(topic, 0) + max(0, stable[(topic, partition)] - (done + 1))
    return lag


STORE_AFTER_LOSS_S = 2.0
"""How long a report waits for a target the copy just found unreachable: a short last chance, so
the run ends within the unreachable limit and not a minute later."""


def store_report(
    clients: FlowClients,
    plan: Plan,
    results: list[UnitResult],
    started_ms: int,
    *,
    timeout_s: float | None = None,
    window: Mapping[str, Any] | None = None,
) -> RunReport:
    """Store the run's report, every partition of it (in chunks when large, written as it is
    encoded); raises runs.RunRecordNotStored (the report attached) when the target does not
    take it, so a caller can still show what each partition did. `window`: a micro-batch
    window's own figures (RunReport.window)."""
    if timeout_s is None:
        lost = any(r.unreachable == plan.target for r in results)
        timeout_s = STORE_AFTER_LOSS_S if lost else 60.0
    report = RunReport.from_results(plan, results, started_ms, int(time.time() * 1000), window=window)
    try:
        runs.write_run_record(
            clients.target_producer,
            plan.flow,
            plan.run_id,
            "report",
            report.json_pieces(),
            timeout_s=timeout_s,
        )
    except runs.RunRecordNotStored as exc:
        exc.report = report  # type: ignore[attr-defined]
        raise
    return report
