"""MkDocs hook: the references that must not drift from the code are made from the code's data.

A page writes a marker such as `<!-- mirrorflow:mm2-keys -->` on a line of its own; at build time
the marker becomes the table the code's own data gives (the key specs mirrorflow parses with, the
Java-to-librdkafka mapping it translates with, the ACL grants its jobs check, the click commands
of `mirrorflow` with the help they print, the dependencies and extras the wheel declares). An
unknown marker fails the build, so a renamed generator cannot leave a page silently empty.
"""

from __future__ import annotations

import html
import inspect
import re
import tomllib
from collections.abc import Callable, Iterable

import click
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from mirrorflow.airflow.settings import PROJECT_ROOT
from mirrorflow.cli import main
from mirrorflow.config import load_config, mapping_markdown, mirrorflow_keys_markdown
from mirrorflow.config.key_kinds import (
    CONNECTOR_CONFIG_NAMES,
    LIBRDKAFKA_SECURITY_KEYS,
    SASL_CLIENT_KEYS,
    SSL_CLIENT_KEYS,
    WORKER_KEYS,
)
from mirrorflow.config.keys import CONNECTOR_KEYS, DEPRECATED_ALIASES, FILE_KEYS, OFFSET_STORAGE_KEYS, KeySpec
from mirrorflow.ops.acl_words import markdown_table

MARKER = re.compile(r"^<!-- mirrorflow:([a-z0-9-]+) -->$", re.M)

# Where a key may be written, by the part of MM2's configuration it belongs to.
_WHERE = {
    "worker": "top level, or `<target>.` for one target cluster",
    "cluster": "`<alias>.` for one cluster",
    "mirrormaker": "top level",
}


def _default(value: object) -> str:
    if value is None:
        return "(none)"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, tuple):
        return ", ".join(f"`{item}`" for item in value) if value else "(empty)"
    return f"`{value}`"


def _cell(text: str) -> str:
    """A table cell: a `|` inside the text would end the cell."""
    return text.replace("|", "\\|")


def _type(spec: KeySpec) -> str:
    if spec.choices:
        return " or ".join(f"`{choice}`" for choice in spec.choices)
    if spec.unit:
        return f"{spec.type} ({spec.unit})"
    if spec.minimum is not None:
        return f"{spec.type} >= {spec.minimum}"
    return spec.type


def _where(spec: KeySpec) -> str:
    if spec.connector in _WHERE:
        return _WHERE[spec.connector]
    # MirrorMakerConfig keeps only connector config names from the top level; the rest work per flow.
    return "top level or flow" if spec.name in CONNECTOR_CONFIG_NAMES else "flow only (`<source>-><target>.`)"


def keys_table(specs: Iterable[KeySpec], *, connector: bool = True) -> str:
    head = ["key", "where", "type", "default", "meaning"]
    if connector:
        head.insert(2, "connector")
    rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for spec in specs:
        cells = [
            f"`{spec.name}`",
            _where(spec),
            _cell(_type(spec)),
            _cell(_default(spec.default)),
            _cell(spec.doc),
        ]
        if connector:
            cells.insert(2, spec.connector)
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows) + "\n"


def deprecated_table() -> str:
    rows = ["| Kafka 3.x name | honoured as |", "|---|---|"]
    rows += [f"| `{old}` | `{new}` |" for old, new in sorted(DEPRECATED_ALIASES.items())]
    return "\n".join(rows) + "\n"


def _names(keys: Iterable[str]) -> str:
    return ", ".join(f"`{key}`" for key in sorted(keys))


def security_keys() -> str:
    return (
        f"- Java TLS keys: {_names(SSL_CLIENT_KEYS)}\n"
        f"- Java SASL keys: {_names(SASL_CLIENT_KEYS)}\n"
        f"- librdkafka's own credential keys (MM2 ignores them): {_names(LIBRDKAFKA_SECURITY_KEYS)}\n"
    )


def worker_keys() -> str:
    return _names(WORKER_KEYS) + "\n"


def acl_table() -> str:
    """The least-privilege table for the flow A->B the page describes (default policy, offset-syncs
    on the source); `mirrorflow.ops.acl_words.markdown_table(flow)` gives it for any flow."""
    config = load_config(
        "clusters = A, B\nA.bootstrap.servers = a:1\nB.bootstrap.servers = b:1\nA->B.enabled = true\n"
    )
    return markdown_table(config.flow("A", "B")) + "\n"


