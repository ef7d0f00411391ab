"""mirrorflow's wheel and the Spark executors' packed environment, built the way `make dist` and
`make executor-env` build them, once per test worker: tests/e2e/test_installed_wheel.py installs
the wheel, the standalone-cluster test of tests/e2e/test_replicate_dag.py ships the environment
(tests/e2e/conftest.py holds the session fixtures)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXECUTOR_ENV_NAME = "mirrorflow-executor-env.tar.gz"
# Nothing of the checkout's Python may reach an install: with the checkout on PYTHONPATH pip
# takes mirrorflow for installed already. pip's own settings (PIP_*, proxies) stay.
OUTSIDE_PYTHON = {"PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "PYTHONUSERBASE", "VIRTUAL_ENV"}


@dataclass
class Built:
    wheel: Path
    seconds: dict[str, float] = field(default_factory=dict)


def timed(seconds: dict[str, float], step: str, cmd: list[str], **kwargs) -> None:
    env = {key: value for key, value in os.environ.items() if key not in OUTSIDE_PYTHON}
    started = time.monotonic()
    subprocess.run(cmd, check=True, capture_output=True, text=True, env=env, **kwargs)
    seconds[step] = round(time.monotonic() - started, 1)


def build_wheel(dist: Path) -> Built:
    """The sdist and, from it, the wheel, as `make dist` makes them (nothing fetched)."""
    seconds: dict[str, float] = {}
    timed(
        seconds, "build", [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(dist), str(ROOT)]
    )
    (wheel,) = dist.glob("mirrorflow-*.whl")
    return Built(wheel, seconds)


def build_executor_env(built: Built, output: Path) -> Path:
    """`make executor-env`'s archive from `built`'s wheel (pip fetches its few packages under
    requirements.txt, as the installed-wheel test's install does)."""
    script = ROOT / "scripts" / "build_executor_env.py"
    timed(
        built.seconds,
        "executor-env",
        [sys.executable, str(script), str(built.wheel), "--output", str(output)],
        timeout=300,
    )
    return output
