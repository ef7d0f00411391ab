"""Typed values the way Kafka's ConfigDef parses them, with errors that say what to write instead.

ConfigDef trims every value before parsing; booleans are `true`/`false` in any case; lists split
on commas with the surrounding whitespace removed (an empty value is an empty list, and a
trailing comma leaves an empty last element, as Java's split with limit -1 does).
"""

from __future__ import annotations

import re

_COMMA_WITH_WHITESPACE = re.compile(r"\s*,\s*")
_DURATION = re.compile(r"^(?P<number>\d+(?:\.\d+)?)\s*(?P<unit>[a-z]+)$", re.IGNORECASE)
_UNIT_MS = {
    **dict.fromkeys(("ms", "millis", "millisecond", "milliseconds"), 1),
    **dict.fromkeys(("s", "sec", "secs", "second", "seconds"), 1000),
    **dict.fromkeys(("m", "min", "mins", "minute", "minutes"), 60_000),
    **dict.fromkeys(("h", "hr", "hrs", "hour", "hours"), 3_600_000),
    **dict.fromkeys(("d", "day", "days"), 86_400_000),
}
_INT_RANGES = {"short": (-(2**15), 2**15 - 1), "int": (-(2**31), 2**31 - 1), "long": (-(2**63), 2**63 - 1)}


class InvalidValue(ValueError):
    """A value that does not parse; `fix` tells the user what to write."""

    def __init__(self, message: str, fix: str) -> None:
        super().__init__(message)
        self.message = message
        self.fix = fix


def parse_list(raw: str) -> list[str]:
    trimmed = raw.strip()
    if not trimmed:
        return []
    return _COMMA_WITH_WHITESPACE.split(trimmed)


def parse_bool(raw: str) -> bool:
    trimmed = raw.strip().lower()
    if trimmed == "true":
        return True
    if trimmed == "false":
        return False
    raise InvalidValue(f"{raw.strip()!r} is not true or false", "write true or false")


def duration_ms(text: str) -> int | None:
    match = _DURATION.match(text)
    if not match or match.group("unit").lower() not in _UNIT_MS:
        return None
    return round(float(match.group("number")) * _UNIT_MS[match.group("unit").lower()])


def parse_int(raw: str, *, kind: str = "int", unit: str | None = None) -> int:
    """A Java short/int/long; `unit` ("seconds" or "milliseconds") improves the message for durations."""
    text = raw.strip()
    if not re.fullmatch(r"[+-]?[0-9]+", text):
        duration = duration_ms(text)
        if unit == "seconds" and duration is not None:
            raise InvalidValue(
                f"{text!r} is not an integer number of seconds", f"write {max(duration // 1000, 0)}"
            )
        if unit == "milliseconds" and duration is not None:
            raise InvalidValue(f"{text!r} is not an integer number of milliseconds", f"write {duration}")
        what = f"an integer number of {unit}" if unit else "an integer"
        raise InvalidValue(f"{text!r} is not {what}", "write a whole number, e.g. 3")
    value = int(text)
    low, high = _INT_RANGES[kind]
    if not low <= value <= high:
        raise InvalidValue(
            f"{value} does not fit a Java {kind} ({low}..{high})", f"write a value in {low}..{high}"
        )
    return value
