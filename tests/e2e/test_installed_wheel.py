"""mirrorflow installed as a user installs it: the sdist and wheel built as `make dist` builds them,
the wheel installed (not editable, not from the checkout) into a new virtualenv beside
apache-airflow==<pin> under a constraints file, then Airflow and the CLI of that virtualenv only:
the provider and its plugin are listed, the DAG file `mirrorflow install-dags` writes parses with
no import error, `mirrorflow --help` answers, and the heartbeat DAG runs with `airflow dags test`
against two real clusters.

The constraints are requirements.txt, the lock the suite runs on: Airflow's own constraints file
for 3.3.2 and Python 3.11 cannot be fetched here and is not vendored (docs/getting-started/install.md
gives the command that checks against it)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from mirrorflow.airflow.dag_file import NAME, TEXT
from mirrorflow.mm2.formats import Heartbeat

from ..integration.kafkatools import read_all
from .builds import Built, timed
from .test_maintenance_dags import CONFIG  # heartbeat runs a minute long: one heartbeat per pair

ROOT = Path(__file__).resolve().parents[2]
CONSTRAINTS = ROOT / "requirements.txt"
AIRFLOW_PIN = re.search(r"^apache-airflow==\S+$", CONSTRAINTS.read_text(), re.M).group(0)  # type: ignore[union-attr]

# One worker runs the whole module (tests/conftest.py, ONE_WORKER_MODULES), so the install is made
# once: spread over workers, each built its own (three installs of about 130 s in one suite run).
pytestmark = [pytest.mark.timeout(900)]


# What the installed package says about itself, asked with the virtualenv's own interpreter.
PROBE = """
import json, importlib.metadata as md
import mirrorflow
from mirrorflow.airflow import settings
from mirrorflow.airflow.operators import DRIVER_LOG4J2
files = [settings.COPY_APPLICATION, settings.VERIFY_APPLICATION, settings.WINDOW_APPLICATION, DRIVER_LOG4J2]
print(json.dumps({
    "package": mirrorflow.__file__,
    "missing": [str(f) for f in files if not f.is_file()],
    "direct_url": json.loads(md.distribution("mirrorflow").read_text("direct_url.json") or "{}"),
}))
"""


@dataclass
class Installed:
    venv: Path
    wheel: Path
    home: Path
    seconds: dict[str, float]

    def env(self, **extra: str) -> dict[str, str]:
        """Only this virtualenv on PATH and nothing of the checkout's: no PYTHONPATH, its own home."""
        return {
            "PATH": f"{self.venv / 'bin'}{os.pathsep}/usr/bin{os.pathsep}/bin",
            "HOME": os.environ.get("HOME", str(self.home)),
            "LANG": "C.UTF-8",
            "AIRFLOW_HOME": str(self.home),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__DAGS_FOLDER": str(self.home / "dags"),
            **extra,
        }

    def run(self, *cmd: str, timeout: float = 300, **env: str) -> subprocess.CompletedProcess[str]:
        """A command of the virtualenv, from a folder outside the checkout."""
        return subprocess.run(
            [str(self.venv / "bin" / cmd[0]), *cmd[1:]],
            env=self.env(**env),
            cwd=self.home,
            capture_output=True,
            text=True,
            timeout=timeout,
        )


@pytest.fixture(scope="module")
def installed(mirrorflow_wheel: Built, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installed]:
    work = tmp_path_factory.mktemp("installed-wheel")
    wheel, seconds = mirrorflow_wheel.wheel, dict(mirrorflow_wheel.seconds)
    venv, home = work / "venv", work / "home"
    timed(seconds, "venv", [sys.executable, "-m", "venv", str(venv)])
    timed(
        seconds,
        "install",
        [
            str(venv / "bin" / "pip"),
            "install",
            "-q",
            "--no-input",
            # Python compiles what it imports; compiling Airflow's whole tree up front is a third
            # of the install's CPU and checks nothing here.
            "--no-compile",
            str(wheel),
            AIRFLOW_PIN,
            "--constraint",
            str(CONSTRAINTS),
        ],
        cwd=work,
        timeout=600,
    )
    home.mkdir()
    print(f"wheel {wheel.name}: {wheel.stat().st_size:,} bytes; seconds {seconds}")
    yield Installed(venv, wheel, home, seconds)
    # The virtualenv is about 700 MB: not kept among pytest's last runs.
    shutil.rmtree(work, ignore_errors=True)


