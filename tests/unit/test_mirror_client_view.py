"""MirrorClient's answers from topic names alone, for every built-in replication policy."""

from __future__ import annotations

from mirrorflow.config import load_config
from mirrorflow.control.mirror_client import ReplicationView, all_sources, cluster_policy, count_hops
from mirrorflow.policy import (
    DefaultReplicationPolicy,
    IdentityReplicationPolicy,
    LegacyReplicationPolicy,
)

DEFAULT = DefaultReplicationPolicy()

C_TOPICS = frozenset(
    {
        "heartbeats",
        "B.heartbeats",
        "B.A.heartbeats",
        "A.heartbeats",  # direct A->C as well
        "B.orders",
        "B.A.orders",
        "local",
        "A.checkpoints.internal",
        "B.checkpoints.internal",
        "mm2-offsets.B.internal",
        "__consumer_offsets",
    }
)


def test_chain_hops_follow_the_topic_name() -> None:
    assert count_hops(DEFAULT, "B.A.heartbeats", "A") == 2
    assert count_hops(DEFAULT, "B.A.heartbeats", "B") == 1
    assert count_hops(DEFAULT, "B.A.heartbeats", "Z") == -1
    assert count_hops(DEFAULT, "heartbeats", "A") == -1
    assert all_sources(DEFAULT, "C.B.A.heartbeats") == ["C", "B", "A"]
    assert all_sources(DEFAULT, "heartbeats") == []


def test_view_answers_like_mirror_client() -> None:
    view = ReplicationView(DEFAULT, C_TOPICS)
    assert view.heartbeat_topics() == {"heartbeats", "B.heartbeats", "B.A.heartbeats", "A.heartbeats"}
    assert view.checkpoint_topics() == {"A.checkpoints.internal", "B.checkpoints.internal"}
    assert view.upstream_clusters() == {"A", "B"}
    # The shortest path wins: A.heartbeats (1 hop) beats B.A.heartbeats (2 hops).
    assert view.replication_hops("A") == 1
    assert view.replication_hops("B") == 1
    assert view.replication_hops("C") == -1
    assert view.remote_topics() == {
        "B.heartbeats",
        "B.A.heartbeats",
        "A.heartbeats",
        "B.orders",
        "B.A.orders",
    }
    assert view.remote_topics("B") == {"B.heartbeats", "B.A.heartbeats", "B.orders", "B.A.orders"}


def test_only_a_two_hop_chain_gives_two_hops() -> None:
    view = ReplicationView(DEFAULT, frozenset({"heartbeats", "B.heartbeats", "B.A.heartbeats"}))
    assert view.replication_hops("A") == 2


def test_custom_separator() -> None:
    policy = DefaultReplicationPolicy("_")
    view = ReplicationView(policy, frozenset({"B_A_heartbeats", "B_orders", "A_checkpoints_internal"}))
    assert view.replication_hops("A") == 2
    assert view.upstream_clusters() == {"A", "B"}
    assert view.checkpoint_topics() == {"A_checkpoints_internal"}
    assert view.remote_topics() == {"B_A_heartbeats", "B_orders"}


def test_identity_policy_cycles_count_as_unreachable() -> None:
    # Under identity naming every ordinary topic "comes from" the configured alias and its
    # upstream is itself: MirrorClient's visited-set guard stops the walk.
    policy = IdentityReplicationPolicy(source_alias="A")
    assert count_hops(policy, "orders", "B") == -1
    assert count_hops(policy, "orders", "A") == 1
    assert all_sources(policy, "orders") == ["A"]
    view = ReplicationView(policy, frozenset({"orders", "heartbeats", "B.A.heartbeats"}))
    assert view.replication_hops("A") == 2
    assert view.upstream_clusters() == {"A", "B"}


def test_legacy_policy_sees_only_heartbeat_paths() -> None:
    view = ReplicationView(LegacyReplicationPolicy(), frozenset({"orders", "A.orders", "B.A.heartbeats"}))
    assert view.remote_topics() == {"B.A.heartbeats"}
    assert view.replication_hops("A") == 2


def test_cluster_policy_reads_top_level_then_cluster_settings() -> None:
    config = load_config(
        "clusters = A, B\n"
        "A.bootstrap.servers = a:9092\n"
        "B.bootstrap.servers = b:9092\n"
        "replication.policy.separator = _\n"
        "B.replication.policy.separator = -\n"
    )
    assert cluster_policy(config, "A").format_remote_topic("X", "t") == "X_t"
    assert cluster_policy(config, "B").format_remote_topic("X", "t") == "X-t"
