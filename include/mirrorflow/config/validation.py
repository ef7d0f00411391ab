"""Everything wrong with a configuration, found at once, before anything runs.

Errors stop mirrorflow: missing or unknown clusters, flows to themselves, bad regexes, missing
bootstrap servers, unusable policies, provider references that do not resolve, invalid values,
and identity-named cycles that would loop without provenance headers. Warnings are keys MM2
silently ignores (typos, blog-post keys, keys written at a level where they have no effect),
removed 3.x aliases (still honoured) and client settings librdkafka cannot use. This module
checks each key; flow_checks.py the flows taken together.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable
from typing import TYPE_CHECKING

from mirrorflow.config.flow_checks import check_bootstrap, check_identity_cycles, check_offset_syncs
from mirrorflow.config.key_kinds import (
    CLIENT_PREFIXES,
    CONNECTOR_CONFIG_NAMES,
    FLOW_ONLY_KEYS,
    FOREIGN_KEYS,
    JAVA_CLIENT_KEYS,
    MIRRORMAKER_KEYS,
    SHARED_CLIENT_KEYS,
    WORKER_KEYS,
    WORKER_PREFIXES,
)
from mirrorflow.config.keys import CONNECTOR_KEYS_BY_NAME, DEPRECATED_ALIASES
from mirrorflow.config.mirrorflow_keys import AIRFLOW_CONNECTION_KEY, CLUSTER_KEYS, FLOW_KEYS
from mirrorflow.config.problems import Problem, error, unique, warning
from mirrorflow.config.replicate_mode import check_replicate_modes
from mirrorflow.config.values import InvalidValue, duration_ms, parse_list

if TYPE_CHECKING:
    from mirrorflow.config.model import MirrorConfig

_CLIENTS = [(side, kind) for side in ("source", "target") for kind in ("consumer", "producer", "admin")]
_FLOW_CLIENT_PREFIXES = tuple(
    f"{side}.{kind}." for side in ("source", "target") for kind in ("consumer", "producer", "admin")
)
_CONNECTOR_NAMES = sorted(set(CONNECTOR_KEYS_BY_NAME) | set(CONNECTOR_CONFIG_NAMES) - SHARED_CLIENT_KEYS)
_FLOW_CANDIDATES = sorted({*_CONNECTOR_NAMES, *FLOW_KEYS, *FLOW_ONLY_KEYS})
_TOP_CANDIDATES = sorted({*_CONNECTOR_NAMES, *FLOW_KEYS, *MIRRORMAKER_KEYS, *SHARED_CLIENT_KEYS})
_CLUSTER_CANDIDATES = sorted({*SHARED_CLIENT_KEYS, *CLUSTER_KEYS, *WORKER_KEYS})


def validate(config: MirrorConfig) -> list[Problem]:
    """Every problem in `config`, errors and warnings, each with key, message and fix."""
    problems = list(config.parse_problems)
    clusters = config.clusters
    if not clusters:
        problems.append(
            error(
                "clusters",
                "clusters is missing or empty",
                "list the cluster aliases, e.g. clusters = primary, backup",
            )
        )
    elif "" in parse_list(config.value("clusters") or ""):
        problems.append(
            error("clusters", "clusters has an empty alias", "remove the stray comma from the clusters list")
        )
    for key in config.settings:
        problems += _check_key(config, key)
    flows = []
    for source, target in config.pairs():
        flow, flow_problems = config.resolved_flow(source, target)
        problems += flow_problems
        if config.replication_enabled(source, target) or config.heartbeats_enabled(source, target):
            flows.append(flow)
    replication = [f for f in flows if config.replication_enabled(f.source, f.target)]
    problems += check_bootstrap(config, flows)
    problems += check_identity_cycles(replication)
    problems += check_offset_syncs(replication)
    problems += check_replicate_modes(replication)
    for flow in flows:
        for side, kind in _CLIENTS:
            problems += flow.file_client_config(side, kind)[1]
    return unique(problems)


def _words(key: str) -> list[str]:
    return [word for word in re.split(r"[.\-_]", key) if word]


def _typo_of(word: str, candidate: str) -> bool:
    """Whether `candidate` could be `word` mistyped: every word of `word` is in `candidate` or a
    misspelling of one of its words. `sync.topic.configs.strategy` is not a typo of
    `sync.topic.configs.enabled` (strategy and enabled mean different things)."""
    theirs = _words(candidate)
    return all(
        mine in theirs or difflib.get_close_matches(mine, theirs, n=1, cutoff=0.75) for mine in _words(word)
    )


def _did_you_mean(word: str, candidates: Iterable[str]) -> str:
    close = difflib.get_close_matches(word, list(candidates), n=3, cutoff=0.6)
    typos = [candidate for candidate in close if _typo_of(word, candidate)]
    return (
        f"did you mean {typos[0]}?"
        if typos
        else "remove it or check the MM2 documentation for the key's name"
    )


def _unknown(key: str, name: str, value: str, message: str, candidates: Iterable[str]) -> Problem:
    """An unknown key: MM2's answer for keys from other tools' docs, the `.seconds` key with the
    value converted for a duration written with a unit, or a typo suggestion."""
    if name in FOREIGN_KEYS:
        what, fix = FOREIGN_KEYS[name]
        return warning(key, f"there is no {name} setting in MM2, which ignores it: {what}", fix)
    renamed = _seconds_key(key, name, value)
    if renamed is not None:
        return renamed
    return warning(key, message, _did_you_mean(name, candidates))


def _seconds_key(key: str, name: str, value: str) -> Problem | None:
    """`emit.checkpoints.interval = 1m` or `...interval.ms = 60000`: MM2's key is `.interval.seconds`."""
    stem = re.sub(r"\.(interval|interval\.ms|interval\.millis|interval\.sec|interval\.secs)$", "", name)
    real = f"{stem}.interval.seconds"
    if stem == name or real not in CONNECTOR_KEYS_BY_NAME:
        return None
    written = key[: len(key) - len(name)] + real
    text = value.strip()
    if re.fullmatch(r"[0-9]+", text):
        millis = int(text) if name.endswith((".ms", ".millis")) else None
        if millis is None:
            seconds = f"{text} if {text} is in seconds"
        else:
            seconds = str(max(round(millis / 1000), 1 if millis else 0))
    else:
        millis = duration_ms(text)
        seconds = None if millis is None else str(max(round(millis / 1000), 1 if millis else 0))
    what = f"{text!r} means {seconds} s" if seconds and text != seconds and " " not in seconds else ""
    return warning(
        key,
        f"unknown key; MM2 ignores it and uses the default. {real} is the key, and it takes a whole number "
        "of seconds" + (f" ({what})" if what else ""),
        f"did you mean {real}? use {written} = {seconds or '<seconds>'}",
    )


