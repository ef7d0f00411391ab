"""Remote topic naming: MM2's ReplicationPolicy and its built-in implementations.

Every name mirrorflow derives (remote topics, offset-syncs, checkpoints, heartbeats) goes through
one of these objects, so a flow can move between MM2 and mirrorflow without renaming anything.
The behaviour follows MM2's Java classes (connect/mirror-client), including their oddities:
Java `String.split` drops trailing empty pieces, any dotted local topic "looks remote" under the
default policy, and the identity policy still prefixes topics whose names end with `heartbeats`.
"""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Protocol, runtime_checkable

HEARTBEATS_TOPIC = "heartbeats"
SEPARATOR_KEY = "replication.policy.separator"
INTERNAL_SEPARATOR_KEY = "replication.policy.internal.topic.separator.enabled"
SOURCE_ALIAS_KEY = "source.cluster.alias"

DEFAULT_POLICY_CLASS = "org.apache.kafka.connect.mirror.DefaultReplicationPolicy"
IDENTITY_POLICY_CLASS = "org.apache.kafka.connect.mirror.IdentityReplicationPolicy"
LEGACY_POLICY_SIMPLE_NAME = "LegacyReplicationPolicy"


@runtime_checkable
class ReplicationPolicy(Protocol):
    """MM2's ReplicationPolicy interface with Python names.

    `topic_source` and `upstream_topic` return None for topics that are not remote.
    """

    def format_remote_topic(self, source_alias: str, topic: str) -> str: ...

    def topic_source(self, topic: str) -> str | None: ...

    def upstream_topic(self, topic: str) -> str | None: ...

    def original_topic(self, topic: str) -> str: ...

    def heartbeats_topic(self) -> str: ...

    def offset_syncs_topic(self, cluster_alias: str) -> str: ...

    def checkpoints_topic(self, cluster_alias: str) -> str: ...

    def is_heartbeats_topic(self, topic: str) -> bool: ...

    def is_checkpoints_topic(self, topic: str) -> bool: ...

    def is_mm2_internal_topic(self, topic: str) -> bool: ...

    def is_internal_topic(self, topic: str) -> bool: ...


class BaseReplicationPolicy(ABC):
    """The interface's default methods, so a custom policy only writes the three naming rules."""

    @abstractmethod
    def format_remote_topic(self, source_alias: str, topic: str) -> str: ...

    @abstractmethod
    def topic_source(self, topic: str) -> str | None: ...

    @abstractmethod
    def upstream_topic(self, topic: str) -> str | None: ...

    def original_topic(self, topic: str) -> str:
        # Iterative form of MM2's recursion: stop when a hop yields nothing new.
        while True:
            upstream = self.upstream_topic(topic)
            if upstream is None or upstream == topic:
                return topic
            topic = upstream

    def heartbeats_topic(self) -> str:
        return HEARTBEATS_TOPIC

    def offset_syncs_topic(self, cluster_alias: str) -> str:
        return f"mm2-offset-syncs.{cluster_alias}.internal"

    def checkpoints_topic(self, cluster_alias: str) -> str:
        return f"{cluster_alias}.checkpoints.internal"

    def is_heartbeats_topic(self, topic: str) -> bool:
        return self.heartbeats_topic() == self.original_topic(topic)

    def is_checkpoints_topic(self, topic: str) -> bool:
        return topic.endswith(".checkpoints.internal")

    def is_mm2_internal_topic(self, topic: str) -> bool:
        return topic.endswith(".internal")

    def is_internal_topic(self, topic: str) -> bool:
        kafka_internal = topic.startswith("__") or topic.startswith(".")
        connect_internal = topic.endswith("-internal") or topic.endswith(".internal")
        return self.is_mm2_internal_topic(topic) or kafka_internal or connect_internal


def java_split(text: str, separator: str) -> list[str]:
    """`text.split(Pattern.quote(separator))` as Java does it: trailing empty pieces are dropped."""
    parts = text.split(separator)
    while parts and parts[-1] == "":
        parts.pop()
    return parts


