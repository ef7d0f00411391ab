"""Replication policies against MM2's documented behaviour (mirror-client's policy classes and tests)."""

from __future__ import annotations

import sys
import types

import pytest

from mirrorflow.policy import (
    DEFAULT_POLICY_CLASS,
    IDENTITY_POLICY_CLASS,
    BaseReplicationPolicy,
    DefaultReplicationPolicy,
    IdentityReplicationPolicy,
    LegacyReplicationPolicy,
    PolicyLoadError,
    ReplicationPolicy,
    load_replication_policy,
)


def test_default_naming() -> None:
    policy = DefaultReplicationPolicy()
    assert policy.format_remote_topic("A", "orders") == "A.orders"
    assert policy.topic_source("A.orders") == "A"
    assert policy.upstream_topic("A.orders") == "orders"
    assert policy.upstream_topic("B.A.orders") == "A.orders"
    assert policy.original_topic("B.A.orders") == "orders"
    assert policy.topic_source("orders") is None
    assert policy.upstream_topic("orders") is None
    assert policy.original_topic("orders") == "orders"


@pytest.mark.parametrize(
    ("topic", "source"),
    [
        ("a.", None),  # trailing empty piece dropped: one piece left
        ("a..", None),
        (".a", ""),  # leading empty piece kept
        ("my.topic", "my"),  # any dotted local topic looks remote
        ("", None),
        ("...", None),
        ("a..b", "a"),
    ],
)
def test_topic_source_uses_java_split_semantics(topic: str, source: str | None) -> None:
    assert DefaultReplicationPolicy().topic_source(topic) == source


def test_internal_topic_names_and_checks() -> None:
    policy = DefaultReplicationPolicy()
    assert policy.heartbeats_topic() == "heartbeats"
    assert policy.offset_syncs_topic("B") == "mm2-offset-syncs.B.internal"
    assert policy.checkpoints_topic("A") == "A.checkpoints.internal"
    assert policy.is_checkpoints_topic("A.checkpoints.internal")
    assert not policy.is_checkpoints_topic("A.checkpoints")
    assert policy.is_mm2_internal_topic("mm2-offset-syncs.B.internal")
    for topic in ("heartbeats", "A.heartbeats", "B.A.heartbeats"):
        assert policy.is_heartbeats_topic(topic)
        assert not policy.is_internal_topic(topic)
    assert not policy.is_heartbeats_topic("A.heartbeats2")


@pytest.mark.parametrize(
    ("topic", "internal"),
    [
        ("__consumer_offsets", True),
        (".hidden", True),
        ("mm2-configs.A.internal", True),
        ("connect-offsets-internal", True),
        ("A.checkpoints.internal", True),
        ("orders", False),
        ("internal.orders", False),
    ],
)
def test_is_internal_topic(topic: str, internal: bool) -> None:
    assert DefaultReplicationPolicy().is_internal_topic(topic) is internal


def test_custom_separator_shapes_internal_topics_kip_690() -> None:
    policy = DefaultReplicationPolicy("_")
    assert policy.format_remote_topic("A", "orders") == "A_orders"
    assert policy.topic_source("A_my_topic") == "A"
    assert policy.upstream_topic("A_my_topic") == "my_topic"
    assert policy.offset_syncs_topic("B") == "mm2-offset-syncs_B_internal"
    assert policy.checkpoints_topic("A") == "A_checkpoints_internal"
    assert policy.is_checkpoints_topic("A_checkpoints_internal")
    assert policy.is_mm2_internal_topic("mm2-offset-syncs_B_internal")


def test_internal_separator_switch_kip_949() -> None:
    policy = DefaultReplicationPolicy("__", internal_topic_separator_enabled=False)
    assert policy.format_remote_topic("A", "orders") == "A__orders"
    assert policy.offset_syncs_topic("B") == "mm2-offset-syncs.B.internal"
    assert policy.checkpoints_topic("A") == "A.checkpoints.internal"
    assert policy.is_checkpoints_topic("A.checkpoints.internal")


def test_from_settings_reads_internal_flag_only_with_a_separator() -> None:
    flag = "replication.policy.internal.topic.separator.enabled"
    alone = DefaultReplicationPolicy.from_settings({flag: "false"})
    assert alone.checkpoints_topic("A") == "A.checkpoints.internal"
    assert alone.internal_topic_separator_enabled
    both = DefaultReplicationPolicy.from_settings({"replication.policy.separator": "-", flag: "false"})
    assert both.format_remote_topic("A", "t") == "A-t"
    assert not both.internal_topic_separator_enabled


