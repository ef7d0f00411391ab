"""The key tables: MM2 defaults as in MM2's ConfigDefs, mirrorflow's own keys, and their table in the docs."""

from __future__ import annotations

import pytest

from mirrorflow.config import MIRRORFLOW_KEYS, mirrorflow_keys_markdown
from mirrorflow.config.key_kinds import CONNECTOR_CONFIG_NAMES, FLOW_ONLY_KEYS
from mirrorflow.config.keys import CONNECTOR_KEYS_BY_NAME
from mirrorflow.config.values import InvalidValue, parse_bool, parse_int, parse_list


@pytest.mark.parametrize(
    ("key", "default"),
    [
        ("refresh.topics.interval.seconds", 600),
        ("sync.topic.configs.interval.seconds", 600),
        ("sync.topic.acls.interval.seconds", 600),
        ("refresh.groups.interval.seconds", 600),
        ("emit.checkpoints.interval.seconds", 60),
        ("sync.group.offsets.enabled", False),
        ("sync.group.offsets.interval.seconds", 60),
        ("emit.heartbeats.interval.seconds", 1),
        ("replication.factor", 2),
        ("offset-syncs.topic.replication.factor", 3),
        ("checkpoints.topic.replication.factor", 3),
        ("heartbeats.topic.replication.factor", 3),
        ("offset.lag.max", 100),
        ("offset-syncs.topic.location", "source"),
        ("emit.offset-syncs.enabled", True),
        ("heartbeats.replication.enabled", True),
        ("consumer.poll.timeout.ms", 1000),
        ("admin.timeout.ms", 60000),
        ("tasks.max", 1),
        ("use.incremental.alter.configs", "requested"),
        ("add.source.alias.to.metrics", False),
        ("exactly.once.support", "requested"),
        ("topics", (".*",)),
        ("groups.exclude", ("console-consumer-.*", "connect-.*", "__.*")),
    ],
)
def test_mm2_defaults(key: str, default: object) -> None:
    assert CONNECTOR_KEYS_BY_NAME[key].default == default


def test_flow_only_keys_are_not_connector_config_names() -> None:
    assert not FLOW_ONLY_KEYS & CONNECTOR_CONFIG_NAMES
    assert "topics.blacklist" in CONNECTOR_CONFIG_NAMES  # honoured at the top level, as in 3.x


def test_mirrorflow_keys_table() -> None:
    names = [key.name for key in MIRRORFLOW_KEYS]
    assert names == [
        "mirrorflow.replicate.schedule",
        "mirrorflow.replicate.mode",
        "mirrorflow.microbatch.interval.ms",
        "mirrorflow.microbatch.window.seconds",
        "mirrorflow.range.max.records",
        "mirrorflow.range.max.bytes",
        "mirrorflow.replicate.max.bytes.per.second",
        "mirrorflow.delivery",
        "mirrorflow.provenance.headers.enabled",
        "mirrorflow.cluster.unreachable.timeout.ms",
        "mirrorflow.heartbeats.run.seconds",
        "<alias>.airflow.connection.id",
    ]
    for key in MIRRORFLOW_KEYS:
        assert key.doc and key.type
        if key.default is not None:
            assert (
                key.parse(str(key.default).lower() if isinstance(key.default, bool) else str(key.default))
                == key.default
            )
    table = mirrorflow_keys_markdown()
    assert table.count("\n") == len(MIRRORFLOW_KEYS) + 2
    assert "| `mirrorflow.range.max.bytes` | top level or flow | integer >= 1 | `67108864` |" in table
    assert "| `mirrorflow.provenance.headers.enabled` | top level or flow | boolean | `true` |" in table
    assert all(line.count("|") == 6 for line in table.splitlines())


def test_java_value_parsing() -> None:
    assert parse_list(" a , b,c ") == ["a", "b", "c"]
    assert parse_list("  ") == []
    assert parse_list("a,") == ["a", ""]
    assert parse_bool(" TRUE ") is True
    assert parse_int("+5") == 5
    with pytest.raises(InvalidValue, match="does not fit a Java int"):
        parse_int("2147483648")
    with pytest.raises(InvalidValue) as info:
        parse_int("2h", unit="seconds")
    assert info.value.fix == "write 7200"
    with pytest.raises(InvalidValue, match="not an integer"):
        parse_int("١٢")