class DefaultReplicationPolicy(BaseReplicationPolicy):
    """`<source alias><separator><topic>`; the separator also shapes internal topic names.

    With a custom separator the offset-syncs and checkpoints topics use it too (KIP-690, 3.1+);
    `internal_topic_separator_enabled=False` restores the "." names (KIP-949, 3.6+).
    """

    def __init__(self, separator: str = ".", internal_topic_separator_enabled: bool = True) -> None:
        if not separator:
            raise ValueError("the replication policy separator must not be empty")
        self.separator = separator
        self.internal_topic_separator_enabled = internal_topic_separator_enabled

    @classmethod
    def from_settings(cls, settings: Mapping[str, str]) -> DefaultReplicationPolicy:
        """Read the settings as MM2's configure() does: the internal flag counts only with a separator."""
        if SEPARATOR_KEY not in settings:
            return cls()
        enabled = True
        if INTERNAL_SEPARATOR_KEY in settings:
            enabled = settings[INTERNAL_SEPARATOR_KEY].strip().lower() == "true"
        return cls(settings[SEPARATOR_KEY], enabled)

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(separator={self.separator!r}, "
            f"internal_topic_separator_enabled={self.internal_topic_separator_enabled})"
        )

    def format_remote_topic(self, source_alias: str, topic: str) -> str:
        return f"{source_alias}{self.separator}{topic}"

    def topic_source(self, topic: str) -> str | None:
        parts = java_split(topic, self.separator)
        return parts[0] if len(parts) >= 2 else None

    def upstream_topic(self, topic: str) -> str | None:
        source = self.topic_source(topic)
        if source is None:
            return None
        return topic[len(source) + len(self.separator) :]

    @property
    def _internal_separator(self) -> str:
        return self.separator if self.internal_topic_separator_enabled else "."

    def offset_syncs_topic(self, cluster_alias: str) -> str:
        sep = self._internal_separator
        return f"mm2-offset-syncs{sep}{cluster_alias}{sep}internal"

    def checkpoints_topic(self, cluster_alias: str) -> str:
        return f"{cluster_alias}{self._checkpoints_suffix}"

    @property
    def _checkpoints_suffix(self) -> str:
        sep = self._internal_separator
        return f"{sep}checkpoints{sep}internal"

    def is_checkpoints_topic(self, topic: str) -> bool:
        return topic.endswith(self._checkpoints_suffix)

    def is_mm2_internal_topic(self, topic: str) -> bool:
        return topic.endswith(f"{self._internal_separator}internal")


class IdentityReplicationPolicy(DefaultReplicationPolicy):
    """Topic names unchanged, except names ending in `heartbeats`, which keep the default naming.

    MM2 cannot detect cycles with this policy: `topic_source` answers the configured source
    alias for every ordinary topic, and `upstream_topic` returns the topic itself.
    """

    def __init__(
        self,
        source_alias: str | None = None,
        separator: str = ".",
        internal_topic_separator_enabled: bool = True,
    ) -> None:
        super().__init__(separator, internal_topic_separator_enabled)
        self.source_alias = source_alias

    @classmethod
    def from_settings(cls, settings: Mapping[str, str]) -> IdentityReplicationPolicy:
        base = DefaultReplicationPolicy.from_settings(settings)
        return cls(settings.get(SOURCE_ALIAS_KEY), base.separator, base.internal_topic_separator_enabled)

    def __repr__(self) -> str:
        return f"IdentityReplicationPolicy(source_alias={self.source_alias!r}, separator={self.separator!r})"

    def _looks_like_heartbeat(self, topic: str) -> bool:
        return topic.endswith(self.heartbeats_topic())

    def format_remote_topic(self, source_alias: str, topic: str) -> str:
        if self._looks_like_heartbeat(topic):
            return super().format_remote_topic(source_alias, topic)
        return topic

    def topic_source(self, topic: str) -> str | None:
        if self._looks_like_heartbeat(topic):
            return super().topic_source(topic)
        return self.source_alias

    def upstream_topic(self, topic: str) -> str | None:
        if self._looks_like_heartbeat(topic):
            return super().upstream_topic(topic)
        return topic


