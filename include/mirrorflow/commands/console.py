"""The consoles every command prints through.

On a terminal, tables fit the window. Anywhere else (a pipe, a file, CI logs) nothing is wrapped:
a table row stays on one line and a key or value is never cut mid-word, so `grep` finds it; rich
writes no colour codes there either.
"""

from __future__ import annotations

from rich.console import Console

# Wide enough that no table of the CLI wraps; rich sizes a table by its content, not this width.
UNWRAPPED_WIDTH = 100_000


def make_console(*, stderr: bool = False) -> Console:
    """stdout's (or stderr's) console: fitted to a terminal, unwrapped when not a terminal."""
    console = Console(stderr=stderr, soft_wrap=True)
    if console.is_terminal:
        return console
    return Console(stderr=stderr, soft_wrap=True, width=UNWRAPPED_WIDTH)
