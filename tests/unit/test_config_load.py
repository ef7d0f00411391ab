"""Loading an mm2.properties: clusters, flows, MM2's precedence and defaults, typed values."""

from __future__ import annotations

from datetime import timedelta

import pytest

from mirrorflow.config import ConfigError, FlowConfig, MirrorConfig, load_config, parse_config
from mirrorflow.config.keys import CONNECTOR_KEYS
from mirrorflow.config.mirrorflow_keys import FLOW_KEYS
from mirrorflow.policy import DefaultReplicationPolicy, IdentityReplicationPolicy

TWO = "clusters = A, B\nA.bootstrap.servers = a:9092\nB.bootstrap.servers = b:9092\n"


def _load(text: str) -> MirrorConfig:
    return load_config(text)


def test_clusters_and_flows() -> None:
    config = _load(TWO + "A->B.enabled = true\n")
    assert config.clusters == ("A", "B")
    assert [f.name for f in config.replication_flows] == ["A->B"]
    # MM2 also creates B->A, only to write heartbeats into A.
    assert [f.name for f in config.heartbeat_flows] == ["A->B", "B->A"]
    assert [f.name for f in config.flows] == ["A->B", "B->A"]
    assert config.flow("A", "B").enabled
    assert not config.flow("B", "A").enabled


def test_heartbeat_herders_follow_emit_heartbeats_enabled() -> None:
    config = _load(TWO + "A->B.enabled = true\nB->A.emit.heartbeats.enabled = false\n")
    assert [f.name for f in config.heartbeat_flows] == ["A->B"]
    assert [f.name for f in config.flows] == ["A->B"]
    off = _load(
        TWO + "A->B.enabled = true\nemit.heartbeats.enabled = false\nA->B.emit.heartbeats.enabled = true\n"
    )
    assert [f.name for f in off.heartbeat_flows] == ["A->B"]
    negative = _load(TWO + "A->B.enabled = true\nemit.heartbeats.interval.seconds = -1\n")
    assert negative.heartbeat_flows == ()
    assert [f.name for f in negative.flows] == ["A->B", "B->A"]


def test_top_level_enabled_turns_on_every_pair_with_a_herder_like_mm2() -> None:
    config = parse_config(TWO + "enabled = true\nB->A.enabled = false\n")
    assert [f.name for f in config.replication_flows] == ["A->B"]
    assert any(p.key == "enabled" for p in load_config(TWO + "enabled = true\n").warnings)
    everywhere = parse_config(TWO + "enabled = true\n")
    assert [f.name for f in everywhere.replication_flows] == ["A->B", "B->A"]
    no_herders = parse_config(TWO + "enabled = true\nemit.heartbeats.enabled = false\n")
    assert no_herders.replication_flows == ()


def test_enabled_is_read_like_boolean_parse_boolean() -> None:
    config = _load(TWO + "A->B.enabled = TRUE\nB->A.enabled = false\n")
    assert [f.name for f in config.replication_flows] == ["A->B"]


def test_defaults_are_mm2s() -> None:
    flow = _load(TWO + "A->B.enabled = true\n").flow("A", "B")
    assert flow.topics == (".*",)
    assert flow.topics_exclude == (r".*[\-\.]internal", r".*\.replica", "__.*")
    assert flow.groups == (".*",)
    assert flow.groups_exclude == ("console-consumer-.*", "connect-.*", "__.*")
    assert "min\\.insync\\.replicas" in flow.config_properties_exclude
    assert flow.use_defaults_from == "target"
    assert flow.replication_factor == 2
    assert flow.offset_syncs_topic_replication_factor == 3
    assert flow.checkpoints_topic_replication_factor == 3
    assert flow.heartbeats_topic_replication_factor == 3
    assert flow.offset_syncs_topic_location == "source"
    assert flow.emit_offset_syncs_enabled
    assert flow.offset_lag_max == 100
    assert flow.refresh_topics_interval == timedelta(minutes=10)
    assert flow.sync_topic_configs_interval == timedelta(minutes=10)
    assert flow.sync_topic_acls_interval == timedelta(minutes=10)
    assert flow.refresh_groups_interval == timedelta(minutes=10)
    assert flow.emit_checkpoints_interval == timedelta(seconds=60)
    assert flow.sync_group_offsets_interval is None  # off by default
    assert flow.sync_group_offsets_interval_seconds == 60
    assert flow.emit_heartbeats_interval == timedelta(seconds=1)
    assert flow.heartbeats_replication_enabled
    assert flow.consumer_poll_timeout_ms == 1000
    assert flow.admin_timeout_ms == 60000
    assert flow.tasks_max == 1
    assert flow.exactly_once_support == "requested"
    assert isinstance(flow.policy, DefaultReplicationPolicy)
    assert flow.replication_policy_separator == "."
    # mirrorflow's own
    assert flow.replicate_schedule == "*/5 * * * *"
    assert flow.range_max_records == 100000
    assert flow.range_max_bytes == 67108864
    assert flow.delivery == "exactly-once"
    assert flow.provenance_headers_enabled