class LegacyReplicationPolicy(BaseReplicationPolicy):
    """MirrorMaker 1 naming: topics keep their names and carry no notion of where they came from.

    Only heartbeat topics follow the default policy (so heartbeats still prove a path). Unlike
    the identity policy, no ordinary topic has a source, so nothing is ever seen as remote.
    Internal topic names keep the interface defaults ("." separators), as MM1 bridges did.
    """

    def __init__(self, separator: str = ".", internal_topic_separator_enabled: bool = True) -> None:
        self._heartbeats = DefaultReplicationPolicy(separator, internal_topic_separator_enabled)

    @classmethod
    def from_settings(cls, settings: Mapping[str, str]) -> LegacyReplicationPolicy:
        base = DefaultReplicationPolicy.from_settings(settings)
        return cls(base.separator, base.internal_topic_separator_enabled)

    def __repr__(self) -> str:
        return f"LegacyReplicationPolicy(separator={self._heartbeats.separator!r})"

    def _is_heartbeats(self, topic: str) -> bool:
        return self._heartbeats.original_topic(topic) == HEARTBEATS_TOPIC

    def format_remote_topic(self, source_alias: str, topic: str) -> str:
        if self._is_heartbeats(topic):
            return self._heartbeats.format_remote_topic(source_alias, topic)
        return topic

    def topic_source(self, topic: str) -> str | None:
        return self._heartbeats.topic_source(topic) if self._is_heartbeats(topic) else None

    def upstream_topic(self, topic: str) -> str | None:
        return self._heartbeats.upstream_topic(topic) if self._is_heartbeats(topic) else topic

    def original_topic(self, topic: str) -> str:
        return HEARTBEATS_TOPIC if self._is_heartbeats(topic) else topic


class PolicyLoadError(ValueError):
    """replication.policy.class names nothing mirrorflow can use; the message says what to write."""


def is_legacy_policy_class(class_name: str) -> bool:
    """MM1-compatibility policies ship under several packages; the simple name identifies them."""
    return class_name.rsplit(".", 1)[-1] == LEGACY_POLICY_SIMPLE_NAME


def load_replication_policy(class_name: str, settings: Mapping[str, str]) -> ReplicationPolicy:
    """Build the policy a flow uses, configured from its connector settings as MM2 does.

    `class_name` is MM2's Java class name (Default, Identity, any *.LegacyReplicationPolicy) or
    the dotted path of a Python class implementing ReplicationPolicy. A Python class is built
    with no arguments, then given the settings through `configure(settings)` if it has one.
    """
    name = class_name.strip()
    if name == DEFAULT_POLICY_CLASS:
        return DefaultReplicationPolicy.from_settings(settings)
    if name == IDENTITY_POLICY_CLASS:
        return IdentityReplicationPolicy.from_settings(settings)
    if is_legacy_policy_class(name):
        return LegacyReplicationPolicy.from_settings(settings)
    return _load_python_policy(name, settings)


def _load_python_policy(name: str, settings: Mapping[str, str]) -> ReplicationPolicy:
    hint = (
        f"use {DEFAULT_POLICY_CLASS}, {IDENTITY_POLICY_CLASS}, a *.{LEGACY_POLICY_SIMPLE_NAME}, "
        "or the dotted path of a Python class implementing mirrorflow.policy.ReplicationPolicy"
    )
    module_name, _, attr = name.rpartition(".")
    if not module_name:
        raise PolicyLoadError(f"'{name}' is not a fully qualified class name; {hint}")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise PolicyLoadError(f"cannot import module '{module_name}' ({exc}); {hint}") from exc
    cls = getattr(module, attr, None)
    if not isinstance(cls, type):
        raise PolicyLoadError(f"'{name}' is not a class in module '{module_name}'; {hint}")
    try:
        policy = cls()
    except Exception as exc:
        raise PolicyLoadError(f"'{name}' could not be built without arguments: {exc}") from exc
    configure = getattr(policy, "configure", None)
    if callable(configure):
        configure(dict(settings))
    if not isinstance(policy, ReplicationPolicy):
        missing = sorted(
            method for method in _PROTOCOL_METHODS if not callable(getattr(policy, method, None))
        )
        raise PolicyLoadError(
            f"'{name}' does not implement ReplicationPolicy (missing: {', '.join(missing)}); "
            "subclass mirrorflow.policy.BaseReplicationPolicy to get MM2's default methods"
        )
    return policy


_PROTOCOL_METHODS = (
    "format_remote_topic",
    "topic_source",
    "upstream_topic",
    "original_topic",
    "heartbeats_topic",
    "offset_syncs_topic",
    "checkpoints_topic",
    "is_heartbeats_topic",
    "is_checkpoints_topic",
    "is_mm2_internal_topic",
    "is_internal_topic",
)
