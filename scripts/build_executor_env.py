"""The Python environment Spark executors run mirrorflow's jobs in, packed into one archive
(`make executor-env`): a new virtualenv with the mirrorflow wheel (without its dependencies) and
only what the code that runs on executors imports, at the versions requirements.txt pins, packed
with venv-pack. Ship it with the job (docs/operations/scaling-out.md):

    spark.archives        = mirrorflow-executor-env.tar.gz#environment
    spark.pyspark.python  = ./environment/bin/python

    python scripts/build_executor_env.py build/dist/mirrorflow-0.1.0-py3-none-any.whl \\
        --output build/dist/mirrorflow-executor-env.tar.gz [--python /usr/bin/python3.11]

venv-pack packs the libraries, not Python itself: the archive's bin/python is a link to the
interpreter the virtualenv was made with (--python), and every executor needs that Python at that
path. (venv-pack's own --python-prefix, which would relink it, writes `/usr/bin/python3.113.11`
for a Python 3.10+ venv in venv-pack 0.2.0, so it is not offered.) pyspark is not in it either:
executors take pyspark from the cluster's Spark (its python/lib/pyspark.zip), at its version.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REQUIREMENTS = ROOT / "requirements.txt"

# What the executors' side of the copy, window and verify jobs imports (the task closures unpickle
# mirrorflow.replicate, .ops.verification, .config and .spark.executor), and nothing of Airflow:
# confluent-kafka for every Kafka call (with librdkafka's native library in its wheel);
# jproperties, cryptography and croniter because mirrorflow.config imports them (the properties
# parser, key stores read into PEM, the schedule keys' cron check), though only the driver
# parses files, reads stores and checks schedules. Their own dependencies come with them,
# pinned by requirements.txt as constraints. tests/unit/test_executor_env.py checks this list
# against what those modules import.
EXECUTOR_PACKAGES = ("confluent-kafka", "jproperties", "cryptography", "croniter")
# Imported in the new environment before it is packed: a package missing from the list fails here.
EXECUTOR_MODULES = (
    "confluent_kafka",
    "mirrorflow.spark.executor",
    "mirrorflow.spark.copy_job",
    "mirrorflow.replicate.copy",
    "mirrorflow.replicate.window.task",
    "mirrorflow.ops.verification.run",
)
# Nothing of the calling Python's may reach pip or the new interpreter: with a checkout on
# PYTHONPATH pip takes mirrorflow for installed already. pip's own settings (PIP_*) stay.
OUTSIDE_PYTHON = {"PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "PYTHONUSERBASE", "VIRTUAL_ENV"}


def pins(requirements: Path = REQUIREMENTS) -> dict[str, str]:
    """requirements.txt's `name==version` lines, by normalised name."""
    found = re.findall(r"^([A-Za-z0-9_.-]+)==(\S+)$", requirements.read_text(), re.M)
    return {re.sub(r"[-_.]+", "-", name).lower(): version for name, version in found}


def pinned(packages: tuple[str, ...] = EXECUTOR_PACKAGES, requirements: Path = REQUIREMENTS) -> list[str]:
    """`name==version` for each package, the version requirements.txt pins."""
    known = pins(requirements)
    missing = [name for name in packages if name not in known]
    if missing:
        raise SystemExit(f"{requirements} pins no version of {', '.join(missing)}")
    return [f"{name}=={known[name]}" for name in packages]


def run(*cmd: str | Path) -> None:
    env = {key: value for key, value in os.environ.items() if key not in OUTSIDE_PYTHON}
    done = subprocess.run([str(part) for part in cmd], env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(map(str, cmd))} failed:\n{done.stdout}{done.stderr}")


def build(wheel: Path, output: Path, python: str) -> None:
    import venv_pack

    output.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="mirrorflow-executor-env-") as scratch:
        env = Path(scratch) / "env"
        run(python, "-m", "venv", "--without-pip", env)
        interpreter = env / "bin" / "python"
        # The calling pip installs into the new environment (--python), which gets no pip of its
        # own; binary wheels only (confluent-kafka's carries librdkafka), no bytecode (Python
        # writes it on the executors, beside the unpacked files).
        pip = (sys.executable, "-m", "pip", "--python", interpreter, "install", "-q", "--no-input")
        run(*pip, "--no-compile", "--only-binary", ":all:", *pinned(), "--constraint", REQUIREMENTS)
        run(*pip, "--no-compile", "--no-deps", wheel)
        run(interpreter, "-I", "-c", "; ".join(f"import {module}" for module in EXECUTOR_MODULES))
        venv_pack.pack(prefix=str(env), output=str(output), force=True)
    output.chmod(0o644)  # venv-pack writes it readable by its owner only, unlike the wheel beside it


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("wheel", type=Path, help="the mirrorflow wheel (`make dist`)")
    parser.add_argument("--output", type=Path, required=True, help="the archive to write (.tar.gz)")
    parser.add_argument(
        "--python",
        default=getattr(sys, "_base_executable", sys.executable),
        help="the interpreter the environment is made with, at the path the executors have it "
        "(default: this one's base)",
    )
    args = parser.parse_args(argv)
    started = time.monotonic()
    build(args.wheel, args.output, args.python)
    print(
        f"{args.output}: {args.output.stat().st_size / 1e6:.1f} MB "
        f"({', '.join(pinned())} and {args.wheel.name}) in {time.monotonic() - started:.1f}s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
