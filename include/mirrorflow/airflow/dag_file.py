"""The DAG file an Airflow deployment keeps in its dags folder: two lines that build every
mirrorflow DAG from the installed package (mirrorflow.airflow.dags). The repository's
dags/mirrorflow_dags.py is this text; `mirrorflow install-dags` writes it into any dags folder,
so a deployment that installs the wheel gets the same file without a checkout.

Nothing here imports Airflow: the command runs wherever the package is installed."""

from __future__ import annotations

import dataclasses
from pathlib import Path

NAME = "mirrorflow_dags.py"
TEXT = '''"""Airflow DAG file: every mirrorflow DAG (replicate per enabled flow, migrate, ...) from the
MM2 properties file named by MIRRORFLOW_CONFIG. See mirrorflow.airflow.dags."""

from mirrorflow.airflow.dags import build_dags

globals().update(build_dags())
'''


class DagFileConflict(RuntimeError):
    """The dags folder already holds another file under the DAG file's name."""


@dataclasses.dataclass(frozen=True)
class Written:
    path: Path
    changed: bool  # False: the folder already held this very file


def write_dag_file(dags_folder: Path, *, replace: bool = False) -> Written:
    """Write the DAG file into `dags_folder` (made when missing). A different file under the same
    name is kept unless `replace`: it may be a deployment's own edit."""
    path = dags_folder / NAME
    if path.is_file():
        if path.read_text() == TEXT:
            return Written(path, changed=False)
        if not replace:
            raise DagFileConflict(
                f"{path} exists and differs from mirrorflow's DAG file: keep it, or give --replace to "
                "overwrite it"
            )
    dags_folder.mkdir(parents=True, exist_ok=True)
    path.write_text(TEXT)
    return Written(path, changed=True)