def _split_flow_key(config: MirrorConfig, key: str) -> tuple[str, str, str] | None:
    """(source, target, rest) for `S->T.rest` with listed aliases, longest aliases first."""
    for source in sorted(config.clusters, key=len, reverse=True):
        for target in sorted(config.clusters, key=len, reverse=True):
            prefix = f"{source}->{target}."
            if key.startswith(prefix):
                return source, target, key[len(prefix) :]
    return None


def _check_key(config: MirrorConfig, key: str) -> list[Problem]:
    if key.startswith("config.providers"):
        return []
    if "->" in key:
        return _check_flow_key(config, key)
    for alias in sorted(config.clusters, key=len, reverse=True):
        if key.startswith(f"{alias}."):
            return _check_cluster_key(config, alias, key[len(alias) + 1 :], key)
    return _check_top_level_key(config, key)


def _check_flow_key(config: MirrorConfig, key: str) -> list[Problem]:
    split = _split_flow_key(config, key)
    if split is None:
        pair = key.split(".", 1)[0]
        source, _, target = pair.partition("->")
        unknown = [alias for alias in (source, target) if alias not in config.clusters]
        return [
            error(
                key,
                f"flow {pair} names cluster(s) not listed in clusters: {', '.join(unknown) or pair}",
                f"add {', '.join(unknown) or 'them'} to clusters ({', '.join(config.clusters) or 'empty'}) or fix the alias",
            )
        ]
    source, target, rest = split
    if source == target:
        return [error(key, f"a flow from {source} to itself", "remove it; flows need two different clusters")]
    if rest in CONNECTOR_KEYS_BY_NAME or rest in FLOW_KEYS or rest in FLOW_ONLY_KEYS:
        return []
    if rest in SHARED_CLIENT_KEYS:
        return [
            warning(
                key,
                f"MM2 does not pass flow-level {rest} to any client",
                f"set {source}.{rest} (source cluster) or {target}.{rest} (target cluster), "
                f"or {source}->{target}.source.consumer.{rest} for one client",
            )
        ]
    if rest in CONNECTOR_CONFIG_NAMES or rest.startswith(CLIENT_PREFIXES + _FLOW_CLIENT_PREFIXES):
        return []
    if rest.startswith(("source.cluster.", "target.cluster.")):
        return []
    if rest == AIRFLOW_CONNECTION_KEY:
        return [
            warning(
                key, "airflow.connection.id is a per-cluster key", f"write {source}.{rest} or {target}.{rest}"
            )
        ]
    return [
        _unknown(
            key,
            rest,
            config.settings[key].raw,
            f"unknown flow setting {rest}; MM2 ignores it",
            _FLOW_CANDIDATES,
        )
    ]


