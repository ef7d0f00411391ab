"""`mirrorflow install-dags`: the DAG file goes into a dags folder once, is left alone when it is
already there, and a different file of the same name (a deployment's own edit) is kept unless
--replace is given."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from mirrorflow.airflow.dag_file import NAME, TEXT
from mirrorflow.cli import main


def install(folder: Path, *args: str):
    return CliRunner().invoke(main, ["install-dags", str(folder), *args])


def test_writes_the_dag_file_into_a_new_folder_then_leaves_it(tmp_path: Path) -> None:
    folder = tmp_path / "airflow" / "dags"
    first = install(folder)
    assert first.exit_code == 0, first.output
    assert (folder / NAME).read_text() == TEXT
    assert f"wrote {folder / NAME}" in first.output
    again = install(folder)
    assert again.exit_code == 0
    assert f"already up to date: {folder / NAME}" in again.output


def test_keeps_a_different_file_unless_replace(tmp_path: Path) -> None:
    own = tmp_path / NAME
    own.write_text("# a deployment's own DAG file\n")
    refused = install(tmp_path)
    assert refused.exit_code == 1
    assert "differs from mirrorflow's DAG file" in refused.output
    assert own.read_text() == "# a deployment's own DAG file\n"
    replaced = install(tmp_path, "--replace")
    assert replaced.exit_code == 0, replaced.output
    assert own.read_text() == TEXT
