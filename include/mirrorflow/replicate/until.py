"""The moment a migration copies up to, or a verification checks up to, as people write it.

`now`, epoch milliseconds, or an ISO-8601 date or time (UTC when no zone is given). Epoch
seconds are the likely slip: 1795680000 read as milliseconds is 21 January 1970, a moment before
any data, so a migration "up to" it copies nothing. Such a number is refused with the time it
would have meant in seconds, never taken as milliseconds in silence.
"""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime

# Epoch milliseconds below this (3 March 1973) are taken for epoch seconds: as seconds, this is
# the year 5138, and no Kafka record is older than 1973.
EPOCH_MS_FLOOR = 100_000_000_000
EXAMPLE_ISO = "2026-11-21T17:00:00Z"
_ISO = re.compile(
    r"(?P<date>\d{4}-\d{2}-\d{2})"
    r"(?:[Tt ](?P<time>\d{2}:\d{2}(?::\d{2}(?P<fraction>[.,]\d+)?)?)"
    r"(?P<zone>[Zz]|[+-]\d{2}(?::?\d{2})?)?)?"
)


class UntilError(ValueError):
    """A time that cannot be read; the message is a sentence saying what to write instead."""


def utc_text(ms: int) -> str:
    """`2026-11-21 17:00:00 UTC` (milliseconds shown only when there are any)."""
    text = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(ms / 1000))
    return f"{text}.{ms % 1000:03d} UTC" if ms % 1000 else f"{text} UTC"


def parse_until(text: str | int | None) -> int | None:
    """`now` (or empty) -> None; epoch milliseconds or an ISO-8601 date or time -> milliseconds.
    UntilError names what is wrong and what to write."""
    if text is None:
        return None
    if isinstance(text, bool):
        raise UntilError(f"{text!r} is not a time: write now, epoch milliseconds or an ISO-8601 time")
    if isinstance(text, int):
        return _epoch_ms(text, str(text))
    value = str(text).strip()
    if value.lower() in ("", "now"):
        return None
    if value.isdigit():
        return _epoch_ms(int(value), value)
    match = _ISO.fullmatch(value)
    if match is None:
        raise UntilError(
            f"{value!r} is not a time mirrorflow reads: write now, epoch milliseconds such as "
            f"1795680000000, or an ISO-8601 time such as {EXAMPLE_ISO} (UTC when no zone is given)"
        )
    return _iso_ms(match, value)


def _epoch_ms(ms: int, written: str) -> int:
    if ms < EPOCH_MS_FLOOR:
        raise UntilError(
            f"{written} looks like epoch seconds ({utc_text(ms * 1000)}), but this field takes epoch milliseconds, "
            f"in which it would be {utc_text(ms)}, before any data: write {ms * 1000} or an ISO-8601 time "
            f"such as {EXAMPLE_ISO}"
        )
    return ms


def _iso_ms(match: re.Match[str], written: str) -> int:
    clock = match["time"] or "00:00"
    fraction = match["fraction"] or ""
    if fraction:  # Python reads at most microseconds; nanoseconds are cut, not refused
        clock = clock.replace(fraction, "." + fraction[1:7].ljust(6, "0"))
    zone = match["zone"] or "+00:00"
    if zone in ("Z", "z"):
        zone = "+00:00"
    elif len(zone) == 3:
        zone += ":00"
    elif ":" not in zone:
        zone = f"{zone[:3]}:{zone[3:]}"
    try:
        moment = datetime.fromisoformat(f"{match['date']}T{clock}{zone}")
    except ValueError as exc:
        raise UntilError(
            f"{written!r} is not a valid time ({exc}): write an ISO-8601 time such as {EXAMPLE_ISO}"
        ) from None
    return int(moment.astimezone(UTC).timestamp() * 1000)
