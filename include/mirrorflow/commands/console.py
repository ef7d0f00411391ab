"""The consoles every command prints through.

On a terminal, tables fit the window. Anywhere else (a pipe, a file, CI logs) nothing is wrapped:
a table row stays on one line and a key or value is never cut mid-word, so `grep` finds it; rich
writes no colour codes there either.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import click
from rich.console import Console

# Wide enough that no table of the CLI wraps; rich sizes a table by its content, not this width.
UNWRAPPED_WIDTH = 100_000


def make_console(*, stderr: bool = False) -> Console:
    """stdout's (or stderr's) console: fitted to a terminal, unwrapped when not a terminal."""
    console = Console(stderr=stderr, soft_wrap=True)
    if console.is_terminal:
        return console
    return Console(stderr=stderr, soft_wrap=True, width=UNWRAPPED_WIDTH)


OUTPUT_HELP = "json: one JSON object on stdout (logs and progress go to stderr), for scripts and CI."


def output_option(help_text: str = OUTPUT_HELP) -> Any:
    return click.option(
        "--output",
        type=click.Choice(["table", "json"]),
        default="table",
        show_default=True,
        help=help_text,
    )


def print_json(body: dict[str, Any]) -> None:
    """The one JSON object of a command's --output json: on stdout, keys sorted, nothing else there."""
    click.echo(json.dumps(body, indent=2, sort_keys=True, default=str))


def fail_json(command: str, message: str) -> None:
    """A command that failed before it had a result: {"ok": false, "error": ...} on stdout, exit 1."""
    print_json({"command": command, "ok": False, "error": message})
    sys.exit(1)
