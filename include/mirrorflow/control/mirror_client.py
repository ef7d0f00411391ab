"""MM2's MirrorClient for mirrorflow.

MirrorClient (connect/mirror-client) looks at ONE cluster and reads replication paths from topic
names alone: every heartbeat topic (`heartbeats`, `A.heartbeats`, `B.A.heartbeats`, ...) names
the chain of clusters its heartbeats travelled through, so the upstream clusters and the hops to
each follow from a topic listing and the cluster's replication policy. The functions here give
the same answers as MirrorClient's heartbeatTopics, checkpointTopics, upstreamClusters,
replicationHops and remoteTopics (cycle guards included), so monitoring built for MM2 agrees with
`mirrorflow status`. Consumer offset translation lives in control.translation; the replication
status built on this client, in control.mirror_status.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from confluent_kafka.admin import OffsetSpec

from mirrorflow.config import FlowConfig, MirrorConfig
from mirrorflow.config.airflow_connections import ConnectionExtra
from mirrorflow.config.layers import cluster_settings
from mirrorflow.kafka import LIBRDKAFKA_LOG, admin_client
from mirrorflow.kafka_offsets import list_offsets
from mirrorflow.mm2.formats import Heartbeat, Mm2FormatError
from mirrorflow.policy.replication import DEFAULT_POLICY_CLASS, ReplicationPolicy, load_replication_policy
from mirrorflow.replicate.run_history import read_ranges

log = logging.getLogger("mirrorflow.status")

TIMEOUT_S = 15.0
POLICY_CLASS_KEY = "replication.policy.class"


def count_hops(policy: ReplicationPolicy, topic: str, alias: str) -> int:
    """Hops from `alias` to this cluster along `topic`'s name (`B.A.heartbeats`, A -> 2), or -1.

    A source seen twice means a policy that cannot tell cycles apart (identity naming): -1.
    """
    hops = 0
    visited: set[str] = set()
    while True:
        hops += 1
        source = policy.topic_source(topic)
        if source is None:
            return -1
        if source == alias:
            return hops
        if source in visited:
            return -1
        visited.add(source)
        upstream = policy.upstream_topic(topic)
        if upstream is None:
            return -1
        topic = upstream


def all_sources(policy: ReplicationPolicy, topic: str) -> list[str]:
    """Every cluster on `topic`'s chain, nearest first (`B.A.heartbeats` -> [B, A])."""
    sources: list[str] = []
    source = policy.topic_source(topic)
    while source is not None and source not in sources:
        sources.append(source)
        upstream = policy.upstream_topic(topic)
        if upstream is None:
            break
        topic = upstream
        source = policy.topic_source(topic)
    return sources


@dataclass(frozen=True)
class ReplicationView:
    """MirrorClient's answers for one listing of one cluster's topics."""

    policy: ReplicationPolicy
    topics: frozenset[str]

    def heartbeat_topics(self) -> set[str]:
        return {t for t in self.topics if self.policy.is_heartbeats_topic(t)}

    def checkpoint_topics(self) -> set[str]:
        return {t for t in self.topics if self.policy.is_checkpoints_topic(t)}

    def upstream_clusters(self) -> set[str]:
        return {alias for t in self.heartbeat_topics() for alias in all_sources(self.policy, t)}

    def replication_hops(self, alias: str) -> int:
        """Fewest hops from `alias` over all heartbeat topics; -1 if no heartbeat came from it."""
        hops = [h for t in self.heartbeat_topics() if (h := count_hops(self.policy, t, alias)) != -1]
        return min(hops, default=-1)

    def remote_topics(self, source: str | None = None) -> set[str]:
        """Non-internal topics with a source cluster (only those directly from `source`, if given)."""
        remote = {
            t
            for t in self.topics
            if not self.policy.is_internal_topic(t) and self.policy.topic_source(t) is not None
        }
        return remote if source is None else {t for t in remote if self.policy.topic_source(t) == source}


def cluster_policy(config: MirrorConfig, alias: str) -> ReplicationPolicy:
    """The policy MirrorClient uses for a cluster: top-level settings, then `<alias>.*` ones."""
    values = {key: setting.value for key, setting in config.settings.items()}
    values.update({key: setting.value for key, setting in cluster_settings(config.settings, alias).items()})
    return load_replication_policy(values.get(POLICY_CLASS_KEY, DEFAULT_POLICY_CLASS), values)


