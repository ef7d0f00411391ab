"""Kafka config providers: `${provider:[path:]key}` references resolved when the file is loaded.

The syntax, the providers' names in `config.providers` and their classes and parameters are
Kafka's (EnvVarConfigProvider, FileConfigProvider, DirectoryConfigProvider, including
`allowlist.pattern` and `allowed.paths`). One deliberate difference: Kafka leaves a reference
it cannot resolve in place and carries on; mirrorflow reports it as an error naming the key
that used it, because an unresolved `${env:...}` is never a usable value.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from mirrorflow.config.problems import ConfigError, Problem, error
from mirrorflow.config.properties import decode, parse_properties
from mirrorflow.config.values import parse_list

# Kafka's ConfigTransformer.DEFAULT_PATTERN.
VARIABLE = re.compile(r"\$\{([^}]*?):(([^}]*?):)?([^}]*?)\}")
PROVIDERS_KEY = "config.providers"
PROVIDER_CLASSES = {
    "org.apache.kafka.common.config.provider.EnvVarConfigProvider": "env",
    "org.apache.kafka.common.config.provider.FileConfigProvider": "file",
    "org.apache.kafka.common.config.provider.DirectoryConfigProvider": "directory",
}


@dataclass(frozen=True, slots=True)
class Setting:
    """A value as resolved, with the key and text it came from (for messages and redaction)."""

    value: str
    origin: str
    raw: str

    @property
    def from_provider(self) -> bool:
        return VARIABLE.search(self.raw) is not None

    def __repr__(self) -> str:
        return f"Setting(origin={self.origin!r})"


class _LookupError(Exception):
    def __init__(self, message: str, fix: str) -> None:
        super().__init__(message)
        self.message = message
        self.fix = fix


@dataclass(frozen=True)
class _Provider:
    name: str
    kind: str
    params: Mapping[str, str] = field(repr=False)
    env: Mapping[str, str] = field(repr=False)

    def lookup(self, path: str, key: str) -> str:
        return {"env": self._env, "file": self._file, "directory": self._directory}[self.kind](path, key)

    def _env(self, path: str, key: str) -> str:
        if path:
            raise _LookupError(
                f"the env provider takes no path, got {path!r}", f"write ${{{self.name}:{key}}}"
            )
        pattern = self.params.get("allowlist.pattern")
        try:
            allowed = pattern is None or re.fullmatch(pattern, key) is not None
        except re.error as exc:
            raise _LookupError(
                f"{PROVIDERS_KEY}.{self.name}.param.allowlist.pattern is not a valid regex ({exc})",
                "fix the pattern",
            ) from exc
        if not allowed:
            raise _LookupError(
                f"environment variable {key} is not allowed by {PROVIDERS_KEY}.{self.name}.param.allowlist.pattern",
                "widen the allowlist pattern or use another variable",
            )
        if key not in self.env:
            raise _LookupError(f"environment variable {key} is not set", f"export {key}=... before starting")
        return self.env[key]

    def _allowed(self, path: str) -> Path:
        allowed = self.params.get("allowed.paths")
        candidate = Path(os.path.normpath(path))
        if allowed:
            roots = [Path(os.path.normpath(p)) for p in allowed.split(",")]
            if not any(candidate.is_relative_to(root) for root in roots):
                raise _LookupError(
                    f"{path} is outside {PROVIDERS_KEY}.{self.name}.param.allowed.paths ({allowed})",
                    "move the file under an allowed path or extend allowed.paths",
                )
        return candidate

    def _file(self, path: str, key: str) -> str:
        if not path:
            raise _LookupError(
                "the file provider needs a path", f"write ${{{self.name}:/path/to/file.properties:{key}}}"
            )
        file = self._allowed(path)
        try:
            text = file.read_bytes().decode("utf-8")
        except OSError as exc:
            raise _LookupError(
                f"cannot read {path}: {exc.strerror or exc}", "check the path and permissions"
            ) from exc
        try:
            values = parse_properties(text, str(file)).values
        except ConfigError as exc:
            raise _LookupError(f"{path} is not a properties file", str(exc.problems[0])) from exc
        if key not in values:
            raise _LookupError(f"{path} has no key {key}", f"add {key}=... to {path}")
        return values[key]

    def _directory(self, path: str, key: str) -> str:
        if not path:
            raise _LookupError(
                "the directory provider needs a path", f"write ${{{self.name}:/path/to/dir:{key}}}"
            )
        file = self._allowed(path) / key
        if not file.is_file():
            raise _LookupError(f"{file} is not a file", f"create {file} (the file's content is the value)")
        try:
            return decode(file.read_bytes())
        except OSError as exc:
            raise _LookupError(f"cannot read {file}: {exc.strerror or exc}", "check permissions") from exc


def _providers(
    values: Mapping[str, str], env: Mapping[str, str]
) -> tuple[dict[str, _Provider], list[Problem]]:
    providers: dict[str, _Provider] = {}
    problems: list[Problem] = []
    for name in parse_list(values.get(PROVIDERS_KEY, "")):
        class_key = f"{PROVIDERS_KEY}.{name}.class"
        class_name = values.get(class_key, "").strip()
        known = ", ".join(f"{kind}: {cls}" for cls, kind in PROVIDER_CLASSES.items())
        if not class_name:
            problems.append(
                error(
                    class_key,
                    f"config provider '{name}' has no class",
                    f"set {class_key} to one of ({known})",
                )
            )
            continue
        if class_name not in PROVIDER_CLASSES:
            problems.append(
                error(
                    class_key,
                    f"mirrorflow cannot run the Java config provider {class_name}",
                    f"use one of Kafka's built-in providers ({known}), e.g. expose the secret as an environment variable",
                )
            )
            continue
        prefix = f"{PROVIDERS_KEY}.{name}.param."
        params = {k[len(prefix) :]: v.strip() for k, v in values.items() if k.startswith(prefix)}
        providers[name] = _Provider(name, PROVIDER_CLASSES[class_name], params, env)
    return providers, problems


def resolve(values: Mapping[str, str], env: Mapping[str, str]) -> tuple[dict[str, Setting], list[Problem]]:
    """Every value with its references replaced; problems name the key holding a bad reference."""
    providers, problems = _providers(values, env)
    resolved: dict[str, Setting] = {}
    for key, raw in values.items():
        if key.startswith(PROVIDERS_KEY):
            resolved[key] = Setting(raw, key, raw)
            continue
        resolved[key] = Setting(_substitute(key, raw, providers, problems), key, raw)
    return resolved, problems


def _substitute(key: str, raw: str, providers: Mapping[str, _Provider], problems: list[Problem]) -> str:
    def replace(match: re.Match[str]) -> str:
        name, path, variable = match.group(1), match.group(3) or "", match.group(4)
        provider = providers.get(name)
        if provider is None:
            problems.append(
                error(
                    key,
                    f"refers to config provider '{name}' in {match.group(0)}, which {PROVIDERS_KEY} does not define",
                    f"add {name} to {PROVIDERS_KEY} and set {PROVIDERS_KEY}.{name}.class",
                )
            )
            return match.group(0)
        try:
            return provider.lookup(path, variable)
        except _LookupError as exc:
            problems.append(error(key, f"{match.group(0)}: {exc.message}", exc.fix))
            return match.group(0)

    return VARIABLE.sub(replace, raw)
