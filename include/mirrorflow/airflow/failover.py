"""`mirrorflow_failover`: the manual DAG that moves consumer groups between clusters.

Trigger form: from cluster, to cluster, groups (regex), dry run (on by default, so an
accidental trigger changes nothing), and whether to take the offsets from the checkpoints on
the target even if the source answers. The task logs the table `mirrorflow failover` prints,
returns it (XCom), and fails if any group was refused, after moving the others.
"""

from __future__ import annotations

import io
import logging
from datetime import datetime
from typing import Any

from airflow.sdk import DAG, Param, get_current_context, task

from mirrorflow.config import MirrorConfig

log = logging.getLogger(__name__)

START = datetime(2024, 1, 1)
FAILOVER_DAG_ID = "mirrorflow_failover"


class GroupsRefused(RuntimeError):
    """Some groups were not moved (they have active members on the target)."""


def failover_dag(path: str, config: MirrorConfig) -> DAG:
    clusters = list(config.clusters)
    with DAG(
        dag_id=FAILOVER_DAG_ID,
        description="Move consumer groups to another cluster exactly where they stopped (failover/failback)",
        schedule=None,
        start_date=START,
        catchup=False,
        max_active_runs=1,
        tags=["mirrorflow", "failover"],
        default_args={"retries": 0},
        params={
            "from_cluster": Param(
                clusters[0], enum=clusters, title="From cluster", description="The groups leave it."
            ),
            "to_cluster": Param(
                clusters[-1], enum=clusters, title="To cluster", description="The groups move here."
            ),
            "groups": Param(
                ".*",
                type="string",
                minLength=1,
                title="Groups (regex)",
                description="Regular expression matching whole group names, e.g. orders-.*",
            ),
            "dry_run": Param(
                True, type="boolean", title="Dry run", description="Show the table; change nothing."
            ),
            "from_checkpoints": Param(
                False,
                type="boolean",
                title="Use checkpoints",
                description="Take offsets from the latest checkpoints on the target even if the source answers "
                "(they are used anyway when it does not).",
            ),
            "divergent_tail": Param(
                "ask",
                enum=["ask", "replay", "aside"],
                title="Records never copied back",
                description="Records on the target that the flow back to the source never copied (the "
                "divergent tail, e.g. written on the original cluster after its last copy): 'ask' refuses and "
                "lists them when there are any; 'replay': the groups read them in place, in order; 'aside': "
                "they are copied to <topic>.divergent and the groups start after them.",
            ),
        },
        doc_md=(
            "Translates the chosen groups' committed offsets on **from** exactly and commits them on **to**. "
            "Groups with active members on **to** are refused and left unchanged. If **from** is down, the "
            "latest checkpoints on **to** are used. Failback: swap the clusters (the reverse flow must be "
            "enabled and caught up)."
        ),
    ) as dag:

        @task(task_id="failover")
        def run() -> dict[str, Any]:
            from rich.console import Console

            from mirrorflow.commands.failover import divergent_table, failover_table
            from mirrorflow.ops.failover import failover

            params = get_current_context()["params"]
            result = failover(
                path,
                params["from_cluster"],
                params["to_cluster"],
                params["groups"],
                dry_run=bool(params["dry_run"]),
                from_checkpoints=True if params["from_checkpoints"] else None,
                divergent=None if params.get("divergent_tail", "ask") == "ask" else params["divergent_tail"],
            )
            console = Console(record=True, width=200, file=io.StringIO())
            console.print(failover_table(result))
            if result.divergent:
                console.print(divergent_table(result))
            for warning in result.warnings:
                console.print(f"warning: {warning}")
            log.info("%s", console.export_text())
            if result.refused:
                raise GroupsRefused("; ".join(result.refused.values()))
            return result.to_dict()

        run()
    return dag


def build(path: str, config: MirrorConfig, wanted: str | None) -> dict[str, DAG]:
    if len(config.clusters) < 2 or wanted not in (None, FAILOVER_DAG_ID):
        return {}
    return {FAILOVER_DAG_ID: failover_dag(path, config)}