def cluster_client_configs(
    config: MirrorConfig, alias: str, *, connection_extra: ConnectionExtra | None = None
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(admin, consumer) librdkafka configs for cluster `alias`, its Airflow connection merged in.

    They are the target-side clients of a flow into `alias`, which carry exactly the cluster's
    bootstrap, security and client settings.
    """
    others = [other for other in config.clusters if other != alias]
    if not others:
        raise ValueError(
            f"cluster {alias!r} is the only one in clusters; status needs at least two clusters to compare"
        )
    flow = next((f for f in config.flows if f.target == alias), None) or config.flow(others[0], alias)
    return (
        status_client_config(flow, "target", "admin", connection_extra),
        status_client_config(flow, "target", "consumer", connection_extra),
    )


def status_client_config(
    flow: FlowConfig, side: str, kind: str, connection_extra: ConnectionExtra | None
) -> dict[str, Any]:
    """A status reader's client config. librdkafka's lines go through Python logging with repeats
    held back (mirrorflow.kafka.RepeatFilter): the status app reads a dead cluster every refresh,
    and each read would otherwise print every failed connection."""
    config = flow.client_config(side, kind, role=f"status-{kind}", connection_extra=connection_extra)
    return {"logger": LIBRDKAFKA_LOG, **config}


class MirrorClient:
    """MirrorClient on one cluster: each call lists the cluster's topics afresh, as MM2's does."""

    def __init__(
        self,
        admin_config: dict[str, Any],
        policy: ReplicationPolicy,
        *,
        consumer_config: dict[str, Any] | None = None,
        timeout_s: float = TIMEOUT_S,
    ) -> None:
        self.policy = policy
        self.consumer_config = consumer_config if consumer_config is not None else admin_config
        self.timeout_s = timeout_s
        self._admin = admin_client(admin_config)

    def __repr__(self) -> str:
        return f"MirrorClient(policy={self.policy!r})"

    @classmethod
    def for_cluster(
        cls,
        config: MirrorConfig,
        alias: str,
        *,
        connection_extra: ConnectionExtra | None = None,
        timeout_s: float = TIMEOUT_S,
    ) -> MirrorClient:
        admin, consumer = cluster_client_configs(config, alias, connection_extra=connection_extra)
        return cls(admin, cluster_policy(config, alias), consumer_config=consumer, timeout_s=timeout_s)

    def list_topics(self) -> dict[str, int]:
        """Topic -> partition count (topics the broker reports with an error are left out)."""
        metadata = self._admin.list_topics(timeout=self.timeout_s).topics
        return {name: len(meta.partitions) for name, meta in metadata.items() if meta.error is None}

    def view(self) -> ReplicationView:
        return ReplicationView(self.policy, frozenset(self.list_topics()))

    def heartbeat_topics(self) -> set[str]:
        return self.view().heartbeat_topics()

    def checkpoint_topics(self) -> set[str]:
        return self.view().checkpoint_topics()

    def upstream_clusters(self) -> set[str]:
        return self.view().upstream_clusters()

    def replication_hops(self, alias: str) -> int:
        return self.view().replication_hops(alias)

    def remote_topics(self, source: str | None = None) -> set[str]:
        return self.view().remote_topics(source)

    def latest_heartbeats(self, topics: dict[str, int]) -> dict[str, dict[tuple[str, str], int]]:
        """Per heartbeat topic (name -> partitions), (source alias, target alias) -> newest
        timestamp. Records that are not heartbeats are skipped, as MM2's readers skip them."""
        parts = [(topic, p) for topic, count in topics.items() for p in range(count)]
        # Up to the last stable offset: a replicated heartbeat topic may have a copy in flight.
        ends = list_offsets(self._admin, parts, OffsetSpec.latest())
        latest: dict[str, dict[tuple[str, str], int]] = {topic: {} for topic in topics}
        for message in read_ranges(
            self.consumer_config, {tp: (0, end) for tp, end in ends.items()}, self.timeout_s
        ):
            try:
                beat = Heartbeat.decode(message.key(), message.value())
            except Mm2FormatError:
                continue
            newest = latest[message.topic()]
            key = (beat.source_alias, beat.target_alias)
            newest[key] = max(newest.get(key, beat.timestamp_ms), beat.timestamp_ms)
        return latest