def test_identity_keeps_names_except_heartbeats() -> None:
    policy = IdentityReplicationPolicy(source_alias="A")
    assert policy.format_remote_topic("A", "orders") == "orders"
    assert policy.format_remote_topic("A", "heartbeats") == "A.heartbeats"
    assert policy.format_remote_topic("A", "xheartbeats") == "A.xheartbeats"  # MM2 quirk: endsWith
    assert policy.topic_source("orders") == "A"
    assert policy.upstream_topic("orders") == "orders"
    assert policy.original_topic("orders") == "orders"
    assert policy.topic_source("B.heartbeats") == "B"
    assert policy.upstream_topic("B.heartbeats") == "heartbeats"
    assert policy.is_heartbeats_topic("B.heartbeats")
    assert IdentityReplicationPolicy().topic_source("orders") is None


def test_legacy_mm1_naming() -> None:
    policy = LegacyReplicationPolicy()
    assert policy.format_remote_topic("source1", "aaa") == "aaa"
    assert policy.format_remote_topic("source1", "heartbeats") == "source1.heartbeats"
    assert policy.format_remote_topic("source2", "source1.heartbeats") == "source2.source1.heartbeats"
    assert policy.topic_source("aaa") is None
    assert policy.topic_source("source1.heartbeats") == "source1"
    assert policy.upstream_topic("aaa") == "aaa"
    assert policy.original_topic("source2.source1.heartbeats") == "heartbeats"
    assert policy.original_topic("aaa") == "aaa"
    assert policy.checkpoints_topic("A") == "A.checkpoints.internal"
    assert LegacyReplicationPolicy("__").format_remote_topic("source1", "heartbeats") == "source1__heartbeats"


def test_load_builtin_policies_by_java_class_name() -> None:
    settings = {"source.cluster.alias": "A", "replication.policy.separator": "_"}
    assert isinstance(load_replication_policy(DEFAULT_POLICY_CLASS, settings), DefaultReplicationPolicy)
    identity = load_replication_policy(f"  {IDENTITY_POLICY_CLASS} ", settings)
    assert isinstance(identity, IdentityReplicationPolicy)
    assert identity.topic_source("orders") == "A"
    assert identity.format_remote_topic("A", "heartbeats") == "A_heartbeats"
    for name in ("org.apache.kafka.mirror.LegacyReplicationPolicy", "com.example.LegacyReplicationPolicy"):
        assert isinstance(load_replication_policy(name, settings), LegacyReplicationPolicy)


class SuffixPolicy(BaseReplicationPolicy):
    """A custom policy: remote topics get a `.<alias>` suffix."""

    def __init__(self) -> None:
        self.configured: dict[str, str] = {}

    def configure(self, settings: dict[str, str]) -> None:
        self.configured = settings

    def format_remote_topic(self, source_alias: str, topic: str) -> str:
        return f"{topic}.{source_alias}"

    def topic_source(self, topic: str) -> str | None:
        return topic.rsplit(".", 1)[1] if "." in topic else None

    def upstream_topic(self, topic: str) -> str | None:
        return topic.rsplit(".", 1)[0] if "." in topic else None


class NotAPolicy:
    def format_remote_topic(self, source_alias: str, topic: str) -> str:
        return topic


@pytest.fixture
def policy_module() -> types.ModuleType:
    module = types.ModuleType("mirrorflow_test_policies")
    module.SuffixPolicy = SuffixPolicy  # type: ignore[attr-defined]
    module.NotAPolicy = NotAPolicy  # type: ignore[attr-defined]
    sys.modules[module.__name__] = module
    yield module
    del sys.modules[module.__name__]


def test_custom_python_policy_is_built_and_configured(policy_module: types.ModuleType) -> None:
    policy = load_replication_policy("mirrorflow_test_policies.SuffixPolicy", {"source.cluster.alias": "A"})
    assert isinstance(policy, ReplicationPolicy)
    assert policy.format_remote_topic("A", "orders") == "orders.A"
    assert policy.original_topic("orders.A.B") == "orders"
    assert policy.configured == {"source.cluster.alias": "A"}  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("mirrorflow_test_policies.NotAPolicy", "does not implement ReplicationPolicy"),
        ("mirrorflow_test_policies.Missing", "is not a class"),
        ("no_such_module_anywhere.Policy", "cannot import module"),
        ("DefaultReplicationPolicy", "not a fully qualified class name"),
        ("com.acme.kafka.MirrorPolicy", "cannot import module"),
    ],
)
def test_unusable_policy_classes_are_explained(
    policy_module: types.ModuleType, name: str, message: str
) -> None:
    with pytest.raises(PolicyLoadError, match=message):
        load_replication_policy(name, {})


def test_empty_separator_is_rejected() -> None:
    with pytest.raises(ValueError, match="must not be empty"):
        DefaultReplicationPolicy("")
