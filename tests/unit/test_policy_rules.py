"""shouldReplicateTopic, cycle detection and checkpoint renaming, on flows built from real configs."""

from __future__ import annotations

from mirrorflow.config import FlowConfig, load_config
from mirrorflow.policy import (
    DefaultReplicationPolicy,
    IdentityReplicationPolicy,
    LegacyReplicationPolicy,
    checkpoint_topic,
    is_cycle,
    remote_topic,
    should_replicate_group,
    should_replicate_topic,
)

BASE = "clusters = A, B, C\nA.bootstrap.servers = a:9092\nB.bootstrap.servers = b:9092\nC.bootstrap.servers = c:9092\n"


def _flow(extra: str = "", source: str = "A", target: str = "B") -> FlowConfig:
    return load_config(BASE + f"{source}->{target}.enabled = true\n" + extra).flow(source, target)


def test_is_cycle_recurses_upstream() -> None:
    policy = DefaultReplicationPolicy()
    assert is_cycle(policy, "B", "B.orders")
    assert is_cycle(policy, "B", "C.B.orders")
    assert not is_cycle(policy, "B", "C.orders")
    assert not is_cycle(policy, "B", "orders")


def test_identity_policy_sees_no_cycles() -> None:
    policy = IdentityReplicationPolicy(source_alias="A")
    assert not is_cycle(policy, "B", "orders")
    assert is_cycle(IdentityReplicationPolicy(source_alias="B"), "B", "orders")
    assert not is_cycle(LegacyReplicationPolicy(), "B", "orders")


def test_should_replicate_topic_default_flow() -> None:
    flow = _flow()
    assert should_replicate_topic(flow, "orders")
    assert not should_replicate_topic(flow, "B.orders")  # came from the target
    assert not should_replicate_topic(flow, "C.B.orders")
    assert should_replicate_topic(flow, "C.orders")
    assert not should_replicate_topic(flow, "__consumer_offsets")
    assert not should_replicate_topic(flow, "mm2-offset-syncs.B.internal")
    assert not should_replicate_topic(flow, "A.checkpoints.internal")


def test_heartbeats_bypass_the_topic_filter_unless_disabled() -> None:
    flow = _flow("A->B.topics = orders\nA->B.topics.exclude = .*heartbeats\n")
    assert should_replicate_topic(flow, "heartbeats")
    assert should_replicate_topic(flow, "C.heartbeats")
    assert not should_replicate_topic(flow, "B.heartbeats")  # still a cycle
    assert not should_replicate_topic(flow, "payments")
    off = _flow("A->B.topics = orders\nheartbeats.replication.enabled = false\n")
    assert not should_replicate_topic(off, "heartbeats")


def test_group_filter_of_a_flow() -> None:
    flow = _flow("A->B.groups = app-.*\n")
    assert should_replicate_group(flow, "app-1")
    assert not should_replicate_group(flow, "other")


def test_remote_and_checkpoint_topic_names() -> None:
    flow = _flow()
    assert remote_topic(flow, "orders") == "A.orders"
    assert checkpoint_topic(flow, "orders") == "A.orders"
    assert checkpoint_topic(flow, "B.orders") == "orders"  # came from the target: original name
    # MM2 applies originalTopic, which strips every hop, not just the target's prefix.
    assert checkpoint_topic(flow, "B.C.orders") == "orders"
    assert checkpoint_topic(flow, "C.orders") == "A.C.orders"


def test_identity_flow_renames_nothing() -> None:
    flow = _flow("replication.policy.class = org.apache.kafka.connect.mirror.IdentityReplicationPolicy\n")
    assert remote_topic(flow, "orders") == "orders"
    assert remote_topic(flow, "heartbeats") == "A.heartbeats"
    assert flow.policy.topic_source("orders") == "A"
    assert should_replicate_topic(flow, "orders")
    assert checkpoint_topic(flow, "orders") == "orders"
