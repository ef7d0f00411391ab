"""Configuration problems: every one names the key, what is wrong and how to fix it."""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum

# Characters that change what a terminal shows (line breaks inside a finding, direction overrides).
_INVISIBLE = frozenset("\u2028\u2029\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def printable(text: str) -> str:
    """`text` with control and direction characters written as escapes (\\x00, \\x1b, \\u202e).

    Keys and values come from files a user may not have meant to give (a binary, a file with
    stray escape sequences): a finding must never send raw control bytes to a terminal or a log.
    """
    if text.isprintable():
        return text
    out = []
    for char in text:
        if unicodedata.category(char) == "Cc" or char in _INVISIBLE:
            code = ord(char)
            out.append(f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")
        else:
            out.append(char)
    return "".join(out)


class Severity(Enum):
    ERROR = "error"
    WARNING = "warning"
    NOTE = "note"  # what a check could not look at, and how to let it; nothing is wrong


@dataclass(frozen=True, slots=True)
class Problem:
    key: str
    severity: Severity
    message: str
    fix: str

    def __post_init__(self) -> None:
        for name in ("key", "message", "fix"):
            object.__setattr__(self, name, printable(getattr(self, name)))

    @property
    def is_error(self) -> bool:
        return self.severity is Severity.ERROR

    @property
    def is_warning(self) -> bool:
        return self.severity is Severity.WARNING

    def __str__(self) -> str:
        return f"{self.severity.value}: {self.key}: {self.message} (fix: {self.fix})"


def error(key: str, message: str, fix: str) -> Problem:
    return Problem(key, Severity.ERROR, message, fix)


def warning(key: str, message: str, fix: str) -> Problem:
    return Problem(key, Severity.WARNING, message, fix)


def note(key: str, message: str, fix: str) -> Problem:
    return Problem(key, Severity.NOTE, message, fix)


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