def test_internal_topic_names() -> None:
    flow = _load(TWO + "A->B.enabled = true\n").flow("A", "B")
    assert flow.offset_syncs_topic == "mm2-offset-syncs.B.internal"
    assert flow.offset_syncs_cluster == "A"
    assert flow.checkpoints_topic == "A.checkpoints.internal"
    assert flow.heartbeats_topic == "heartbeats"
    target = _load(TWO + "A->B.enabled = true\noffset-syncs.topic.location = target\n").flow("A", "B")
    assert target.offset_syncs_topic == "mm2-offset-syncs.A.internal"
    assert target.offset_syncs_cluster == "B"
    custom = _load(TWO + "A->B.enabled = true\nreplication.policy.separator = _\n").flow("A", "B")
    assert custom.offset_syncs_topic == "mm2-offset-syncs_B_internal"
    assert custom.checkpoints_topic == "A_checkpoints_internal"


def test_precedence_top_level_cluster_flow() -> None:
    text = TWO + (
        "A->B.enabled = true\n"
        "replication.factor = 3\n"
        "A->B.replication.factor = 1\n"
        "topics = top.*\n"
        "emit.checkpoints.interval.seconds = 30\n"
        "A->B.mirrorflow.delivery = at-least-once\n"
        "mirrorflow.range.max.records = 500\n"
    )
    config = _load(text)
    flow = config.flow("A", "B")
    assert flow.replication_factor == 1  # flow beats top level
    assert flow.topics == ("top.*",)
    assert flow.emit_checkpoints_interval_seconds == 30
    assert flow.delivery == "at-least-once"
    assert flow.range_max_records == 500
    other = config.flow("B", "A")
    assert other.replication_factor == 3
    assert other.delivery == "exactly-once"


def test_cluster_level_connector_keys_have_no_effect() -> None:
    config = _load(TWO + "A->B.enabled = true\nA.topics = only-this\nA.replication.factor = 1\n")
    flow = config.flow("A", "B")
    assert flow.topics == (".*",)
    assert flow.replication_factor == 2
    assert {p.key for p in config.warnings} >= {"A.topics", "A.replication.factor"}


def test_top_level_flow_only_keys_are_dropped_like_mm2() -> None:
    config = _load(TWO + "A->B.enabled = true\nuse.defaults.from = source\nexactly.once.support = required\n")
    flow = config.flow("A", "B")
    assert flow.use_defaults_from == "target"
    assert flow.exactly_once_support == "requested"
    per_flow = _load(
        TWO + "A->B.enabled = true\nA->B.use.defaults.from = source\nA->B.exactly.once.support = REQUIRED\n"
    )
    flow = per_flow.flow("A", "B")
    assert flow.use_defaults_from == "source"
    assert flow.config_property_filter.should_replicate_source_default("retention.ms")
    assert flow.exactly_once_support == "required"


def test_disabling_intervals() -> None:
    flow = _load(
        TWO + "A->B.enabled = true\nrefresh.topics.enabled = false\nsync.topic.acls.interval.seconds = -1\n"
        "sync.group.offsets.enabled = true\n"
    ).flow("A", "B")
    assert flow.refresh_topics_interval is None
    assert flow.sync_topic_acls_interval is None
    assert flow.sync_group_offsets_interval == timedelta(seconds=60)


def test_deprecated_blacklist_aliases_honoured_new_name_wins() -> None:
    config = _load(TWO + "A->B.enabled = true\ntopics.blacklist = secret.*\ngroups.blacklist = tmp.*\n")
    flow = config.flow("A", "B")
    assert flow.topics_exclude == ("secret.*",)
    assert flow.groups_exclude == ("tmp.*",)
    assert not flow.topic_filter.should_replicate_topic("secrets")
    assert any("3.x name of topics.exclude" in p.message for p in config.warnings)
    both = _load(TWO + "A->B.enabled = true\ntopics.exclude = a.*\nA->B.topics.blacklist = b.*\n")
    assert both.flow("A", "B").topics_exclude == ("a.*",)
    assert any("both set" in p.message for p in both.warnings)
    props = _load(TWO + "A->B.enabled = true\nconfig.properties.blacklist = retention\\\\.ms\n").flow(
        "A", "B"
    )
    assert props.config_properties_exclude == (r"retention\.ms",)


def test_identity_policy_gets_the_flows_source_alias() -> None:
    config = _load(
        TWO + "A->B.enabled = true\nB->A.enabled = true\n"
        "replication.policy.class = org.apache.kafka.connect.mirror.IdentityReplicationPolicy\n"
    )
    a_to_b, b_to_a = config.flow("A", "B"), config.flow("B", "A")
    assert isinstance(a_to_b.policy, IdentityReplicationPolicy)
    assert a_to_b.policy.topic_source("orders") == "A"
    assert b_to_a.policy.topic_source("orders") == "B"