def test_the_wheel_carries_what_the_code_opens_at_run_time(installed: Installed) -> None:
    names = set(zipfile.ZipFile(installed.wheel).namelist())
    for needed in (
        "mirrorflow/spark/log4j2.properties",
        "mirrorflow/spark_apps/mirrorflow_copy.py",
        "mirrorflow/spark_apps/mirrorflow_verify.py",
        "mirrorflow/spark_apps/mirrorflow_window.py",
        "localkafka/log4j2.properties",
        "localkafka/log4j2-mm2.properties",
        "localkafka/log4j-reload4j.properties",
    ):
        assert needed in names, f"the wheel lacks {needed}"
    checked = installed.run("pip", "check")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    probe = installed.run("python", "-c", PROBE)
    assert probe.returncode == 0, probe.stderr
    found = json.loads(probe.stdout)
    assert found["package"].startswith(str(installed.venv)), found["package"]
    assert found["missing"] == []
    assert "archive_info" in found["direct_url"] and "dir_info" not in found["direct_url"], found[
        "direct_url"
    ]


def test_airflow_lists_the_provider_its_connection_type_and_plugin(installed: Installed) -> None:
    providers = installed.run("airflow", "providers", "list", "-o", "json")
    assert providers.returncode == 0, providers.stderr
    listed = {row["package_name"]: row["version"] for row in json.loads(providers.stdout)}
    assert listed.get("mirrorflow") == installed.wheel.name.split("-")[1]
    hooks = installed.run("airflow", "providers", "hooks", "-o", "json")
    (hook,) = [row for row in json.loads(hooks.stdout) if row["connection_type"] == "mirrorflow_kafka"]
    assert (hook["class"], hook["package_name"]) == (
        "mirrorflow.airflow.hooks.MirrorflowKafkaHook",
        "mirrorflow",
    )
    plugins = installed.run("airflow", "plugins", "-o", "json")
    assert plugins.returncode == 0, plugins.stderr
    (plugin,) = [row for row in json.loads(plugins.stdout) if row["name"] == "mirrorflow"]
    assert "EntryPoint(name='mirrorflow'" in plugin["source"]


def test_the_cli_answers(installed: Installed) -> None:
    helped = installed.run("mirrorflow", "--help")
    assert helped.returncode == 0, helped.stderr
    for command in ("replicate", "migrate", "verify", "failover", "install-dags", "validate"):
        assert re.search(rf"^\s+{command}\s", helped.stdout, re.M), helped.stdout


def test_the_dags_parse_from_the_installed_package(installed: Installed, tmp_path: Path) -> None:
    written = installed.run("mirrorflow", "install-dags", str(installed.home / "dags"))
    assert written.returncode == 0, written.stderr
    assert (installed.home / "dags" / NAME).read_text() == TEXT == (ROOT / "dags" / NAME).read_text()
    config = tmp_path / "mm2.properties"
    config.write_text(CONFIG.format(a="127.0.0.1:1", b="127.0.0.1:2", extra=""))
    migrated = installed.run("airflow", "db", "migrate")
    assert migrated.returncode == 0, migrated.stderr[-3000:]
    errors = installed.run(
        "airflow", "dags", "list-import-errors", "--local", "-o", "json", MIRRORFLOW_CONFIG=str(config)
    )
    assert errors.returncode == 0, errors.stderr[-3000:]
    assert json.loads(errors.stdout.strip().splitlines()[-1]) == []
    dags = installed.run(
        "airflow",
        "dags",
        "list",
        "--local",
        "-o",
        "json",
        "--columns",
        "dag_id",
        MIRRORFLOW_CONFIG=str(config),
    )
    assert dags.returncode == 0, dags.stderr[-3000:]
    ids = {row["dag_id"] for row in json.loads(dags.stdout.strip().splitlines()[-1])}
    assert {
        "mirrorflow__A__B__replicate",
        "mirrorflow__A__B__verify",
        "mirrorflow__A__B__refresh_topics",
        "mirrorflow_heartbeats",
        "mirrorflow_migrate",
        "mirrorflow_failover",
    } <= ids


def test_the_heartbeat_dag_runs_on_real_clusters(
    installed: Installed, kafka_clusters, tmp_path: Path
) -> None:
    a, b = kafka_clusters(2)
    config = tmp_path / "mm2.properties"
    config.write_text(CONFIG.format(a=a.bootstrap, b=b.bootstrap, extra=""))
    assert installed.run("mirrorflow", "install-dags", str(installed.home / "dags")).returncode == 0
    assert installed.run("airflow", "db", "migrate").returncode == 0
    ran = installed.run(
        "airflow", "dags", "test", "mirrorflow_heartbeats", timeout=600, MIRRORFLOW_CONFIG=str(config)
    )
    log = ran.stdout + ran.stderr
    assert ran.returncode == 0, log[-4000:]
    assert re.findall(r"DagRun Finished: dag_id=mirrorflow_heartbeats.*?state=(\w+)", log)[-1:] == [
        "success"
    ], log[-4000:]
    (beat,) = [Heartbeat.decode(r.key, r.value) for r in read_all(b.bootstrap, "heartbeats")]
    assert (beat.source_alias, beat.target_alias) == ("A", "B")
    (beat,) = [Heartbeat.decode(r.key, r.value) for r in read_all(a.bootstrap, "heartbeats")]
    assert (beat.source_alias, beat.target_alias) == ("B", "A")
