"""Reading a properties file exactly as java.util.Properties (and so MM2) does.

jproperties follows java.util.Properties for `#`/`!` full-line comments (never inline),
backslash continuations (leading whitespace of the next line dropped), `\\u` escapes (four hex digits) and the other
escapes, the `=`, `:` and whitespace separators, and "last occurrence wins". It differs in one
place that real files hit: a comment starting `#:` or `!:` is parsed as jproperties metadata,
and `#:` with nothing after it is a parse error. Java treats both as plain comments; so does
the parser below.

Encoding: Kafka reads the file as ISO-8859-1. mirrorflow decodes UTF-8 (identical for ASCII,
and what editors write), falls back to ISO-8859-1 for bytes that are not UTF-8, and drops a
UTF-8 byte order mark that would otherwise become part of the first key.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from jproperties import ParseError, Properties

from mirrorflow.config.problems import ConfigError, Problem, error, warning


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


def decode(data: bytes) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return data.decode("iso-8859-1")


def parse_properties(text: str, source: str = "<text>") -> PropertiesFile:
    """Parse properties text; a syntax error raises ConfigError naming the line."""
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
    return PropertiesFile(source, dict(recorded), problems)


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
