"""`mirrorflow_failover`: the manual DAG that moves consumer groups between clusters.

Trigger form: from cluster, to cluster, groups (regex), dry run (on by default, so an
accidental trigger changes nothing), and whether to take the offsets from the checkpoints on
the target even if the source answers. The task logs the table `mirrorflow failover` prints,
returns it (XCom), and fails if any group was refused, after moving the others, its error naming
each refused group and why before Airflow's traceback.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import TYPE_CHECKING, Any

from airflow.sdk import DAG, Param, get_current_context, task

from mirrorflow.airflow.tags import MANUAL_DAG_PAUSED, dag_tags
from mirrorflow.airflow.task_errors import failing_at_once
from mirrorflow.config import MirrorConfig

if TYPE_CHECKING:  # Kafka clients are imported by tasks, not when Airflow parses the DAG file
    from mirrorflow.ops.failover import FailoverResult

log = logging.getLogger(__name__)

START = datetime(2024, 1, 1)
FAILOVER_DAG_ID = "mirrorflow_failover"


def log_failover(result: FailoverResult) -> None:
    """The failover table (each group and partition, the offsets committed or that would be),
    the divergent tail if any, and the warnings, as plain lines in the task's log."""
    from mirrorflow.ops.failover_tables import divergent_table, failover_table
    from mirrorflow.replicate.tables import plain_lines

    for line in plain_lines(failover_table(result)):
        log.info("%s", line)
    if result.divergent:
        for line in plain_lines(divergent_table(result)):
            log.info("%s", line)
    for warning in result.warnings:
        log.warning("%s", warning)


def refused_message(result: FailoverResult) -> str:
    """A dry run commits nothing: its count is of the groups it would have moved."""
    from mirrorflow.ops.failover import WOULD_COMMIT

    if result.dry_run:
        moved = f"{len({r.group for r in result.rows if r.action == WOULD_COMMIT})} would have moved"
    else:
        moved = f"{len(result.committed)} moved"
    return f"{len(result.refused)} group(s) not moved ({moved}): " + " ".join(
        f"{why.rstrip('.')}." for why in result.refused.values()
    )


def failover_dag(path: str, config: MirrorConfig) -> DAG:
    clusters = list(config.clusters)
    with DAG(
        dag_id=FAILOVER_DAG_ID,
        description="Move consumer groups to another cluster exactly where they stopped (failover/failback)",
        schedule=None,
        start_date=START,
        catchup=False,
        max_active_runs=1,
        is_paused_upon_creation=MANUAL_DAG_PAUSED,
        tags=dag_tags("failover"),
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

        @task(task_id="failover", show_return_value_in_logs=False)
        def run() -> dict[str, Any]:
            from airflow.sdk.exceptions import AirflowFailException

            from mirrorflow.ops.failover import FailoverError, failover

            params = get_current_context()["params"]
            with failing_at_once(FailoverError):
                result = failover(
                    path,
                    params["from_cluster"],
                    params["to_cluster"],
                    params["groups"],
                    dry_run=bool(params["dry_run"]),
                    from_checkpoints=True if params["from_checkpoints"] else None,
                    divergent=None
                    if params.get("divergent_tail", "ask") == "ask"
                    else params["divergent_tail"],
                )
                log_failover(result)
                if result.refused:
                    raise AirflowFailException(refused_message(result))
            return result.to_dict()

        run()
    return dag


def build(path: str, config: MirrorConfig, wanted: str | None) -> dict[str, DAG]:
    if len(config.clusters) < 2 or wanted not in (None, FAILOVER_DAG_ID):
        return {}
    return {FAILOVER_DAG_ID: failover_dag(path, config)}
