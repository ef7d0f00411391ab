"""The checks of a configuration's flows taken together (validation.py checks each key): the
clusters they use have bootstrap servers, identity-named flows form no cycle without provenance
headers, checkpoints have their offset-syncs, and (for `mirrorflow validate`) some flow is
enabled at all.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mirrorflow.config.flow import FlowConfig
from mirrorflow.config.mirrorflow_keys import AIRFLOW_CONNECTION_KEY
from mirrorflow.config.problems import Problem, error, warning
from mirrorflow.policy.replication import (
    DEFAULT_POLICY_CLASS,
    IdentityReplicationPolicy,
    LegacyReplicationPolicy,
)

if TYPE_CHECKING:
    from mirrorflow.config.model import MirrorConfig


def nothing_replicated(config: MirrorConfig) -> list[Problem]:
    """An error for a config whose clusters enable no flow: it replicates nothing, because every
    S->T.enabled defaults to false (the multi-cluster guides' configs often forget them).

    Not part of validate(): such a file is still usable where no enabled flow is needed (a one-off
    migrate of a named flow, heartbeats, status), so only `mirrorflow validate` reports it.
    """
    pairs = config.pairs()
    if not pairs or any(config.replication_enabled(s, t) for s, t in pairs):
        return []
    mentioned = [(s, t) for s, t in pairs if any(key.startswith(f"{s}->{t}.") for key in config.settings)]
    keys = [f"{s}->{t}.enabled = true" for s, t in (mentioned or pairs)]
    return [
        error(
            "<source>-><target>.enabled",
            f"no flow is enabled, so nothing is replicated: MM2 turns on no pair of clusters by default "
            f"({', '.join(config.clusters)}; every <source>-><target>.enabled defaults to false)",
            "add a line for each flow you want: " + "; ".join(keys),
        )
    ]


def check_bootstrap(config: MirrorConfig, flows: list[FlowConfig]) -> list[Problem]:
    used: dict[str, str] = {}
    for flow in flows:
        used.setdefault(flow.source, flow.name)
        used.setdefault(flow.target, flow.name)
    problems = []
    for alias, flow_name in used.items():
        cluster = config.cluster(alias)
        if cluster.bootstrap_servers is None and cluster.airflow_connection_id is None:
            problems.append(
                error(
                    f"{alias}.bootstrap.servers",
                    f"cluster {alias} is used by flow {flow_name} but has no bootstrap.servers",
                    f"set {alias}.bootstrap.servers=host:9092 (or {alias}.{AIRFLOW_CONNECTION_KEY} naming a kafka connection)",
                )
            )
    return problems


def _renames_nothing(flow: FlowConfig) -> bool:
    return isinstance(flow.policy, IdentityReplicationPolicy | LegacyReplicationPolicy)


def check_identity_cycles(flows: list[FlowConfig]) -> list[Problem]:
    """Identity-named flows that form a cycle loop records forever unless every hop checks provenance."""
    edges = {(f.source, f.target): f for f in flows if _renames_nothing(f)}
    problems = []
    for (source, target), flow in edges.items():
        if flow.provenance_headers_enabled or not _reaches(edges, target, source):
            continue
        setting = flow.settings.get("mirrorflow.provenance.headers.enabled")
        problems.append(
            error(
                setting.origin if setting else f"{flow.name}.mirrorflow.provenance.headers.enabled",
                f"{source}->{target} keeps topic names ({type(flow.policy).__name__}) and is part of a replication "
                "cycle, so without provenance headers records would loop forever (MM2 cannot detect this cycle)",
                f"leave mirrorflow.provenance.headers.enabled=true (the default) or use {DEFAULT_POLICY_CLASS}",
            )
        )
    return problems


def _reaches(edges: dict[tuple[str, str], FlowConfig], start: str, goal: str) -> bool:
    seen, todo = {start}, [start]
    while todo:
        node = todo.pop()
        if node == goal:
            return True
        for source, target in edges:
            if source == node and target not in seen:
                seen.add(target)
                todo.append(target)
    return False


def check_offset_syncs(flows: list[FlowConfig]) -> list[Problem]:
    return [
        warning(
            f"{flow.name}.emit.offset-syncs.enabled",
            "checkpoints need offset-syncs, so this flow emits no checkpoints (MM2 3.9+ rejects this combination)",
            "enable offset-syncs or set emit.checkpoints.enabled=false",
        )
        for flow in flows
        if not flow.emit_offset_syncs_enabled and flow.emit_checkpoints_interval is not None
    ]
