"""Configuration problems: every one names the key, what is wrong and how to fix it."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum


class Severity(Enum):
    ERROR = "error"
    WARNING = "warning"


@dataclass(frozen=True, slots=True)
class Problem:
    key: str
    severity: Severity
    message: str
    fix: str

    @property
    def is_error(self) -> bool:
        return self.severity is Severity.ERROR

    def __str__(self) -> str:
        return f"{self.severity.value}: {self.key}: {self.message} (fix: {self.fix})"


def error(key: str, message: str, fix: str) -> Problem:
    return Problem(key, Severity.ERROR, message, fix)


def warning(key: str, message: str, fix: str) -> Problem:
    return Problem(key, Severity.WARNING, message, fix)


def unique(problems: Iterable[Problem]) -> list[Problem]:
    """Drop repeats: a top-level setting is resolved once per flow but is one mistake."""
    seen: dict[Problem, None] = {}
    for problem in problems:
        seen.setdefault(problem, None)
    return list(seen)


class ConfigError(ValueError):
    """The configuration cannot be used; `problems` lists every error (and the warnings) found."""

    def __init__(self, problems: Iterable[Problem], source: str = "configuration") -> None:
        self.problems = unique(problems)
        self.source = source
        errors = [p for p in self.problems if p.is_error]
        lines = [f"{source}: {len(errors)} error(s)"]
        lines += [f"  - {p}" for p in errors]
        super().__init__("\n".join(lines))
