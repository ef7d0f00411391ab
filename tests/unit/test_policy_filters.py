"""Topic, group and config-property filters with MM2's semantics."""

from __future__ import annotations

import pytest

from mirrorflow.policy import (
    ConfigOp,
    ConfigOpType,
    ConfigPropertyFilter,
    GroupFilter,
    TopicConfigEntry,
    TopicFilter,
    topic_config_sync_ops,
    topic_creation_configs,
)
from mirrorflow.policy.provenance import RECORD_HEADROOM


@pytest.mark.parametrize(
    ("topic", "replicated"),
    [
        ("orders", True),
        ("mm2-offsets.A.internal", False),
        ("connect-configs-internal", False),
        ("orders.replica", False),
        ("__consumer_offsets", False),
        ("internal", True),
    ],
)
def test_default_topic_filter(topic: str, replicated: bool) -> None:
    assert TopicFilter().should_replicate_topic(topic) is replicated


def test_patterns_are_joined_and_fully_matched() -> None:
    topic_filter = TopicFilter(["orders", "pay.*"], [])
    assert topic_filter.should_replicate_topic("orders")
    assert not topic_filter.should_replicate_topic("orders2")  # full match, not search
    assert not topic_filter.should_replicate_topic("my-orders")
    assert topic_filter.should_replicate_topic("payments")


def test_empty_include_matches_nothing_and_empty_exclude_excludes_nothing() -> None:
    assert not TopicFilter([], []).should_replicate_topic("orders")
    assert TopicFilter([".*"], []).should_replicate_topic("__consumer_offsets")


def test_excludes_win() -> None:
    topic_filter = TopicFilter([".*"], ["secret.*"])
    assert not topic_filter.should_replicate_topic("secrets")
    assert topic_filter.should_replicate_topic("orders")


def test_trailing_empty_list_item_joins_to_an_empty_alternative() -> None:
    """`topics = a,` is ["a", ""] (Java split with limit -1): the regex `a|` also matches ""."""
    topic_filter = TopicFilter(["a", ""], [])
    assert topic_filter.should_replicate_topic("a")
    assert topic_filter.should_replicate_topic("")
    assert not topic_filter.should_replicate_topic("b")


@pytest.mark.parametrize(
    ("group", "replicated"),
    [("app", True), ("console-consumer-123", False), ("connect-mm2", False), ("__internal", False)],
)
def test_default_group_filter(group: str, replicated: bool) -> None:
    assert GroupFilter().should_replicate_group(group) is replicated


def test_config_property_filter_defaults() -> None:
    prop_filter = ConfigPropertyFilter()
    for name in (
        "min.insync.replicas",
        "unclean.leader.election.enable",
        "message.timestamp.type",
        "leader.replication.throttled.replicas",
    ):
        assert not prop_filter.should_replicate_config_property(name)
    assert prop_filter.should_replicate_config_property("retention.ms")
    assert not prop_filter.should_replicate_source_default("retention.ms")
    assert ConfigPropertyFilter(use_defaults_from="source").should_replicate_source_default("retention.ms")
    assert not ConfigPropertyFilter(use_defaults_from="Source").should_replicate_source_default("x")


ENTRIES = [
    TopicConfigEntry("retention.ms", "86400000", "DYNAMIC_TOPIC_CONFIG"),
    TopicConfigEntry("cleanup.policy", "delete", "DEFAULT_CONFIG"),
    TopicConfigEntry("segment.bytes", "1048576", "STATIC_BROKER_CONFIG"),
    TopicConfigEntry("compression.type", "zstd", "DYNAMIC_DEFAULT_BROKER_CONFIG"),
    TopicConfigEntry("min.insync.replicas", "2", "DYNAMIC_TOPIC_CONFIG"),
    TopicConfigEntry("sasl.secret", "x", "DYNAMIC_TOPIC_CONFIG", is_sensitive=True),
    TopicConfigEntry("remote.storage.enable", "false", "DYNAMIC_TOPIC_CONFIG", is_read_only=True),
]


def test_incremental_config_sync_ops() -> None:
    ops = topic_config_sync_ops(ENTRIES, ConfigPropertyFilter())
    assert ops == [
        ConfigOp("retention.ms", ConfigOpType.SET, "86400000"),
        ConfigOp("cleanup.policy", ConfigOpType.DELETE, None),
        ConfigOp("compression.type", ConfigOpType.SET, "zstd"),
    ]


def test_use_defaults_from_source_sets_defaults_too() -> None:
    ops = topic_config_sync_ops(ENTRIES, ConfigPropertyFilter(use_defaults_from="source"))
    assert ConfigOp("cleanup.policy", ConfigOpType.SET, "delete") in ops


def test_topic_creation_configs_skip_defaults_unless_source() -> None:
    assert topic_creation_configs(ENTRIES, ConfigPropertyFilter()) == {
        "retention.ms": "86400000",
        "compression.type": "zstd",
    }
    with_defaults = topic_creation_configs(ENTRIES, ConfigPropertyFilter(use_defaults_from="source"))
    assert with_defaults["cleanup.policy"] == "delete"


def test_remote_topics_get_the_sources_record_limit_plus_headroom() -> None:
    """Default or not, the source's effective max.message.bytes plus RECORD_HEADROOM, on creation
    and on every config sync; a user who excludes the key from config sync keeps their own."""
    default = [*ENTRIES, TopicConfigEntry("max.message.bytes", "1048588", "DEFAULT_CONFIG")]
    static = [*ENTRIES, TopicConfigEntry("max.message.bytes", "5000000", "STATIC_BROKER_CONFIG")]
    limit = str(1048588 + RECORD_HEADROOM)
    assert topic_creation_configs(default, ConfigPropertyFilter())["max.message.bytes"] == limit
    assert ConfigOp("max.message.bytes", ConfigOpType.SET, limit) in topic_config_sync_ops(
        default, ConfigPropertyFilter()
    )
    assert topic_creation_configs(static, ConfigPropertyFilter())["max.message.bytes"] == str(
        5000000 + RECORD_HEADROOM
    )
    excluded = ConfigPropertyFilter(exclude=["max.message.bytes"])
    assert "max.message.bytes" not in topic_creation_configs(default, excluded)
    assert all(op.name != "max.message.bytes" for op in topic_config_sync_ops(default, excluded))
