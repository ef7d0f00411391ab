"""How one ordered cluster pair's settings become a FlowConfig: each MM2 and mirrorflow key read
from the layer MM2 reads it from, parsed and typed, with MM2's default where unset; the 3.x key
names applied; the replication policy and filter classes loaded. Every value that cannot be used
is a Problem naming the key and the fix, all of them at once."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

from mirrorflow.config.flow import FlowConfig
from mirrorflow.config.keys import (
    CONNECTOR_KEYS,
    DEFAULT_CONFIG_PROPERTY_FILTER_CLASS,
    DEFAULT_GROUP_FILTER_CLASS,
    DEFAULT_TOPIC_FILTER_CLASS,
    DEPRECATED_ALIASES,
    OFFSET_STORAGE_KEYS,
    KeySpec,
)
from mirrorflow.config.layers import connector_settings, worker_settings
from mirrorflow.config.lint import glob_hint, glob_to_regex
from mirrorflow.config.mirrorflow_keys import FLOW_KEYS
from mirrorflow.config.problems import Problem, error, warning
from mirrorflow.config.providers import Setting
from mirrorflow.config.secrets import REDACTED, is_secret_key
from mirrorflow.config.values import InvalidValue, parse_bool, parse_int, parse_list
from mirrorflow.policy.filters import ConfigPropertyFilter, GroupFilter, TopicFilter, compile_pattern_list
from mirrorflow.policy.replication import (
    DefaultReplicationPolicy,
    PolicyLoadError,
    ReplicationPolicy,
    load_replication_policy,
)

_DEFAULT_FILTER_CLASSES = {
    "topic.filter.class": DEFAULT_TOPIC_FILTER_CLASS,
    "group.filter.class": DEFAULT_GROUP_FILTER_CLASS,
    "config.property.filter.class": DEFAULT_CONFIG_PROPERTY_FILTER_CLASS,
}
_QUANTIFIER_WITH_COMMA = re.compile(r"\{\d*,\d*\}")


class _Resolver:
    """Parses one flow's settings, recording problems instead of stopping at the first."""

    def __init__(self, settings: dict[str, Setting]) -> None:
        self.settings = settings
        self.problems: list[Problem] = []

    def _bad(self, spec_name: str, setting: Setting, exc: InvalidValue) -> None:
        message = exc.message
        if setting.from_provider or is_secret_key(spec_name):
            value = setting.value.strip()
            message = f"the value from {setting.raw} is invalid: " + (
                message.replace(value, REDACTED) if value else message
            )
        self.problems.append(error(setting.origin, f"{spec_name}: {message}", exc.fix))

    def connector_value(self, spec: KeySpec) -> object:
        setting = self.settings.get(spec.name)
        if setting is None:
            return spec.default
        try:
            return self._parse(spec, setting)
        except InvalidValue as exc:
            self._bad(spec.name, setting, exc)
            return spec.default

    def _parse(self, spec: KeySpec, setting: Setting) -> object:
        raw = setting.value
        if spec.type == "boolean":
            return parse_bool(raw)
        if spec.type in ("short", "int", "long"):
            value = parse_int(raw, kind=spec.type, unit=spec.unit)
            if spec.minimum is not None and value < spec.minimum:
                raise InvalidValue(
                    f"{value} is below the minimum {spec.minimum}", f"write {spec.minimum} or more"
                )
            if spec.replication_factor and value != -1 and value < 1:
                raise InvalidValue(
                    f"{value} is not a replication factor",
                    "write -1 (broker default) or a number of replicas",
                )
            return value
        if spec.type == "list":
            return tuple(parse_list(raw))
        if spec.name == "replication.policy.separator":
            return raw
        if spec.type == "choice":
            return self._choice(spec, setting)
        return raw.strip()

    def _choice(self, spec: KeySpec, setting: Setting) -> str:
        value = setting.value.strip()
        if spec.name == "exactly.once.support":
            value = value.lower()
        if value in spec.choices:
            return value
        wanted = " or ".join(spec.choices)
        if spec.strict:
            raise InvalidValue(f"{value!r} is not one of {', '.join(spec.choices)}", f"write {wanted}")
        self.problems.append(
            warning(
                setting.origin,
                f"{spec.name}: {value!r} is not one of {', '.join(spec.choices)}; MM2 treats it as {spec.default}",
                f"write {wanted}",
            )
        )
        return str(spec.default)

    def mirrorflow_value(self, name: str) -> object:
        key = FLOW_KEYS[name]
        setting = self.settings.get(name)
        if setting is None:
            return key.default
        try:
            return key.parse(setting.value)
        except InvalidValue as exc:
            self._bad(name, setting, exc)
            return key.default

    def apply_deprecated_aliases(self) -> None:
        for old, new in DEPRECATED_ALIASES.items():
            if old not in self.settings:
                continue
            origin = self.settings[old].origin
            if new in self.settings:
                self.problems.append(
                    warning(
                        origin,
                        f"{old} and {new} are both set; {new} wins, as in Kafka 3.x",
                        f"remove {old}",
                    )
                )
            else:
                self.settings[new] = self.settings[old]
                self.problems.append(
                    warning(
                        origin,
                        f"{old} is the Kafka 3.x name of {new} (removed in Kafka 4.0); mirrorflow honours it as 3.x did",
                        f"rename it to {new}",
                    )
                )

    def patterns(self, name: str, values: tuple[str, ...]) -> tuple[str, ...]:
        setting = self.settings.get(name)
        if setting is None:
            return values
        if _QUANTIFIER_WITH_COMMA.search(setting.value):
            self.problems.append(
                error(
                    setting.origin,
                    f"{name}: a {{m,n}} quantifier contains a comma, but MM2 splits this list on commas, "
                    "so the regex is cut in two",
                    "rewrite the pattern without commas, e.g. [0-9]{1}|[0-9]{2} instead of [0-9]{1,2}",
                )
            )
            return values
        try:
            compile_pattern_list(values)
        except re.error as exc:
            self.problems.append(_invalid_pattern(setting.origin, name, values, exc))
        return values

    def policy(self, class_name: str) -> ReplicationPolicy:
        settings = {key: setting.value for key, setting in self.settings.items()}
        origin = self._origin("replication.policy.class")
        separator = settings.get("replication.policy.separator")
        if separator is not None and separator != separator.strip():
            self.problems.append(
                warning(
                    self._origin("replication.policy.separator"),
                    f"the separator {separator!r} has surrounding whitespace, which MM2 keeps as part of it",
                    "remove the whitespace unless it is intended",
                )
            )
        try:
            return load_replication_policy(class_name, settings)
        except (PolicyLoadError, ValueError) as exc:
            self.problems.append(
                error(origin, f"replication.policy.class: {exc}", "name a usable replication policy")
            )
            return DefaultReplicationPolicy()

    def filter_classes(self, values: Mapping[str, object]) -> None:
        for key, default in _DEFAULT_FILTER_CLASSES.items():
            if values[key] != default:
                self.problems.append(
                    error(
                        self._origin(key),
                        f"{key}: mirrorflow runs only MM2's default filter ({default})",
                        "express the filter with topics/topics.exclude, groups/groups.exclude or config.properties.exclude",
                    )
                )

    def _origin(self, key: str) -> str:
        setting = self.settings.get(key)
        return setting.origin if setting else key


