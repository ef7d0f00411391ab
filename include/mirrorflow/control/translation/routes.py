"""Which way a topic of a flow's source translates, and what it is called on the target."""

from __future__ import annotations

from dataclasses import dataclass

from mirrorflow.config import FlowConfig
from mirrorflow.policy import checkpoint_topic, should_replicate_topic

FORWARD = "forward"
BACKWARD = "backward"


@dataclass(frozen=True, slots=True)
class Route:
    """How a topic of X maps to Y: the kind of translation and the topic name on Y.

    For BACKWARD routes the topic on Y is also the one the reverse flow copied from.
    """

    kind: str
    target_topic: str


def route_of(flow: FlowConfig, topic: str, *, reverse: FlowConfig | None) -> Route | None:
    """FORWARD for a topic the flow replicates; BACKWARD for a topic the reverse flow brought
    from the flow's target (failback); None for any other topic."""
    if should_replicate_topic(flow, topic):
        return Route(FORWARD, flow.policy.format_remote_topic(flow.source, topic))
    if reverse is None or flow.policy.topic_source(topic) != flow.target:
        return None
    upstream = flow.policy.upstream_topic(topic)
    if upstream is None or upstream != checkpoint_topic(flow, topic):
        return None
    return Route(BACKWARD, upstream)
