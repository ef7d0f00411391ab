"""What a Spark application's start costs with a SparkSession and with a SparkContext alone.

mirrorflow's Spark jobs use only Spark's core API (parallelize, mapPartitions, collect), and
start a SparkContext (mirrorflow.spark.copy_job.spark_context). This script shows what that
saves: it spark-submits a small job of that shape (two tasks, a map, a collect) in --master,
made either way, --repeat times each, alternating, and prints per way the median wall time
from spark-submit to its exit and the CPU time of the whole process tree (the JVM, the Python
driver and its workers, from wait4). At a micro-batch handover the next window starts on the
cores the window before it copies on (on a machine of its own, as here), so start-up CPU is
lag.

Run: `.venv/bin/python benchmarks/spark_start.py` (--repeat 5; --master local[2]).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from vs_mm2 import machine, spark_env

BIN = Path(sys.executable).parent
JOB = """
import sys
if sys.argv[1] == "session":
    from pyspark.sql import SparkSession
    context = SparkSession.builder.appName("start").getOrCreate().sparkContext
else:
    from pyspark import SparkConf, SparkContext
    context = SparkContext.getOrCreate(SparkConf().setAppName("start"))
assert sorted(context.parallelize([1, 2], 2).mapPartitions(lambda rows: [sum(rows)]).collect()) == [1, 2]
context.stop()
"""
WAYS = {"session": "SparkSession (before)", "context": "SparkContext alone (mirrorflow)"}


def one(job: Path, way: str, master: str) -> tuple[float, float]:
    """Wall and CPU seconds of one spark-submit of the job made `way`."""
    started = time.monotonic()
    process = subprocess.Popen(
        [str(BIN / "spark-submit"), "--master", master, "--conf", "spark.ui.enabled=false", str(job), way],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=spark_env(),
    )
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        raise SystemExit(f"spark-submit of the {way} job failed (exit {process.returncode})")
    return time.monotonic() - started, usage.ru_utime + usage.ru_stime


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args()
    print(machine())
    print(f"load average at the start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    figures: dict[str, list[tuple[float, float]]] = {way: [] for way in WAYS}
    with tempfile.TemporaryDirectory(prefix="mirrorflow-spark-start-") as tmp:
        job = Path(tmp) / "start_job.py"
        job.write_text(JOB)
        for _ in range(args.repeat):
            for way in WAYS:
                figures[way].append(one(job, way, args.master))
    print(f"{'application':<34} {'wall s':>7} {'CPU s':>7}   (medians of {args.repeat})")
    for way, label in WAYS.items():
        wall = statistics.median(w for w, _ in figures[way])
        cpu = statistics.median(c for _, c in figures[way])
        print(f"{label:<34} {wall:>7.1f} {cpu:>7.1f}")
    session, context = (statistics.median(c for _, c in figures[w]) for w in WAYS)
    print(f"CPU of a SparkContext's start against a SparkSession's: {context / session:.2f}")
    print(f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