def resolve_flow(
    settings: Mapping[str, Setting], source: str, target: str
) -> tuple[FlowConfig, list[Problem]]:
    """The flow's typed configuration and every problem found while resolving it."""
    resolver = _Resolver(connector_settings(settings, source, target))
    resolver.apply_deprecated_aliases()
    values: dict[str, object] = {spec.attribute: resolver.connector_value(spec) for spec in CONNECTOR_KEYS}
    values |= {key.attribute: resolver.mirrorflow_value(name) for name, key in FLOW_KEYS.items()}
    for name in ("topics", "topics.exclude", "groups", "groups.exclude", "config.properties.exclude"):
        attribute = name.replace(".", "_")
        values[attribute] = resolver.patterns(name, values[attribute])  # type: ignore[arg-type]
    resolver.filter_classes({key: values[key.replace(".", "_")] for key in _DEFAULT_FILTER_CLASSES})
    policy = resolver.policy(str(values["replication_policy_class"]))
    values |= _worker_values(worker_settings(settings, source, target), resolver.problems)
    flow = FlowConfig(
        source=source,
        target=target,
        settings=resolver.settings,
        policy=policy,
        topic_filter=_safe(TopicFilter, values["topics"], values["topics_exclude"]),
        group_filter=_safe(GroupFilter, values["groups"], values["groups_exclude"]),
        config_property_filter=_safe(
            ConfigPropertyFilter, values["config_properties_exclude"], values["use_defaults_from"]
        ),
        **values,  # type: ignore[arg-type]
    )
    return flow, resolver.problems


# Connect's defaults for the offsets topic (DistributedConfig); -1 means the broker default.
_WORKER_INT_DEFAULTS = {spec.name: spec.default for spec in OFFSET_STORAGE_KEYS if spec.type != "string"}


def _worker_values(worker: Mapping[str, Setting], problems: list[Problem]) -> dict[str, object]:
    values: dict[str, object] = {"offset_storage_topic": worker["offset.storage.topic"].value.strip()}
    for key, default in _WORKER_INT_DEFAULTS.items():
        attribute = key.replace(".", "_")
        setting = worker.get(key)
        values[attribute] = default
        if setting is None:
            continue
        try:
            number = parse_int(setting.value)
        except InvalidValue as exc:
            problems.append(error(setting.origin, f"{key}: {exc.message}", exc.fix))
            continue
        if number < 1 and number != -1:
            problems.append(
                error(
                    setting.origin,
                    f"{key} must be a positive number or -1 (broker default), got {number}",
                    f"write {default}",
                )
            )
            continue
        values[attribute] = number
    return values


def _safe(factory: Callable[..., object], *args: object) -> object:
    """Build a filter; a pattern already reported as invalid falls back to the defaults."""
    try:
        return factory(*args)
    except re.error:
        return factory()


def _invalid_pattern(origin: str, name: str, values: tuple[str, ...], exc: re.error) -> Problem:
    """Name the item that does not compile (MM2 splits on commas and joins the items with |)."""
    for item in values:
        try:
            re.compile(item)
        except re.error as item_exc:
            hint = glob_hint(item)
            return error(
                origin,
                f"{name}: item {item!r} is not a valid regular expression ({item_exc}); MM2 joins the items "
                f"into {'|'.join(values)!r}" + (f"; {hint.split('; write ')[0]}" if hint else ""),
                f"write {glob_to_regex(item)} instead of {item}"
                if hint
                else "fix the item; each comma-separated item is a regex matched against whole names",
            )
    joined = "|".join(values)
    return error(
        origin,
        f"{name}: {joined!r} (the list joined with |) is not a valid regular expression: {exc}",
        "fix the pattern; list items are regexes matched against whole names",
    )
