"""Consumer-offset DAGs, one of each per flow, only where MM2 would run the job:

- `mirrorflow__<A>__<B>__checkpoints`, every `emit.checkpoints.interval.seconds` (60), when
  emit.checkpoints is on and the flow writes offset-syncs;
- `mirrorflow__<A>__<B>__sync_group_offsets`, every `sync.group.offsets.interval.seconds` (60),
  when `sync.group.offsets.enabled` (off by default in MM2) and checkpoints are on.

Each DAG is one task calling the job function the CLI and the tests call. A failed pass is not
retried: the next interval's run is the retry, as in MM2.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from airflow.sdk import DAG, task

from mirrorflow.airflow.tags import dag_tags
from mirrorflow.config import FlowConfig, MirrorConfig
from mirrorflow.control.flows import checkpoints_enabled, group_sync_enabled

START = datetime(2024, 1, 1)


def checkpoints_dag_id(source: str, target: str) -> str:
    return f"mirrorflow__{source}__{target}__checkpoints"


def group_sync_dag_id(source: str, target: str) -> str:
    return f"mirrorflow__{source}__{target}__sync_group_offsets"


def _job_dag(
    dag_id: str,
    kind: str,
    flow: FlowConfig,
    interval: Any,
    task_id: str,
    run: Callable[[], dict[str, Any]],
    doc: str,
) -> DAG:
    with DAG(
        dag_id=dag_id,
        description=doc.split("\n", 1)[0],
        schedule=interval,
        start_date=START,
        catchup=False,
        max_active_runs=1,
        tags=dag_tags(kind, flow.name),
        default_args={"retries": 0},
        doc_md=doc,
    ) as dag:
        task(task_id=task_id)(run)()
    return dag


def checkpoints_dag(path: str, flow: FlowConfig) -> DAG:
    source, target = flow.source, flow.target

    def emit() -> dict[str, Any]:
        from mirrorflow.control.checkpoints import emit_checkpoints

        return emit_checkpoints(path, source, target)

    return _job_dag(
        checkpoints_dag_id(source, target),
        "checkpoints",
        flow,
        flow.emit_checkpoints_interval,
        "emit_checkpoints",
        emit,
        f"Checkpoint {source}'s consumer groups for {target} (MM2 format, exact offsets)\n\n"
        f"Translates the committed offsets of every group that passes `groups`/`groups.exclude` and has "
        f"offsets on replicated topics, and writes the checkpoints MM2 would emit to "
        f"`{flow.checkpoints_topic}` on {target}. RemoteClusterUtils.translateOffsets reads them.",
    )


def group_sync_dag(path: str, flow: FlowConfig) -> DAG:
    source, target = flow.source, flow.target

    def sync() -> dict[str, Any]:
        from mirrorflow.control.group_sync import sync_group_offsets

        return sync_group_offsets(path, source, target)

    return _job_dag(
        group_sync_dag_id(source, target),
        "sync_group_offsets",
        flow,
        flow.sync_group_offsets_interval,
        "sync_group_offsets",
        sync,
        f"Commit {source}'s group offsets on {target} for idle groups (MM2 sync.group.offsets)\n\n"
        f"Groups with active members on {target} are left alone; offsets on {target} are never rewound.",
    )


def build(path: str, config: MirrorConfig, wanted: str | None) -> dict[str, DAG]:
    dags: dict[str, DAG] = {}
    for flow in config.replication_flows:
        if checkpoints_enabled(flow):
            dag_id = checkpoints_dag_id(flow.source, flow.target)
            if wanted in (None, dag_id):
                dags[dag_id] = checkpoints_dag(path, flow)
        if group_sync_enabled(flow):
            dag_id = group_sync_dag_id(flow.source, flow.target)
            if wanted in (None, dag_id):
                dags[dag_id] = group_sync_dag(path, flow)
    return dags
