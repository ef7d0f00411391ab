"""Which topics, groups and topic config properties a flow mirrors, with MM2's filter semantics.

A filter value is a list (already split on commas and trimmed by the config layer). MM2 joins
the list with `|` into one regular expression and tests names with a *full* match. An empty
list compiles to no pattern at all: an include list then matches nothing and an exclude list
excludes nothing. Excludes win over includes.

Topic config sync follows MirrorSourceConnector.targetConfig with incrementalAlterConfigs
(KIP-894, 3.5+): read-only, sensitive and STATIC_BROKER_CONFIG entries and excluded properties
are never synced; among the rest, default-valued entries are deleted on the target (so the
target's own default applies) unless `use.defaults.from=source`, and all others are set.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import Enum

from mirrorflow.policy.provenance import RECORD_HEADROOM

TOPICS_DEFAULT = (".*",)
TOPICS_EXCLUDE_DEFAULT = (r".*[\-\.]internal", r".*\.replica", "__.*")
GROUPS_DEFAULT = (".*",)
GROUPS_EXCLUDE_DEFAULT = ("console-consumer-.*", "connect-.*", "__.*")
CONFIG_PROPERTIES_EXCLUDE_DEFAULT = (
    r"follower\.replication\.throttled\.replicas",
    r"leader\.replication\.throttled\.replicas",
    r"message\.timestamp\.difference\.max\.ms",
    r"message\.timestamp\.type",
    r"unclean\.leader\.election\.enable",
    r"min\.insync\.replicas",
)


def compile_pattern_list(patterns: Sequence[str]) -> re.Pattern[str] | None:
    """One regex from a pattern list, or None for an empty list (which must match nothing)."""
    if not patterns:
        return None
    return re.compile("|".join(patterns))


def _matches(pattern: re.Pattern[str] | None, name: str) -> bool:
    return pattern is not None and pattern.fullmatch(name) is not None


class _IncludeExclude:
    """MM2's default filters: names the include list matches, minus those the exclude list does."""

    def __init__(self, include: Sequence[str], exclude: Sequence[str]) -> None:
        self.include = tuple(include)
        self.exclude = tuple(exclude)
        self._include = compile_pattern_list(self.include)
        self._exclude = compile_pattern_list(self.exclude)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(include={self.include!r}, exclude={self.exclude!r})"

    def _wants(self, name: str) -> bool:
        return _matches(self._include, name) and not _matches(self._exclude, name)


class TopicFilter(_IncludeExclude):
    """DefaultTopicFilter: `topics` minus `topics.exclude`."""

    def __init__(
        self, include: Sequence[str] = TOPICS_DEFAULT, exclude: Sequence[str] = TOPICS_EXCLUDE_DEFAULT
    ) -> None:
        super().__init__(include, exclude)

    def should_replicate_topic(self, topic: str) -> bool:
        return self._wants(topic)


class GroupFilter(_IncludeExclude):
    """DefaultGroupFilter: `groups` minus `groups.exclude`."""

    def __init__(
        self, include: Sequence[str] = GROUPS_DEFAULT, exclude: Sequence[str] = GROUPS_EXCLUDE_DEFAULT
    ) -> None:
        super().__init__(include, exclude)

    def should_replicate_group(self, group: str) -> bool:
        return self._wants(group)


class ConfigPropertyFilter:
    """DefaultConfigPropertyFilter: `config.properties.exclude` and `use.defaults.from`."""

    def __init__(
        self, exclude: Sequence[str] = CONFIG_PROPERTIES_EXCLUDE_DEFAULT, use_defaults_from: str = "target"
    ) -> None:
        self.exclude = tuple(exclude)
        self.use_defaults_from = use_defaults_from
        self._exclude = compile_pattern_list(self.exclude)

    def __repr__(self) -> str:
        return f"ConfigPropertyFilter(exclude={self.exclude!r}, use_defaults_from={self.use_defaults_from!r})"

    def should_replicate_config_property(self, name: str) -> bool:
        return not _matches(self._exclude, name)

    def should_replicate_source_default(self, name: str) -> bool:
        # MM2 compares with "source" exactly; any other value behaves as "target".
        return self.use_defaults_from == "source"


class ConfigOpType(Enum):
    SET = "SET"
    DELETE = "DELETE"


@dataclass(frozen=True, slots=True)
class TopicConfigEntry:
    """One described source topic config. `source` is Kafka's ConfigSource name, e.g. DEFAULT_CONFIG."""

    name: str
    value: str | None
    source: str
    is_read_only: bool = False
    is_sensitive: bool = False

    @property
    def is_default(self) -> bool:
        return self.source == "DEFAULT_CONFIG"


@dataclass(frozen=True, slots=True)
class ConfigOp:
    """One incrementalAlterConfigs operation on the remote topic; `value` is None for DELETE."""

    name: str
    op: ConfigOpType
    value: str | None


MAX_MESSAGE_BYTES = "max.message.bytes"


def remote_record_limit(entries: Iterable[TopicConfigEntry]) -> str | None:
    """The max.message.bytes a remote topic needs: its source topic's effective limit (default
    or not) plus RECORD_HEADROOM, so that every record that fits the source fits the target."""
    for entry in entries:
        if entry.name == MAX_MESSAGE_BYTES and entry.value is not None:
            try:
                return str(int(entry.value) + RECORD_HEADROOM)
            except ValueError:
                return None
    return None


def topic_config_sync_ops(
    entries: Iterable[TopicConfigEntry], prop_filter: ConfigPropertyFilter
) -> list[ConfigOp]:
    """The operations MM2 sends to make a remote topic's configs follow its source topic; one
    exception: max.message.bytes is set to the source's limit plus RECORD_HEADROOM (MM2 would
    copy the source's value, or delete it for the target's default, and a record at the
    source's limit would not fit once mirrorflow's provenance header is on it)."""
    entries = list(entries)
    ops = []
    for entry in entries:
        if not prop_filter.should_replicate_config_property(entry.name):
            continue
        if entry.name == MAX_MESSAGE_BYTES:
            limit = remote_record_limit(entries)
            if limit is not None and not entry.is_read_only:
                ops.append(ConfigOp(entry.name, ConfigOpType.SET, limit))
            continue
        if entry.is_read_only or entry.is_sensitive or entry.source == "STATIC_BROKER_CONFIG":
            continue
        if entry.is_default and not prop_filter.should_replicate_source_default(entry.name):
            ops.append(ConfigOp(entry.name, ConfigOpType.DELETE, None))
        else:
            ops.append(ConfigOp(entry.name, ConfigOpType.SET, entry.value))
    return ops


def topic_creation_configs(
    entries: Iterable[TopicConfigEntry], prop_filter: ConfigPropertyFilter
) -> dict[str, str]:
    """Configs a new remote topic is created with: like sync, but defaults only with use.defaults.from=source
    (and max.message.bytes always, from remote_record_limit)."""
    entries = list(entries)
    configs = {}
    for entry in entries:
        if entry.name == MAX_MESSAGE_BYTES:
            limit = remote_record_limit(entries)
            if limit is not None and prop_filter.should_replicate_config_property(entry.name):
                configs[entry.name] = limit
            continue
        if entry.is_read_only or entry.is_sensitive or entry.source == "STATIC_BROKER_CONFIG":
            continue
        if not prop_filter.should_replicate_config_property(entry.name) or entry.value is None:
            continue
        if entry.is_default and not prop_filter.should_replicate_source_default(entry.name):
            continue
        configs[entry.name] = entry.value
    return configs
