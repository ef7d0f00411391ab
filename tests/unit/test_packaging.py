"""The package a user installs declares what its code imports: every third-party module that
include/mirrorflow and include/localkafka import comes from a dependency of pyproject.toml (or of
one of its extras), every base dependency is imported, every pin of requirements.txt (the lock the
suite runs on) lies inside the range the wheel carries, and the Airflow provider metadata has the
shape Airflow validates. The wheel itself is built and installed by tests/e2e/test_installed_wheel.py."""

from __future__ import annotations

import ast
import functools
import importlib
import json
import re
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

import airflow
import jsonschema
import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from mirrorflow.airflow.dag_file import NAME, TEXT
from mirrorflow.airflow.provider import get_provider_info

ROOT = Path(__file__).resolve().parents[2]
SOURCES = (ROOT / "include" / "mirrorflow", ROOT / "include" / "localkafka")
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
FIRST_PARTY = {"mirrorflow", "localkafka"}
# Where the installed providers live (airflow.providers is a namespace package).
PROVIDER_ROOTS = list(importlib.import_module("airflow.providers").__path__)


def requirements(extra: str | None = None) -> list[Requirement]:
    lines = PROJECT["dependencies"] if extra is None else PROJECT["optional-dependencies"][extra]
    return [Requirement(line) for line in lines]


def declared() -> dict[str, Requirement]:
    found = {canonicalize_name(r.name): r for r in requirements()}
    for extra in PROJECT["optional-dependencies"]:
        found.update({canonicalize_name(r.name): r for r in requirements(extra)})
    return found


def pins() -> dict[str, str]:
    text = (ROOT / "requirements.txt").read_text()
    return {
        canonicalize_name(name): version
        for name, version in re.findall(r"^([A-Za-z0-9_.-]+)==(\S+)$", text, re.M)
    }


@functools.cache
def imported_modules() -> dict[str, set[str]]:
    """Dotted names of the absolute imports in the package sources, each with the files it is in."""
    found: dict[str, set[str]] = {}
    for source in SOURCES:
        for path in source.rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                names = []
                if isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names = [node.module]
                for name in names:
                    found.setdefault(name, set()).add(str(path.relative_to(ROOT)))
    return found


@functools.cache
def owners_of_modules() -> dict[str, list[str]]:
    return packages_distributions()


@functools.cache
def distribution_of(module: str) -> str | None:
    """The distribution a third-party module comes from, None for the standard library and the
    package itself. Airflow's providers share the `airflow` namespace: a provider is the package
    under airflow.providers that has a get_provider_info module."""
    top = module.split(".")[0]
    if top in sys.stdlib_module_names or top in FIRST_PARTY or top == "__future__":
        return None
    parts = module.split(".")
    if parts[:2] == ["airflow", "providers"]:
        for depth in range(3, len(parts) + 1):
            folder = Path(*parts[2:depth])
            if any((Path(root) / folder / "get_provider_info.py").is_file() for root in PROVIDER_ROOTS):
                return canonicalize_name("apache-airflow-providers-" + "-".join(parts[2:depth]))
        raise AssertionError(f"{module}: no installed Airflow provider has it")
    if top == "airflow":
        return "apache-airflow"
    owners = owners_of_modules().get(top)
    assert owners, f"{module}: no installed distribution provides it"
    return canonicalize_name(owners[0])


def test_every_imported_third_party_module_is_declared() -> None:
    wanted = declared()
    missing = {
        module: sorted(files)
        for module, files in imported_modules().items()
        if (dist := distribution_of(module)) is not None and dist not in wanted
    }
    assert not missing, (
        "imported but not a dependency (add it to [project] dependencies, or to an extra when a "
        f"deployment may leave it out): {json.dumps(missing, indent=1)}"
    )


def test_every_base_dependency_is_imported() -> None:
    used = {dist for module in imported_modules() if (dist := distribution_of(module))}
    unused = {canonicalize_name(r.name) for r in requirements()} - used
    assert not unused, f"declared but never imported by include/: {sorted(unused)}"


def test_every_pin_lies_inside_its_range() -> None:
    pinned = pins()
    outside = {
        name: (str(req.specifier), pinned.get(name))
        for name, req in declared().items()
        if name not in pinned or not req.specifier.contains(pinned[name], prereleases=True)
    }
    assert not outside, f"range vs pin in requirements.txt: {outside}"


def test_ranges_are_ranges_not_pins() -> None:
    exact = [str(r) for r in declared().values() if any(s.operator in ("==", "===") for s in r.specifier)]
    assert not exact, f"pinned in pyproject.toml (pins belong in requirements.txt): {exact}"


def test_provider_info_has_the_shape_airflow_validates() -> None:
    schema = json.loads((Path(airflow.__file__).parent / "provider_info.schema.json").read_text())
    info = get_provider_info()
    jsonschema.validate(info, schema)
    assert info["package-name"] == PROJECT["name"]
    assert info["versions"] == [PROJECT["version"]]
    entry_points = PROJECT["entry-points"]
    assert entry_points["apache_airflow_provider"]["provider_info"] == (
        f"{get_provider_info.__module__}:{get_provider_info.__name__}"
    )
    (plugin,) = info["plugins"]
    assert entry_points["airflow.plugins"][plugin["name"]] == plugin["plugin-class"].replace(
        ".MirrorflowPlugin", ":MirrorflowPlugin"
    )


def import_string(dotted: str) -> object:
    module, _, name = dotted.rpartition(".")
    return getattr(importlib.import_module(module), name)


def test_provider_classes_import(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MIRRORFLOW_CONFIG", str(ROOT / "include" / "config" / "demo.properties"))
    info = get_provider_info()
    (connection,) = info["connection-types"]
    hook = import_string(connection["hook-class-name"])
    assert hook.conn_type == connection["connection-type"]
    assert hook.hook_name == connection["hook-name"]
    plugin = import_string(info["plugins"][0]["plugin-class"])
    assert plugin.name == info["plugins"][0]["name"]
    assert plugin.fastapi_apps[0]["url_prefix"] == "/mirrorflow"


def test_the_repository_dag_file_is_the_one_install_dags_writes() -> None:
    assert (ROOT / "dags" / NAME).read_text() == TEXT
