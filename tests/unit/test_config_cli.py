"""`mirrorflow validate CONFIG`: problems with their fixes, a summary, and the exit code."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from mirrorflow.cli import main

GOOD = """
clusters = primary, backup
primary.bootstrap.servers = p:9092
backup.bootstrap.servers = b:9092
primary->backup.enabled = true
primary->backup.topics = orders.*
emit.checkpoints.interval = 30
"""
BAD = """
clusters = primary, backup
primary.bootstrap.servers = p:9092
primary->backup.enabled = true
primary->staging.enabled = true
emit.checkpoints.interval.seconds = 1m
"""


def _run(tmp_path: Path, text: str) -> tuple[int, str]:
    path = tmp_path / "mm2.properties"
    path.write_text(text)
    result = CliRunner().invoke(main, ["validate", str(path)], env={"COLUMNS": "250"})
    return result.exit_code, result.output


def test_valid_config_with_a_warning_exits_zero(tmp_path: Path) -> None:
    code, output = _run(tmp_path, GOOD)
    assert code == 0
    assert "emit.checkpoints.interval" in output
    assert "warning" in output
    assert "did you mean emit.checkpoints.interval.seconds?" in output
    assert "primary->backup" in output and "backup->primary" in output
    assert "orders.*" in output
    assert "p:9092" in output
    assert "0 error(s), 1 warning(s)" in output


def test_errors_exit_one_and_show_fixes(tmp_path: Path) -> None:
    code, output = _run(tmp_path, BAD)
    assert code == 1
    for text in (
        "backup.bootstrap.servers",
        "primary->staging.enabled",
        "not listed in clusters: staging",
        "emit.checkpoints.interval.seconds",
        "write 60",
        "error",
        "3 error(s)",
    ):
        assert text in output, text


def test_unreadable_file_is_an_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        main, ["validate", str(tmp_path / "missing.properties")], env={"COLUMNS": "250"}
    )
    assert result.exit_code == 1
    assert "cannot read the config file" in result.output


def test_secrets_are_not_printed(tmp_path: Path) -> None:
    text = GOOD + (
        "config.providers = env\n"
        "config.providers.env.class = org.apache.kafka.common.config.provider.EnvVarConfigProvider\n"
        "backup.bootstrap.servers = ${env:HIDDEN_HOST}\n"
        "backup.sasl.jaas.config = org.apache.kafka.common.security.plain.PlainLoginModule required "
        'username="u" password="pw-123456";\n'
    )
    path = tmp_path / "mm2.properties"
    path.write_text(text)
    result = CliRunner().invoke(
        main, ["validate", str(path)], env={"HIDDEN_HOST": "hidden.example:9092", "COLUMNS": "250"}
    )
    assert result.exit_code == 0
    assert "${env:HIDDEN_HOST}" in result.output
    assert "hidden.example" not in result.output
    assert "pw-123456" not in result.output


def test_connect_waits_for_a_config_without_errors(tmp_path: Path) -> None:
    path = tmp_path / "mm2.properties"
    path.write_text(BAD)
    result = CliRunner().invoke(main, ["validate", "--connect", str(path)], env={"COLUMNS": "250"})
    assert result.exit_code == 1
    assert "--connect skipped: fix the errors first" in result.output
    assert "3 error(s)" in result.output


def test_flows_show_their_mode_and_a_micro_batch_flow_its_interval_and_window(tmp_path: Path) -> None:
    code, output = _run(
        tmp_path,
        GOOD
        + "backup->primary.enabled = true\n"
        + "backup->primary.mirrorflow.replicate.mode = micro-batch\n"
        + "backup->primary.mirrorflow.microbatch.interval.ms = 2000\n"
        + "backup->primary.mirrorflow.microbatch.window.seconds = 600\n",
    )
    assert code == 0, output
    [header] = [line for line in output.splitlines() if line.startswith("┃ flow ")]
    assert "┃ mode " in header
    [batch] = [line for line in output.splitlines() if line.startswith("│ primary->backup ")]
    [micro] = [line for line in output.splitlines() if line.startswith("│ backup->primary ")]
    assert "│ batch " in batch and "*/5 * * * *" in batch
    assert "│ micro-batch " in micro and "every 2,000 ms, in windows of 600 s" in micro
    assert "*/5" not in micro
