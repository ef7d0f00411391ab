"""What every mirrorflow DAG shares: its tags, one rule for all (`mirrorflow`, what the DAG does,
and the flow `A->B` when it belongs to one: Airflow's DAG list filters by tag, so a person finds
every DAG of a kind, or of a flow, with one click), and how manual DAGs are created."""

from __future__ import annotations

PRODUCT = "mirrorflow"
# Manual DAGs (migrate, verify, failover) run only when triggered, so creating them unpaused holds
# nothing back. Paused, a triggered run would wait, and the trigger form's "Unpause on trigger"
# unpauses the DAG even when Airflow then refuses the trigger.
MANUAL_DAG_PAUSED = False
KINDS = (
    "replicate",
    "migrate",
    "verify",
    "failover",
    "heartbeats",
    "checkpoints",
    "sync_group_offsets",
    "refresh_topics",
    "sync_topic_configs",
    "sync_topic_acls",
)


def dag_tags(kind: str, flow: str | None = None) -> list[str]:
    if kind not in KINDS:
        raise ValueError(f"unknown DAG kind {kind!r}: one of {', '.join(KINDS)}")
    return [PRODUCT, kind] + ([flow] if flow else [])