def test_flow_lookup_errors() -> None:
    config = _load(TWO)
    with pytest.raises(KeyError, match="not in clusters"):
        config.flow("A", "C")
    with pytest.raises(KeyError, match="two different clusters"):
        config.flow("A", "A")
    with pytest.raises(KeyError, match="not in clusters"):
        config.cluster("C")


def test_invalid_values_raise_config_error_listing_all() -> None:
    with pytest.raises(ConfigError) as info:
        _load(TWO + "A->B.enabled = true\nreplication.factor = two\noffset.lag.max = 1k\ntasks.max = 0\n")
    keys = {p.key for p in info.value.problems if p.is_error}
    assert keys == {"replication.factor", "offset.lag.max", "tasks.max"}
    assert "replication.factor" in str(info.value)


def test_parse_config_does_not_validate() -> None:
    config = parse_config("A->B.enabled = true\n")
    assert config.clusters == ()
    assert config.replication_flows == ()
    broken = parse_config(TWO + "A->B.enabled = true\nreplication.factor = x\n")
    assert repr(broken) == "MirrorConfig(source='<text>', clusters=['A', 'B'], replication_flows=[A->B])"
    with pytest.raises(ConfigError, match="replication.factor"):
        broken.flow("A", "B")


def test_cluster_view() -> None:
    config = _load(
        TWO + "bootstrap.servers = fallback:9092\nclusters = A, B, C\nC.airflow.connection.id = c_conn\n"
    )
    assert config.cluster("A").bootstrap_servers == "a:9092"
    assert config.cluster("C").bootstrap_servers == "fallback:9092"  # top-level fills in, as MM2 does
    assert config.cluster("C").airflow_connection_id == "c_conn"
    assert repr(config.cluster("C")) == "ClusterConfig('C')"


def test_every_key_has_a_typed_attribute() -> None:
    fields = set(FlowConfig.__dataclass_fields__)
    for spec in CONNECTOR_KEYS:
        assert spec.attribute in fields, spec.name
    for key in FLOW_KEYS.values():
        assert key.attribute in fields, key.name


def test_reprs_name_flows_not_settings() -> None:
    config = _load(
        TWO
        + 'A->B.enabled = true\nA.sasl.jaas.config = org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="hunter2";\n'
    )
    assert "hunter2" not in repr(config)
    assert "hunter2" not in repr(config.flow("A", "B"))
    assert "hunter2" not in repr(config.flow("A", "B").settings)
    assert repr(config) == "MirrorConfig(source='<text>', clusters=['A', 'B'], replication_flows=[A->B])"


def test_offsets_topic_follows_mm2_worker_config() -> None:
    base = (
        "clusters = A, B\nA.bootstrap.servers = a:9092\nB.bootstrap.servers = b:9092\nA->B.enabled = true\n"
    )
    flow = load_config(base).flow("A", "B")
    assert (
        flow.offset_storage_topic,
        flow.offset_storage_replication_factor,
        flow.offset_storage_partitions,
    ) == (
        "mm2-offsets.A.internal",
        3,
        25,
    )
    # The target cluster's worker settings apply; top-level offset.storage.* keys win over them.
    flow = load_config(
        base + "B.offset.storage.replication.factor = 1\nB.offset.storage.partitions = 5\n"
    ).flow("A", "B")
    assert (flow.offset_storage_replication_factor, flow.offset_storage_partitions) == (1, 5)
    flow = load_config(base + "B.offset.storage.topic = b-offsets\noffset.storage.topic = shared\n").flow(
        "A", "B"
    )
    assert flow.offset_storage_topic == "shared"


def test_bad_offsets_topic_settings_are_reported() -> None:
    base = (
        "clusters = A, B\nA.bootstrap.servers = a:9092\nB.bootstrap.servers = b:9092\nA->B.enabled = true\n"
    )
    with pytest.raises(ConfigError) as raised:
        load_config(base + "offset.storage.replication.factor = three\n")
    assert "offset.storage.replication.factor" in str(raised.value)


def test_a_flows_byte_rate_cap_is_a_flow_setting_and_never_negative() -> None:
    config = _load(
        TWO
        + "A->B.enabled = true\nB->A.enabled = true\nA->B.mirrorflow.replicate.max.bytes.per.second = 5000000\n"
    )
    assert config.flow("A", "B").replicate_max_bytes_per_second == 5_000_000
    assert config.flow("B", "A").replicate_max_bytes_per_second == 0, "no cap by default"
    with pytest.raises(ConfigError) as info:
        _load(TWO + "A->B.enabled = true\nmirrorflow.replicate.max.bytes.per.second = -1\n")
    assert "write a number of bytes per second, or 0 for no limit" in str(info.value)