def _flows_from(config: MirrorConfig, alias: str) -> list[str]:
    return [f"{s}->{t}" for s, t in config.pairs() if s == alias and config.replication_enabled(s, t)]


def _check_cluster_key(config: MirrorConfig, alias: str, rest: str, key: str) -> list[Problem]:
    if rest in SHARED_CLIENT_KEYS or rest in WORKER_KEYS:
        return []
    if rest.startswith(CLIENT_PREFIXES) and rest not in CONNECTOR_KEYS_BY_NAME:
        return []
    if rest.startswith(WORKER_PREFIXES):
        return []
    if rest in CLUSTER_KEYS:
        try:
            CLUSTER_KEYS[rest].parse(config.settings[key].value)
        except InvalidValue as exc:
            return [error(key, exc.message, exc.fix)]
        return []
    is_flow_setting = (
        rest in CONNECTOR_KEYS_BY_NAME
        or rest in CONNECTOR_CONFIG_NAMES
        or rest in FLOW_ONLY_KEYS
        or rest in FLOW_KEYS
    )
    if is_flow_setting:
        flows = _flows_from(config, alias) or [f"{alias}-><target>"]
        return [
            warning(
                key,
                f"has no effect in MM2: settings under a cluster alias only configure that cluster's clients, "
                f"not the flows out of {alias}",
                f"write {' and '.join(f'{flow}.{rest}' for flow in flows)}, or {rest} at the top level for every flow",
            )
        ]
    if rest in JAVA_CLIENT_KEYS:
        return [
            warning(
                key,
                f"MM2 passes only bootstrap and security settings from {alias}.* to clients; {rest} is ignored",
                f"write {alias}.consumer.{rest}, {alias}.producer.{rest} or {alias}.admin.{rest}",
            )
        ]
    return [
        warning(key, f"unknown setting {rest} for cluster {alias}", _did_you_mean(rest, _CLUSTER_CANDIDATES))
    ]


def _check_top_level_key(config: MirrorConfig, key: str) -> list[Problem]:
    if key == "enabled" and any(config.replication_enabled(s, t) for s, t in config.pairs()):
        return [
            warning(
                key,
                "a top-level enabled=true makes MM2 replicate every pair of clusters that has a heartbeat herder "
                "(all pairs while heartbeats are on), not only the flows you list",
                "remove it and enable flows one by one with <source>-><target>.enabled = true",
            )
        ]
    if key in MIRRORMAKER_KEYS or key in SHARED_CLIENT_KEYS or key in CONNECTOR_CONFIG_NAMES:
        return []
    if key in DEPRECATED_ALIASES or key.startswith(WORKER_PREFIXES):
        return []
    if key in FLOW_KEYS:
        return []
    flows = [f"{s}->{t}" for s, t in config.pairs() if config.replication_enabled(s, t)] or [
        "<source>-><target>"
    ]
    if key in FLOW_ONLY_KEYS:
        return [
            warning(
                key,
                "MM2 ignores this key at the top level (it is not a connector setting there); it works per flow",
                f"write {' and '.join(f'{flow}.{key}' for flow in flows)}",
            )
        ]
    if key.startswith(CLIENT_PREFIXES) or key in JAVA_CLIENT_KEYS:
        return [
            warning(
                key,
                "MM2 ignores client settings at the top level (only bootstrap and security keys apply to all clusters)",
                "write it per cluster (<alias>.consumer.…, <alias>.producer.…, <alias>.admin.…) or per flow "
                f"({flows[0]}.consumer.…)",
            )
        ]
    head, _, rest = key.partition(".")
    if rest and (
        rest in SHARED_CLIENT_KEYS or rest.startswith(CLIENT_PREFIXES) or rest in CONNECTOR_KEYS_BY_NAME
    ):
        return [
            warning(
                key,
                f"{head} is not listed in clusters, so this setting is unused",
                f"add {head} to clusters ({', '.join(config.clusters) or 'empty'}) or remove the key",
            )
        ]
    return [_unknown(key, key, config.settings[key].raw, "unknown key; MM2 ignores it", _TOP_CANDIDATES)]
