"""CLI output in pipes and CI (issue 10): tables are never wrapped mid-word when stdout is not a
terminal (a wrapped key cannot be grepped), markup-like text from a config file prints as
written, and `--output json` is one JSON object with stable keys."""

from __future__ import annotations

import io
import json
from pathlib import Path

from click.testing import CliRunner
from rich.table import Table

from mirrorflow.cli import main
from mirrorflow.commands.console import UNWRAPPED_WIDTH, make_console

LONG_KEY = "some.rather.long.unknown.setting.name.that.would.wrap.in.a.narrow.terminal"
CONFIG = (
    "clusters = A, B\nA.bootstrap.servers = a:9092\nB.bootstrap.servers = b:9092\nA->B.enabled = true\n"
    f"{LONG_KEY} = 1\nemit.checkpoints.interval = 1m\ncolor[red]name = 1\n"
)


def _config(tmp_path: Path) -> Path:
    path = tmp_path / "mm2.properties"
    path.write_text(CONFIG)
    return path


def test_a_console_that_is_not_a_terminal_never_wraps() -> None:
    console = make_console()  # pytest captures stdout: not a terminal
    assert not console.is_terminal and console.width == UNWRAPPED_WIDTH
    table = Table()
    table.add_column("key")
    table.add_column("value")
    table.add_row("k" * 300, "v" * 300)
    console.file = io.StringIO()
    console.print(table)
    [row] = [line for line in console.file.getvalue().splitlines() if "k" * 300 in line]
    assert "v" * 300 in row


def test_validate_rows_stay_on_one_line_in_a_pipe(tmp_path: Path) -> None:
    # COLUMNS as narrow as a CI log viewer's: before, keys were cut every ~20 characters.
    result = CliRunner().invoke(main, ["validate", str(_config(tmp_path))], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    [row] = [line for line in lines if "emit.checkpoints.interval " in line]
    assert "use emit.checkpoints.interval.seconds = 60" in row
    [unknown] = [line for line in lines if LONG_KEY in line]
    assert "unknown key; MM2 ignores it" in unknown
    [flow] = [line for line in lines if line.startswith("│ A->B ")]
    assert "DefaultReplicationPolicy" in flow and "exactly-once" in flow
    # "[bold]" read from the file is shown as written, not taken as rich markup
    assert any("color[red]name" in line for line in lines), result.output
    assert "\x1b" not in result.output


def test_validate_json_has_stable_keys(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["validate", str(_config(tmp_path)), "--output", "json"])
    body = json.loads(result.output)
    assert set(body) == {
        "command",
        "ok",
        "config",
        "errors",
        "warnings",
        "notes",
        "connected",
        "clusters",
        "problems",
    }
    assert body["clusters"] == []  # cluster versions are read with --connect only
    assert body["command"] == "validate" and body["ok"] is True and body["errors"] == 0
    assert all(set(p) == {"key", "severity", "problem", "fix"} for p in body["problems"])


def test_json_failure_before_a_result_is_one_object(tmp_path: Path) -> None:
    path = _config(tmp_path)
    result = CliRunner().invoke(main, ["replicate", str(path), "--flow", "A->C", "--output", "json"])
    assert result.exit_code == 1
    body = json.loads(result.stdout)
    assert body["command"] == "replicate" and body["ok"] is False
    assert "'C' is not a cluster" in body["error"]
