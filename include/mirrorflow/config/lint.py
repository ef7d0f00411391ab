"""Findings for configs copied from blog posts and other tools' docs.

A regex copied from Java source or a regex tester (`topics = trickle\\..*`) loses its backslashes:
Java's Properties reads `\\.` as `.`, so MM2 matches `trickle` then any character. mirrorflow
reads it as MM2 does and says what it became and how to keep the backslash (`\\\\.`).

Java's Properties has no quoting and no end-of-line comments: `topics = ".*" # all topics` is the
value `".*" # all topics`, a regex that matches no topic name. MM2 splits list values on commas
and joins the items as regexes with `|`, so a glob such as `*.internal` is an invalid regex in
Java (and `orders-*` a valid one that matches `orders-` and `orders--`, not `orders-eu`). Each
finding names the key, the line, what Java reads and what to write instead.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from mirrorflow.config.problems import Problem, warning
from mirrorflow.config.secrets import is_secret_key
from mirrorflow.config.values import parse_list

# List keys whose items are regexes (MM2 4.x names, their 3.x aliases, MM1's names).
REGEX_KEYS = frozenset(
    {
        "topics",
        "topics.exclude",
        "groups",
        "groups.exclude",
        "config.properties.exclude",
        "topics.blacklist",
        "groups.blacklist",
        "config.properties.blacklist",
    }
)
_FLOW_PREFIX = re.compile(r"^[^.]*->[^.]*\.")
_TRAILING_COMMENT = re.compile(r"\s+[#!]")
_QUOTES = ('"', "'")
# A backslash and what it escapes, as Java's Properties reads a value. Of these it keeps a meaning
# for \\, \t, \n, \r, \f and \uXXXX; before any other character the backslash is dropped.
_ESCAPE = re.compile(r"\\(u[0-9a-fA-F]{4}|.)", re.S)
_READ_ESCAPES = "\\tnrfu"


def setting_name(key: str) -> str:
    """`topics` for `topics` and for `A->B.topics`."""
    return _FLOW_PREFIX.sub("", key, count=1)


def glob_to_regex(item: str) -> str:
    """The regex a shell-style glob means: `*.internal` -> `.*\\.internal`."""
    out = []
    for char in item:
        if char == "*":
            out.append(".*")
        elif char == "?":
            out.append(".")
        elif char == ".":
            out.append("\\.")
        else:
            out.append(char)
    return "".join(out)


def glob_hint(item: str) -> str | None:
    """Why `item` reads as a shell glob rather than the regex MM2 takes, or None."""
    if item.startswith(("*", "?")):
        return (
            f"{item!r} is a glob, not a regex: MM2 treats each comma-separated item as a Java regex "
            f"and a leading {item[0]} has nothing to repeat (Java: Dangling meta character); "
            f"write {glob_to_regex(item)}"
        )
    if len(item) > 1 and item.endswith("*") and item[-2] not in ".)]}\\":
        stem = item[:-2]
        return (
            f"{item!r} reads as a glob but is a regex: {item[-2]}* repeats only {item[-2]!r}, so it matches "
            f"{stem + item[-2]!r}, {stem!r}, {stem + item[-2] * 2!r}, ... and not names that merely start with "
            f"{item[:-1]!r}; write {glob_to_regex(item)}"
        )
    return None


def _unquoted(value: str) -> str | None:
    text = value.strip()
    if len(text) >= 2 and text[0] in _QUOTES and text[-1] == text[0]:
        return text[1:-1]
    return None


def lint_values(values: Mapping[str, str], lines: Mapping[str, int], source: str) -> list[Problem]:
    problems = []
    for key, value in values.items():
        where = f"line {lines[key]}: " if key in lines else ""
        problems += _lint(key, value, where, source)
    return problems


def _lint(key: str, value: str, where: str, source: str) -> list[Problem]:
    secret = is_secret_key(key)
    shown = "(secret value not shown)" if secret else repr(value)
    intended = value
    notes = []
    comment = None if secret else _TRAILING_COMMENT.search(value)
    if comment is not None:
        intended = value[: comment.start()]
        notes.append(
            f"Java's Properties has no end-of-line comments, so {value[comment.start() :].strip()!r} is part of "
            "the value"
        )
    name = setting_name(key)
    is_list = name in REGEX_KEYS
    whole = _unquoted(intended)
    items = parse_list(intended if whole is None else whole) if is_list else [intended]
    unquoted = [_unquoted(item) for item in items]
    if whole is not None or any(u is not None for u in unquoted):
        items = [item.strip() if u is None else u for item, u in zip(items, unquoted, strict=True)]
        intended = ", ".join(items) if is_list else (whole if whole is not None else intended)
        notes.append("quotes are part of the value in Java's Properties (nothing strips them)")
    if not notes:
        return lint_patterns(key, value, where) if is_list else []
    consequence = "; as regexes, its items do not select the names they seem to" if is_list else ""
    globs = [hint.split("; write ")[0] for item in items if is_list and (hint := glob_hint(item))]
    if globs:
        intended = ", ".join(glob_to_regex(item) if glob_hint(item) else item for item in items)
    fix = "write the value without the quotes" if secret else f"write {key} = {intended.strip()}"
    if comment is not None:
        fix += " and put the comment on a line of its own starting with #"
    if globs:
        fix += " (" + "; ".join(globs) + ")"
    return [warning(key, f"{where}{'; '.join(notes)}: MM2 reads {key} = {shown}{consequence}", fix)]


def lint_dropped_escapes(
    values: Mapping[str, str], raw: Mapping[str, str], lines: Mapping[str, int]
) -> list[Problem]:
    """A regex written as in Java source or a regex tester (`trickle\\..*`): Java's Properties
    reads `\\.` as `.`, so MM2 matches `trickle` followed by any character. Parsed as MM2 parses
    it; only said, with the value it became and the line that keeps the backslash."""
    problems = []
    for key, written in raw.items():
        if setting_name(key) not in REGEX_KEYS or key not in values:
            continue
        dropped = [m.group(0) for m in _ESCAPE.finditer(written) if m.group(1)[0] not in _READ_ESCAPES]
        if not dropped:
            continue
        kept = _ESCAPE.sub(
            lambda m: m.group(0) if m.group(1)[0] in _READ_ESCAPES else "\\" + m.group(0), written
        )
        where = f"line {lines[key]}: " if key in lines else ""
        problems.append(
            warning(
                key,
                f"{where}Java's Properties drops a backslash before a character it does not escape "
                f"({', '.join(dict.fromkeys(dropped))}), so the regex written {written} reaches MM2 as "
                f"{key} = {values[key]}",
                f"write {key} = {kept} (a regex's backslash is \\\\ in a properties file: \\\\. for a literal dot)",
            )
        )
    return problems


def lint_patterns(key: str, value: str, where: str) -> list[Problem]:
    """Items of a regex list that are valid regexes but read like globs (a warning each)."""
    return [
        warning(key, f"{where}{hint.split('; write ')[0]}", f"write {glob_to_regex(item)} in {key}")
        for item in parse_list(value)
        if _unquoted(item) is None
        and (hint := glob_hint(item)) is not None
        and not item.startswith(("*", "?"))
    ]
