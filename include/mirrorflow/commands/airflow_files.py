"""`mirrorflow install-dags DAGS_FOLDER`: the DAG file into an Airflow deployment's dags folder."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from mirrorflow.airflow.dag_file import DagFileConflict, write_dag_file


@click.command(name="install-dags")
@click.argument("dags_folder", metavar="DAGS_FOLDER", type=click.Path(file_okay=False, path_type=Path))
@click.option("--replace", is_flag=True, help="Overwrite a different file of the same name.")
def install_dags_command(dags_folder: Path, replace: bool) -> None:
    """Write mirrorflow's DAG file (mirrorflow_dags.py) into an Airflow dags folder
    (`[core] dags_folder`, e.g. $AIRFLOW_HOME/dags). The file builds every mirrorflow DAG from
    the installed package and the MM2 properties file named by MIRRORFLOW_CONFIG, which the
    dag-processor, scheduler and workers need in their environment. Exits 1 when the folder holds
    a different file of that name (a deployment's own edit) unless --replace is given."""
    try:
        written = write_dag_file(dags_folder, replace=replace)
    except (DagFileConflict, OSError) as exc:
        click.echo(f"mirrorflow install-dags: {exc}", err=True)
        sys.exit(1)
    state = "wrote" if written.changed else "already up to date:"
    click.echo(f"{state} {written.path}")
    click.echo(
        "Set MIRRORFLOW_CONFIG to your MM2 properties file for the dag-processor, scheduler and workers."
    )


COMMANDS = [install_dags_command]
