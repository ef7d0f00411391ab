"""A seeded fault schedule on demand (tests/chaos): kill -9 and SIGSTOP of `mirrorflow replicate`
runs, concurrent runs, target brokers killed or frozen, the source killed and its link dark, while
records flow; then a clean run and the checker. Prints the figures: faults injected by kind,
records checked, lost and duplicated, offset-syncs checked, runs and how each ended.

    .venv/bin/python benchmarks/chaos.py --seed 7 --minutes 10 --target-shape three
    .venv/bin/python benchmarks/chaos.py --seed 34 --minutes 30 --mode micro-batch

Exits 1 when an invariant failed, printing the seed, the schedule and the first differences (the
same seed replays the same schedule). Clusters and logs (each run's output, the whole outcome in
logs/outcome.txt) live in a temporary directory, kept on failure or with --keep.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

# tests/ is a package of the project root, which a script run as benchmarks/chaos.py does not
# have on its path.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.chaos.schedule import MODES, SHAPES, run_schedule  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=34, help="draws the whole schedule (default: 34)")
    parser.add_argument("--minutes", type=float, default=10.0, help="length of the schedule (default: 10)")
    parser.add_argument(
        "--target-shape",
        choices=list(SHAPES),
        default="single",
        help="single: one node with Kafka's defaults; three: three brokers (default: single)",
    )
    parser.add_argument(
        "--mode",
        choices=list(MODES),
        default="batch",
        help="batch: `mirrorflow replicate` runs back to back; micro-batch: windows back to back (default: batch)",
    )
    parser.add_argument("--keep", action="store_true", help="keep the clusters' data and the runs' logs")
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="mirrorflow-chaos-"))
    ok = False
    try:
        outcome = run_schedule(args.seed, args.minutes * 60, args.target_shape, workdir, args.mode)
        print(outcome.describe())
        ok = outcome.ok
        return 0 if ok else 1
    finally:
        if args.keep or not ok:
            print(f"clusters and logs kept in {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    os.environ.setdefault("COLUMNS", "200")
    sys.exit(main())
