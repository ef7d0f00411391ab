"""The whole mirror configuration: clusters, their settings and the flows MM2 would run."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from mirrorflow.config.flow import FlowConfig, redacted_view
from mirrorflow.config.flow_resolve import resolve_flow
from mirrorflow.config.layers import cluster_settings
from mirrorflow.config.mirrorflow_keys import AIRFLOW_CONNECTION_KEY
from mirrorflow.config.problems import ConfigError, Problem
from mirrorflow.config.properties import load_properties
from mirrorflow.config.providers import Setting, resolve
from mirrorflow.config.values import InvalidValue, parse_bool, parse_list

log = logging.getLogger("mirrorflow.config")

HEARTBEATS_ENABLED_KEY = "emit.heartbeats.enabled"


@dataclass(frozen=True, repr=False, eq=False)
class ClusterConfig:
    """One cluster alias and its `<alias>.*` settings (top-level bootstrap/security keys filled in)."""

    alias: str
    settings: Mapping[str, Setting] = field(repr=False)

    def __repr__(self) -> str:
        return f"ClusterConfig({self.alias!r})"

    @property
    def bootstrap_servers(self) -> str | None:
        setting = self.settings.get("bootstrap.servers")
        return ",".join(parse_list(setting.value)) if setting and setting.value.strip() else None

    @property
    def airflow_connection_id(self) -> str | None:
        setting = self.settings.get(AIRFLOW_CONNECTION_KEY)
        return setting.value.strip() if setting and setting.value.strip() else None

    def redacted(self) -> dict[str, str]:
        return redacted_view(self.settings)


@dataclass(frozen=True, repr=False, eq=False)
class MirrorConfig:
    """A parsed mm2.properties. Build it with load_config (validated) or parse_config (not)."""

    source: str
    settings: Mapping[str, Setting] = field(repr=False)
    parse_problems: tuple[Problem, ...] = ()
    warnings: tuple[Problem, ...] = ()
    _flows: dict[tuple[str, str], tuple[FlowConfig, list[Problem]]] = field(default_factory=dict, repr=False)

    def __repr__(self) -> str:
        flows = ", ".join(f"{s}->{t}" for s, t in self.pairs() if self.replication_enabled(s, t))
        return f"MirrorConfig(source={self.source!r}, clusters={list(self.clusters)}, replication_flows=[{flows}])"

    def value(self, key: str) -> str | None:
        setting = self.settings.get(key)
        return setting.value if setting else None

    @property
    def clusters(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(alias for alias in parse_list(self.value("clusters") or "") if alias))

    def cluster(self, alias: str) -> ClusterConfig:
        if alias not in self.clusters:
            raise KeyError(f"{alias!r} is not in clusters ({', '.join(self.clusters)})")
        return ClusterConfig(alias, cluster_settings(self.settings, alias))

    def pairs(self) -> list[tuple[str, str]]:
        """Every ordered pair of distinct listed clusters."""
        return [(s, t) for s in self.clusters for t in self.clusters if s != t]

    def resolved_flow(self, source: str, target: str) -> tuple[FlowConfig, list[Problem]]:
        key = (source, target)
        if key not in self._flows:
            self._flows[key] = resolve_flow(self.settings, source, target)
        return self._flows[key]

    def flow(self, source: str, target: str) -> FlowConfig:
        """Flow source->target (any pair of listed clusters, enabled or not)."""
        for alias in (source, target):
            if alias not in self.clusters:
                raise KeyError(f"{alias!r} is not in clusters ({', '.join(self.clusters)})")
        if source == target:
            raise KeyError(f"a flow needs two different clusters, got {source}->{target}")
        flow, problems = self.resolved_flow(source, target)
        errors = [p for p in problems if p.is_error]
        if errors:
            raise ConfigError(errors, f"{self.source} ({source}->{target})")
        return flow

    def replication_enabled(self, source: str, target: str) -> bool:
        """Whether MM2 would copy data S->T.

        That takes a herder for the pair (created for `S->T.enabled = true`, or for heartbeats)
        whose connectors see `enabled = true`; the connectors read `S->T.enabled` or, failing
        that, a top-level `enabled`. So a top-level `enabled = true` turns on every pair that
        has a heartbeat herder, exactly as in MM2.
        """
        flow_level = self.value(f"{source}->{target}.enabled")
        herder = _flag(flow_level, False) or self.heartbeats_enabled(source, target)
        connector = flow_level if flow_level is not None else self.value("enabled")
        return herder and _flag(connector, False)

    def heartbeats_enabled(self, source: str, target: str) -> bool:
        """`emit.heartbeats.enabled`, top level overridden by `S->T.`, as clusterPairs reads it."""
        default = _flag(self.value(HEARTBEATS_ENABLED_KEY), True)
        return _flag(self.value(f"{source}->{target}.{HEARTBEATS_ENABLED_KEY}"), default)

    @property
    def replication_flows(self) -> tuple[FlowConfig, ...]:
        """The flows that copy data and checkpoint groups (see replication_enabled)."""
        return tuple(self.flow(s, t) for s, t in self.pairs() if self.replication_enabled(s, t))

    @property
    def heartbeat_flows(self) -> tuple[FlowConfig, ...]:
        """Pairs that emit heartbeats into their target.

        MM2 creates a herder for S->T when the pair is enabled OR heartbeats are on for it
        (`emit.heartbeats.enabled`, top level or `S->T.`), so with only A->B enabled, B->A still
        exists to write heartbeats into A (which A->B then replicates as `A.heartbeats`). A pair
        whose heartbeat interval is negative has the herder but no heartbeat task; it is left out.
        """
        flows = (self.flow(s, t) for s, t in self.pairs() if self.heartbeats_enabled(s, t))
        return tuple(flow for flow in flows if flow.emit_heartbeats_interval is not None)

    @property
    def flows(self) -> tuple[FlowConfig, ...]:
        """Every pair MM2 would create a herder for (replication or heartbeats)."""
        return tuple(
            self.flow(s, t)
            for s, t in self.pairs()
            if self.replication_enabled(s, t) or self.heartbeats_enabled(s, t)
        )

    def redacted(self) -> dict[str, str]:
        """Every setting, safe for logs, Airflow task arguments and the UI."""
        return redacted_view(self.settings)


def _flag(raw: str | None, default: bool) -> bool:
    """Boolean.parseBoolean: anything but "true" (any case) is false."""
    if raw is None:
        return default
    try:
        return parse_bool(raw)
    except InvalidValue:
        return False


def parse_config(
    path_or_text: str | os.PathLike[str], *, env: Mapping[str, str] = os.environ
) -> MirrorConfig:
    """Read and resolve a config without validating it (syntax errors still raise ConfigError)."""
    file = load_properties(path_or_text)
    settings, provider_problems = resolve(file.values, env)
    return MirrorConfig(file.source, settings, tuple(file.problems + provider_problems))
