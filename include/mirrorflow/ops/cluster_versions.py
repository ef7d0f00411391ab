"""`validate --connect`'s "Cluster versions": which Kafka release each cluster runs and what it
means for the flows that use it, including what mirrorflow falls back to where an old broker
lacks something it would use.

Read from each cluster's ApiVersions answer (broker_features.py), asked once per cluster:

- `metadata.version`, finalized by every KRaft cluster, names the release whose features the
  cluster runs (a 4.4 broker not yet finalized after an upgrade from 3.9 still runs 3.9-IV0);
- `transaction.version` 2 (Kafka 4.0+, KIP-890): the broker could bump a producer's epoch on
  every transaction, but librdkafka speaks only the classic protocol, so mirrorflow's writers keep
  one epoch per producer session on every cluster, and its exactly-once copies rest on its own
  fencing and its classification of transactions a crash leaves open, as they do everywhere;
- topic IDs in Metadata answers (v10+, Kafka 2.8+): mirrorflow records which incarnation of a
  topic its state belongs to by ID; without them it can only go by name;
- `group.version` 1 (Kafka 4.0+, KIP-848): consumers of the new group protocol can only join
  groups on clusters that have it, which matters where groups fail over or back;
- the round trip of the request: a cluster tens of milliseconds away is on a slow link. A copy
  reads one source partition at a time, one fetch per round trip, so from a far source it moves
  at most `max.partition.fetch.bytes` per round trip: `slow_link_problems` suggests the larger
  fetch the docs' "Slow links" measured, for each flow whose source is far and still has less.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from mirrorflow.clients import FlowClients
from mirrorflow.config import ConfigError, MirrorConfig, Problem
from mirrorflow.config.problems import warning
from mirrorflow.ops.broker_features import BrokerFeatures, ProbeError, probe

# Kafka's MetadataVersion feature levels and their names, as Kafka 4.4.0 defines them
# (org.apache.kafka.server.common.MetadataVersion; tests/integration/test_cluster_versions.py
# checks this table against the pinned jars).
METADATA_VERSIONS = {
    7: "3.3-IV3",
    8: "3.4-IV0",
    9: "3.5-IV0",
    10: "3.5-IV1",
    11: "3.5-IV2",
    12: "3.6-IV0",
    13: "3.6-IV1",
    14: "3.6-IV2",
    15: "3.7-IV0",
    16: "3.7-IV1",
    17: "3.7-IV2",
    18: "3.7-IV3",
    19: "3.7-IV4",
    20: "3.8-IV0",
    21: "3.9-IV0",
    22: "4.0-IV0",
    23: "4.0-IV1",
    24: "4.0-IV2",
    25: "4.0-IV3",
    26: "4.1-IV0",
    27: "4.1-IV1",
    28: "4.2-IV0",
    29: "4.2-IV1",
    30: "4.3-IV0",
    31: "4.4-IV0",
    32: "4.4-IV1",
    33: "4.4-IV2",
}
API_METADATA = 3
API_INIT_PRODUCER_ID = 22
METADATA_WITH_TOPIC_IDS = 10
# One round trip above this is not a machine-room network: the copy should use the WAN settings.
REMOTE_ROUND_TRIP_MS = 10.0
# The copy consumer's fetch per partition: mirrorflow's default, and what the docs' "Slow links"
# recommend for a far source (benchmarks/wan.py).
DEFAULT_PARTITION_FETCH = 8 << 20
WAN_PARTITION_FETCH = 32 << 20


@dataclasses.dataclass(frozen=True)
class ClusterVersion:
    alias: str
    address: str
    release: str  # "3.9-IV0", "newer than 4.4-IV2", or what could not be read
    round_trip_ms: float | None
    notes: tuple[str, ...]

    @property
    def remote(self) -> bool:
        return self.round_trip_ms is not None and self.round_trip_ms >= REMOTE_ROUND_TRIP_MS

    def as_json(self) -> dict[str, Any]:
        return {
            "alias": self.alias,
            "address": self.address,
            "metadata_version": self.release,
            "round_trip_ms": None if self.round_trip_ms is None else round(self.round_trip_ms, 1),
            "notes": list(self.notes),
        }


def release_name(finalized: Mapping[str, int]) -> str:
    level = finalized.get("metadata.version")
    if level is None:
        return "no metadata.version (ZooKeeper mode, or Kafka older than 3.3)"
    newest = max(METADATA_VERSIONS)
    if level > newest:
        return f"level {level}, newer than {METADATA_VERSIONS[newest]}"
    return METADATA_VERSIONS.get(level, f"level {level}")


def meaning(features: BrokerFeatures) -> list[str]:
    """What `features` means for a flow reading from or writing to that cluster, fallbacks first."""
    notes = []
    api, finalized = features.api_max, features.finalized
    if API_INIT_PRODUCER_ID not in api:
        notes.append(
            "no transactions (Kafka older than 0.11): as a target it only takes mirrorflow.delivery = "
            "at-least-once"
        )
    elif finalized.get("transaction.version", 0) < 2:
        notes.append(
            "transactions v1 (no KIP-890 v2, Kafka < 4.0): as a target, exactly-once rests on mirrorflow's "
            "fencing by transactional.id and its check for hanging transactions, without the per-transaction "
            "epoch bump"
        )
    else:
        notes.append(
            "transactions v2 (KIP-890) on the broker; mirrorflow's librdkafka writers use the classic "
            "protocol: one epoch per producer session, transactions left open classified by mirrorflow"
        )
    if api.get(API_METADATA, 0) < METADATA_WITH_TOPIC_IDS:
        notes.append(
            "no topic IDs (Kafka < 2.8): mirrorflow goes by topic names only, so a topic deleted and "
            "recreated under the same name is not noticed; recreate topics under new names"
        )
    if finalized.get("group.version", 0) < 1:
        notes.append(
            "classic consumer groups only (no KIP-848, Kafka < 4.0): consumers that fail over or back to "
            "it must use group.protocol=classic"
        )
    if features.round_trip_ms >= REMOTE_ROUND_TRIP_MS:
        notes.append(
            f"round trip {features.round_trip_ms:.0f} ms: a slow link; use the WAN settings of the docs' "
            "Slow links"
        )
    return notes


def cluster_versions(config: MirrorConfig, *, timeout_s: float) -> list[ClusterVersion]:
    """Every cluster an enabled flow uses, asked once each, in alias order."""
    admin_configs: dict[str, Mapping[str, Any]] = {}
    for flow in config.flows:
        if not (
            config.replication_enabled(flow.source, flow.target)
            or config.heartbeats_enabled(flow.source, flow.target)
        ):
            continue
        try:
            clients = FlowClients.resolve(flow)
        except ConfigError:
            continue  # preflight reports it
        admin_configs.setdefault(flow.source, clients.admin("source"))
        admin_configs.setdefault(flow.target, clients.admin("target"))
    out = []
    for alias in sorted(admin_configs):
        settings = admin_configs[alias]
        try:
            features = probe(settings, timeout_s)
        except ProbeError as exc:
            bootstrap = str(settings.get("bootstrap.servers", ""))
            out.append(ClusterVersion(alias, bootstrap, f"not read: {exc}", None, ()))
            continue
        out.append(
            ClusterVersion(
                alias,
                features.address,
                release_name(features.finalized),
                features.round_trip_ms,
                tuple(meaning(features)),
            )
        )
    return out


def slow_link_problems(config: MirrorConfig, versions: list[ClusterVersion]) -> list[Problem]:
    """A warning per enabled flow whose source is far away and whose copy fetches less than the
    recommended amount per partition and round trip."""
    far = {v.alias: v for v in versions if v.remote}
    problems = []
    for flow in config.flows:
        if flow.source not in far or not config.replication_enabled(flow.source, flow.target):
            continue
        try:
            consumer = FlowClients.resolve(flow).consumer("source")
        except ConfigError:
            continue
        fetch = int(consumer.get("max.partition.fetch.bytes", DEFAULT_PARTITION_FETCH))
        if fetch >= WAN_PARTITION_FETCH:
            continue
        trip = far[flow.source].round_trip_ms or 0.0
        problems.append(
            warning(
                f"{flow.source}.consumer.max.partition.fetch.bytes",
                f"{flow.source} answers in {trip:.0f} ms, a slow link: {flow.name} reads each partition one "
                f"fetch per round trip, at most {fetch:,} bytes each",
                f"set {flow.source}.consumer.max.partition.fetch.bytes = {WAN_PARTITION_FETCH} (the docs' "
                "Slow links: fewer round trips per partition)",
            )
        )
    return problems
