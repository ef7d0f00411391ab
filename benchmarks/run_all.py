"""Run every benchmark under benchmarks/ in turn (what `make bench` does) and print their figures.

A benchmark is any `*.py` file here other than this one and files starting with `_`; each runs
as its own process with this interpreter, from the project root, its output passed straight
through. Name scripts to run only those (`run_all.py copy_throughput`). Extra arguments a script
needs when run from here go in ARGUMENTS. Exits non-zero if any benchmark failed.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
# Arguments a script gets when run from here, by file stem; unlisted scripts run with none.
ARGUMENTS: dict[str, tuple[str, ...]] = {"chaos": ("--minutes", "3")}


def discover() -> list[Path]:
    return sorted(
        p for p in HERE.glob("*.py") if p.name != Path(__file__).name and not p.name.startswith("_")
    )


def parse_args(available: list[Path]) -> list[Path]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    names = [p.stem for p in available]
    parser.add_argument(
        "names", nargs="*", metavar="NAME", help=f"benchmarks to run (default: all of {names})"
    )
    args = parser.parse_args()
    unknown = [n for n in args.names if n not in names]
    if unknown:
        parser.error(f"no benchmark named {', '.join(unknown)}; choose from {', '.join(names)}")
    return [p for p in available if not args.names or p.stem in args.names]


def run(script: Path) -> tuple[int, float]:
    command = [sys.executable, str(script.relative_to(ROOT)), *ARGUMENTS.get(script.stem, ())]
    sys.stdout.write(f"\n=== {' '.join(command[1:])} ===\n")
    sys.stdout.flush()
    started = time.monotonic()
    code = subprocess.run(command, cwd=ROOT, check=False).returncode
    return code, time.monotonic() - started


def main() -> int:
    chosen = parse_args(discover())
    if not chosen:
        sys.stderr.write(f"no benchmark scripts found in {HERE}\n")
        return 1
    outcomes = [(script, *run(script)) for script in chosen]
    sys.stdout.write("\n=== summary ===\n")
    for script, code, seconds in outcomes:
        status = "ok" if code == 0 else f"FAILED (exit code {code})"
        sys.stdout.write(f"{script.name:<32} {seconds:8.1f} s  {status}\n")
    return 0 if all(code == 0 for _, code, _ in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
