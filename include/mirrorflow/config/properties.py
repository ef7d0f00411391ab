"""Reading a properties file exactly as java.util.Properties (and so MM2) does.

jproperties follows java.util.Properties for `#`/`!` full-line comments (never inline),
backslash continuations (leading whitespace of the next line dropped), `\\u` escapes (four hex digits) and the other
escapes, the `=`, `:` and whitespace separators, and "last occurrence wins". It differs in one
place that real files hit: a comment starting `#:` or `!:` is parsed as jproperties metadata,
and `#:` with nothing after it is a parse error. Java treats both as plain comments; so does
the parser below.

Encoding: Kafka reads the file as ISO-8859-1. mirrorflow decodes UTF-8 (identical for ASCII,
and what editors write), falls back to ISO-8859-1 for bytes that are not UTF-8, and drops a
UTF-8 byte order mark that would otherwise become part of the first key. Bytes that are not
text at all (a binary given by mistake) are refused with one finding instead of one "unknown key"
per line of garbage.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from jproperties import ParseError, Properties

from mirrorflow.config.lint import lint_dropped_escapes, lint_values
from mirrorflow.config.problems import ConfigError, Problem, error, warning

# Control characters that never appear in a text file (tab, line feed, form feed and carriage
# return do): C0 controls, DEL and the C1 range ISO-8859-1 maps 0x80-0x9f to.
_BINARY_CHARS = re.compile(r"[\x00-\x08\x0b\x0e-\x1f\x7f-\x9f]")


class _JavaProperties(Properties):
    """jproperties with Java's comment handling (no metadata comments)."""

    def _parse_comment(self) -> None:
        self._getc()
        self._skip_natural_line()


class _RecordingDict(dict[str, str]):
    """Remembers keys assigned twice, so a duplicated line can be reported."""

    def __init__(self) -> None:
        super().__init__()
        self.repeated: list[str] = []

    def __setitem__(self, key: str, value: str) -> None:
        if key in self:
            self.repeated.append(key)
        super().__setitem__(key, value)


@dataclass(frozen=True)
class PropertiesFile:
    """The parsed key/value pairs plus where they came from, for messages."""

    source: str
    values: dict[str, str]
    problems: list[Problem] = field(default_factory=list)
    lines: dict[str, int] = field(default_factory=dict)


def decode(data: bytes) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return data.decode("iso-8859-1")


def not_text(text: str, source: str) -> Problem | None:
    """One error for a file that is not a properties file at all (NUL bytes, or many control
    characters: a binary, an archive, a key store), instead of a finding per line of garbage."""
    if "\x00" in text:
        why = "it contains NUL bytes"
    else:
        controls = len(_BINARY_CHARS.findall(text))
        if not controls or controls * 100 < len(text):
            return None
        why = f"{controls} of its {len(text)} characters are control characters"
    return error(
        source,
        f"not a properties file ({why}; it looks like a binary file)",
        "give the path of the MM2 properties file (text lines of key = value, e.g. connect-mirror-maker.properties)",
    )


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """(first line number, text) of each logical line, continuations joined as Java joins them."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    logical: list[tuple[int, str]] = []
    number = 0
    while number < len(lines):
        start, joined = number + 1, lines[number]
        while _continues(joined) and number + 1 < len(lines):
            number += 1
            joined = joined[:-1] + lines[number].lstrip(" \t\f")
        logical.append((start, joined))
        number += 1
    return logical


def _continues(line: str) -> bool:
    return (len(line) - len(line.rstrip("\\"))) % 2 == 1


_KEY_END = re.compile(r"(?<!\\)(?:\\\\)*[=:\s]")
_KEY_ESCAPE = re.compile(r"\\(u[0-9a-fA-F]{4}|.)")


def _unescape_key(raw: str) -> str:
    def one(match: re.Match[str]) -> str:
        escaped = match.group(1)
        if len(escaped) == 5:
            return chr(int(escaped[1:], 16))
        return {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}.get(escaped, escaped)

    return _KEY_ESCAPE.sub(one, raw)


def _entries(text: str) -> list[tuple[int, str, str]]:
    """(line, key, value as written: escapes not yet read) of each key/value line, in file order."""
    found = []
    for number, line in _logical_lines(text):
        stripped = line.lstrip(" \t\f")
        if not stripped or stripped[0] in "#!":
            continue
        end = _KEY_END.search(stripped)
        raw_key = stripped if end is None else stripped[: end.end() - 1]
        rest = "" if end is None else stripped[end.end() - 1 :].lstrip(" \t\f")
        if rest[:1] in ("=", ":"):
            rest = rest[1:].lstrip(" \t\f")
        found.append((number, _unescape_key(raw_key), rest))
    return found


def key_lines(text: str) -> dict[str, int]:
    """The line each key was last set on, for findings that point at the line to edit."""
    return {key: number for number, key, _ in _entries(text)}


def raw_values(text: str) -> dict[str, str]:
    """Each key's last value as written in the file, before Java reads its escapes."""
    return {key: raw for _, key, raw in _entries(text)}


def parse_properties(text: str, source: str = "<text>") -> PropertiesFile:
    """Parse properties text; a syntax error raises ConfigError naming the line."""
    garbage = not_text(text, source)
    if garbage is not None:
        raise ConfigError([garbage], source)
    parser = _JavaProperties()
    recorded = _RecordingDict()
    parser.properties = recorded
    try:
        parser.load(text.removeprefix("\ufeff"))
    except ParseError as exc:
        raise ConfigError(
            [
                error(
                    f"{source}:{exc.line_number}",
                    f"not a valid properties file: {exc.message}",
                    "fix the line; a \\u escape needs exactly four hex digits (write \\\\u for a literal backslash-u)",
                )
            ],
            source,
        ) from exc
    problems = [
        warning(
            key,
            f"set more than once in {source}; the last value wins (as in Java)",
            f"keep a single {key} line",
        )
        for key in dict.fromkeys(recorded.repeated)
    ]
    lines = key_lines(text.removeprefix("\ufeff"))
    problems += lint_values(recorded, lines, source)
    problems += lint_dropped_escapes(recorded, raw_values(text.removeprefix("\ufeff")), lines)
    return PropertiesFile(source, dict(recorded), problems, lines)


def read_properties_file(path: str | os.PathLike[str]) -> PropertiesFile:
    file = Path(path)
    try:
        data = file.read_bytes()
    except OSError as exc:
        raise ConfigError(
            [error(str(file), f"cannot read the config file: {exc.strerror or exc}", "check the path")],
            str(file),
        ) from exc
    return parse_properties(decode(data), str(file))


def load_properties(path_or_text: str | os.PathLike[str]) -> PropertiesFile:
    """A path (PathLike, or a one-line string naming an existing file or ending in .properties) or text."""
    if isinstance(path_or_text, os.PathLike):
        return read_properties_file(path_or_text)
    text = str(path_or_text)
    single_line = "\n" not in text and "\r" not in text
    if single_line and (os.path.isfile(text) or text.strip().endswith(".properties")):
        return read_properties_file(text)
    return parse_properties(text)
