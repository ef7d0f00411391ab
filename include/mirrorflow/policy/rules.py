"""MM2's per-flow decisions: which source topics a flow copies and how checkpoint topics are named.

These take anything that looks like a flow (mirrorflow.config.FlowConfig does), so planning,
checkpointing and tests share one implementation of MirrorSourceConnector.shouldReplicateTopic
and MirrorCheckpointTask.renameTopicPartition.
"""

from __future__ import annotations

from typing import Protocol

from mirrorflow.policy.filters import GroupFilter, TopicFilter
from mirrorflow.policy.replication import ReplicationPolicy


class FlowRules(Protocol):
    """The parts of a flow the rules read."""

    @property
    def source(self) -> str: ...

    @property
    def target(self) -> str: ...

    @property
    def policy(self) -> ReplicationPolicy: ...

    @property
    def topic_filter(self) -> TopicFilter: ...

    @property
    def group_filter(self) -> GroupFilter: ...

    @property
    def heartbeats_replication_enabled(self) -> bool: ...


def is_cycle(policy: ReplicationPolicy, target_alias: str, topic: str) -> bool:
    """True if `topic` (on the source) already came from `target_alias`, directly or via other hops."""
    while True:
        source = policy.topic_source(topic)
        if source is None:
            return False
        if source == target_alias:
            return True
        upstream = policy.upstream_topic(topic)
        if upstream is None or upstream == topic:
            return False
        topic = upstream


def should_replicate_topic(flow: FlowRules, topic: str) -> bool:
    """(topic filter OR replicated heartbeats) AND NOT internal AND NOT a cycle back to the target."""
    policy = flow.policy
    wanted = flow.topic_filter.should_replicate_topic(topic) or (
        flow.heartbeats_replication_enabled and policy.is_heartbeats_topic(topic)
    )
    return wanted and not policy.is_internal_topic(topic) and not is_cycle(policy, flow.target, topic)


def should_replicate_group(flow: FlowRules, group: str) -> bool:
    return flow.group_filter.should_replicate_group(group)


def remote_topic(flow: FlowRules, topic: str) -> str:
    """The name `topic` from the flow's source gets on its target."""
    return flow.policy.format_remote_topic(flow.source, topic)


def checkpoint_topic(flow: FlowRules, upstream_topic: str) -> str:
    """The target-side topic a checkpoint names for a group offset on `upstream_topic`.

    A topic that came from the target itself goes back to its original name (`B.orders` on A is
    `orders` on B); any other topic gets the flow's remote name (`orders` on A is `A.orders` on B).
    """
    if flow.policy.topic_source(upstream_topic) == flow.target:
        return flow.policy.original_topic(upstream_topic)
    return flow.policy.format_remote_topic(flow.source, upstream_topic)
