"""The executors' packed environment (scripts/build_executor_env.py, `make executor-env`) holds
what the code that runs on executors imports, at requirements.txt's versions, and each Spark task
says which Python and which mirrorflow it runs. The archive itself is built and shipped to a
Spark standalone cluster by tests/e2e/test_replicate_dag.py."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

import mirrorflow

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location(
    "build_executor_env", ROOT / "scripts" / "build_executor_env.py"
)
builder = importlib.util.module_from_spec(_spec)  # type: ignore[arg-type]
_spec.loader.exec_module(builder)  # type: ignore[union-attr]

# The distributions of the third-party modules a fresh interpreter has loaded after importing
# what runs on executors (pyspark and py4j come from the cluster's Spark, not the environment).
IMPORTED = """
import json, sys
from importlib.metadata import packages_distributions
before = set(sys.modules)
for module in sys.argv[1:]:
    __import__(module)
owners = packages_distributions()
tops = {name.split(".")[0] for name in set(sys.modules) - before}
print(json.dumps(sorted({d for top in tops for d in owners.get(top, []) if d != "mirrorflow"})))
"""


def with_dependencies(names: tuple[str, ...]) -> set[str]:
    """`names` and what they require, transitively, as installed here."""
    found: set[str] = set()
    todo = [canonicalize_name(name) for name in names]
    while todo:
        name = todo.pop()
        if name in found:
            continue
        found.add(name)
        for line in metadata.requires(name) or []:
            requirement = Requirement(line)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                todo.append(canonicalize_name(requirement.name))
    return found


def test_the_environment_holds_what_executors_import_and_nothing_of_airflow() -> None:
    done = subprocess.run(
        [sys.executable, "-c", IMPORTED, *builder.EXECUTOR_MODULES],
        capture_output=True,
        text=True,
        check=True,
    )
    imported = {canonicalize_name(name) for name in json.loads(done.stdout)} - {"pyspark", "py4j"}
    packed = with_dependencies(builder.EXECUTOR_PACKAGES)
    assert imported <= packed, f"executors import {sorted(imported - packed)}: add them to EXECUTOR_PACKAGES"
    # Each listed package is imported by that code (directly or through another's dependency).
    assert {canonicalize_name(name) for name in builder.EXECUTOR_PACKAGES} <= imported
    assert not {name for name in packed if "airflow" in name or name == "pyspark"}, packed


def test_the_versions_are_requirements_txt_pins() -> None:
    pinned = dict(line.split("==") for line in builder.pinned())
    assert list(pinned) == list(builder.EXECUTOR_PACKAGES)
    text = (ROOT / "requirements.txt").read_text()
    for name, version in pinned.items():
        assert re.search(rf"^{re.escape(name)}=={re.escape(version)}$", text, re.M | re.I), name
        assert metadata.version(name) == version


def test_a_process_outside_spark_says_its_python_and_mirrorflow_once_at_info() -> None:
    # Python logging left unset, as on a copy job's executors: the line still reaches stderr.
    done = subprocess.run(
        [sys.executable, "-c", "from mirrorflow.spark.executor import log_python; log_python()"],
        capture_output=True,
        text=True,
        check=True,
    )
    (line,) = done.stderr.splitlines()
    assert re.fullmatch(
        rf"\S+ \S+ INFO mirrorflow\.spark\.executor: a process outside Spark runs Python 3\.\d+\.\d+ at "
        rf"{re.escape(sys.executable)} with mirrorflow {re.escape(metadata.version('mirrorflow'))} "
        rf"from {re.escape(str(Path(mirrorflow.__file__).parent))}",
        line,
    ), line
