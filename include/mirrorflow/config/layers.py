"""MM2's precedence: how top-level, `<alias>.*` and `<source>-><target>.*` settings combine.

This is MirrorMakerConfig.clusterProps/connectorBaseConfig and MirrorConnectorConfig's client
config methods, step for step, so a file means the same to mirrorflow as to MM2:

* connector settings of flow S->T = top-level connector keys (+ config.providers*,
  replication.policy*, mirrorflow.*) < S's cluster settings as `source.cluster.*` (client-prefixed
  ones as `source.*`) < T's as `target.cluster.*` / `target.*` < `S->T.*`;
* a cluster's settings are `<alias>.*`, where each bootstrap/security key also becomes
  `producer.`/`consumer.`/`admin.` of that key unless set there, and top-level bootstrap/security
  keys fill whatever the cluster left unset;
* a client config (e.g. the source consumer) = `source.cluster.*` bootstrap/security keys <
  `consumer.*` < `source.consumer.*`; consumers always get `enable.auto.commit=false` and
  default to `auto.offset.reset=earliest`.
"""

from __future__ import annotations

from collections.abc import Mapping

from mirrorflow.config.key_kinds import (
    CLIENT_PREFIXES,
    CONNECTOR_CONFIG_NAMES,
    SHARED_CLIENT_KEYS,
    WORKER_TOP_LEVEL_PREFIXES,
)
from mirrorflow.config.keys import CONNECTOR_KEYS_BY_NAME
from mirrorflow.config.providers import Setting

Settings = Mapping[str, Setting]
_GENERATED = "(mirrorflow default)"


def with_prefix_stripped(settings: Settings, prefix: str) -> dict[str, Setting]:
    return {key[len(prefix) :]: value for key, value in settings.items() if key.startswith(prefix)}


def cluster_settings(settings: Settings, alias: str) -> dict[str, Setting]:
    props = with_prefix_stripped(settings, f"{alias}.")
    for key in SHARED_CLIENT_KEYS:
        if key in props:
            for prefix in CLIENT_PREFIXES:
                props.setdefault(prefix + key, props[key])
    for key in SHARED_CLIENT_KEYS:
        if key in settings:
            for prefix in CLIENT_PREFIXES:
                props.setdefault(prefix + key, settings[key])
            props.setdefault(key, settings[key])
    return props


def _is_client_prefixed(key: str) -> bool:
    # MM2 matches "^consumer.*|^producer.*|^admin.*" (no dot required).
    return key.startswith(("consumer", "producer", "admin"))


def connector_settings(settings: Settings, source: str, target: str) -> dict[str, Setting]:
    props = {
        key: value
        for key, value in settings.items()
        if key in CONNECTOR_CONFIG_NAMES
        or key.startswith(("config.providers", "replication.policy", "mirrorflow."))
    }
    for side, alias in (("source", source), ("target", target)):
        for key, value in cluster_settings(settings, alias).items():
            name = f"{side}.{key}" if _is_client_prefixed(key) else f"{side}.cluster.{key}"
            props[name] = value
    props.setdefault("source.cluster.alias", Setting(source, _GENERATED, source))
    props.setdefault("target.cluster.alias", Setting(target, _GENERATED, target))
    props.update(with_prefix_stripped(settings, f"{source}->{target}."))
    props.setdefault("enabled", Setting("false", _GENERATED, "false"))
    return props


def worker_settings(settings: Settings, source: str, target: str) -> dict[str, Setting]:
    """The Connect worker config of herder source->target: the target cluster's settings, then
    the top-level worker keys above (which win), then MM2's per-herder defaults."""
    props = cluster_settings(settings, target)
    props.update({k: v for k, v in settings.items() if k.startswith(WORKER_TOP_LEVEL_PREFIXES)})
    topic = f"mm2-offsets.{source}.internal"
    props.setdefault("offset.storage.topic", Setting(topic, _GENERATED, topic))
    return props


def java_client_settings(connector: Settings, side: str, kind: str) -> dict[str, Setting]:
    """The Java client config MM2 would build for `side` (source/target) and `kind` (consumer/producer/admin)."""
    props = {
        key: value
        for key, value in with_prefix_stripped(connector, f"{side}.cluster.").items()
        if key in SHARED_CLIENT_KEYS
    }
    # MM2's own keys that merely start with "consumer."/"admin." (consumer.poll.timeout.ms,
    # admin.timeout.ms) are not client settings; Java clients would ignore them, librdkafka rejects them.
    for prefix in (f"{kind}.", f"{side}.{kind}."):
        props.update(
            {
                key: value
                for key, value in with_prefix_stripped(connector, prefix).items()
                if f"{kind}.{key}" not in CONNECTOR_KEYS_BY_NAME
            }
        )
    if kind == "consumer":
        props["enable.auto.commit"] = Setting("false", _GENERATED, "false")
        props.setdefault("auto.offset.reset", Setting("earliest", _GENERATED, "earliest"))
    return props