def cli_reference() -> str:
    """Each command as `mirrorflow COMMAND --help` shows it: click's own usage line and help records
    (mkdocs-click 0.9 prints click 8.3's unset defaults as `Sentinel.UNSET`, so it is not used)."""
    root = click.Context(main, info_name="mirrorflow")
    parts = [
        f"```\n{main.get_usage(root)}\n```\n",
        "Options of `mirrorflow` itself, given before the command (`mirrorflow --log-level INFO "
        "replicate ...`):\n",
        _option_rows(main, root),
    ]
    for name in sorted(main.commands):
        command = main.commands[name]
        if command.hidden:
            continue
        ctx = click.Context(command, info_name=name, parent=root)
        parts += [
            f"### mirrorflow {name}\n",
            inspect.cleandoc(command.help or "") + "\n",
            f"```\n{command.get_usage(ctx)}\n```\n",
            _option_rows(command, ctx),
        ]
    return "\n".join(parts)


def _option_rows(command: click.Command, ctx: click.Context) -> str:
    rows = ["| option | meaning |", "|---|---|"]
    for param in command.get_params(ctx):
        record = param.get_help_record(ctx)
        if record:
            rows.append(f"| `{_cell(record[0])}` | {_cell(record[1])} |")
    return "\n".join(rows) + "\n"


def dependencies_table() -> str:
    """What the wheel declares (pyproject.toml: the base dependencies, then each extra's) with the
    range it accepts and the version the suite runs (requirements.txt's pin)."""
    project = tomllib.loads((PROJECT_ROOT / "pyproject.toml").read_text())["project"]
    pins = {
        canonicalize_name(name): version
        for name, version in re.findall(
            r"^([A-Za-z0-9_.-]+)==(\S+)$", (PROJECT_ROOT / "requirements.txt").read_text(), re.M
        )
    }
    groups = [("`mirrorflow`", project["dependencies"])] + [
        (f"`mirrorflow[{extra}]`", lines) for extra, lines in project["optional-dependencies"].items()
    ]
    rows = ["| installed with | package | range in the wheel | the suite runs |", "|---|---|---|---|"]
    for label, lines in groups:
        for line in lines:
            name = Requirement(line).name
            wanted = line[len(name) :].strip()
            rows.append(f"| {label} | `{name}` | `{wanted}` | {pins.get(canonicalize_name(name), '-')} |")
    return "\n".join(rows) + "\n"


GENERATORS: dict[str, Callable[[], str]] = {
    "cli": cli_reference,
    "dependencies": dependencies_table,
    "mm2-keys": lambda: keys_table(CONNECTOR_KEYS),
    "offset-storage-keys": lambda: keys_table(OFFSET_STORAGE_KEYS),
    "file-keys": lambda: keys_table(FILE_KEYS, connector=False),
    "deprecated-keys": deprecated_table,
    "security-keys": security_keys,
    "worker-keys": worker_keys,
    "mirrorflow-keys": mirrorflow_keys_markdown,
    "client-mapping": mapping_markdown,
    "acls": acl_table,
}


CODE_SPAN = re.compile(r"`([^`]+)`")


def _breakable(table: str) -> str:
    """Code spans in table rows as <code> with a line-break opportunity after each dot, so a long
    key (replication.policy.internal.topic.separator.enabled) wraps between its words, never
    inside one, and still copies as written."""

    def code(match: re.Match[str]) -> str:
        text = html.escape(match.group(1).replace("\\|", "|"), quote=False)
        # Inside inline HTML Markdown still reads emphasis and escapes: keep these characters literal.
        for char in "\\`*_[]|":
            text = text.replace(char, f"&#{ord(char)};")
        return "<code>" + text.replace(".", ".<wbr>") + "</code>"

    return "\n".join(
        CODE_SPAN.sub(code, line) if line.startswith("|") else line for line in table.splitlines()
    )


class UnknownMarker(ValueError):
    pass


def expand(markdown: str) -> str:
    """`markdown` with every marker replaced by its generated table."""

    def generate(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in GENERATORS:
            raise UnknownMarker(
                f"unknown reference marker <!-- mirrorflow:{name} -->; known: {', '.join(GENERATORS)}"
            )
        return _breakable(GENERATORS[name]().rstrip("\n"))

    expanded = MARKER.sub(generate, markdown)
    if "<!-- mirrorflow:" in expanded:
        raise UnknownMarker("a <!-- mirrorflow:... --> marker must stand alone on its line to be expanded")
    return expanded


def on_page_markdown(markdown: str, **_: object) -> str:
    from mkdocs.exceptions import PluginError

    try:
        return expand(markdown)
    except UnknownMarker as exc:
        raise PluginError(str(exc)) from exc
