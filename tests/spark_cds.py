"""`python -m tests.spark_cds`: the class-data-sharing archive of the Spark driver JVM, which
`make setup` leaves in kafka/cds beside Kafka's, so that every spark-submit of the suite maps
Spark's classes instead of loading and verifying them one by one.

A driver's start-up is mostly class loading: a small local job took 7.8 CPU-seconds and 8.3 s
here without the archive, 4.9 CPU-seconds and 5.2 s with it, and the suite runs a few dozen
spark-submits (every end-to-end DAG run copies through one). The archive is recorded from one
real job (a SparkContext, a parallelized map, a collect: what mirrorflow's copy and window jobs
do) with the JVM's dynamic archiving (-XX:ArchiveClassesAtExit), and is named after the pyspark
version, the JVM and the job, so a different Spark, Java or job builds its own.
tests/conftest.py gives it to every driver the suite starts, the way it gives them the C1-only
JIT; only start-up changes.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ARCHIVE_DIR = Path(__file__).resolve().parent.parent / "kafka" / "cds"
RECORD_JOB = """
from pyspark import SparkConf, SparkContext

context = SparkContext.getOrCreate(SparkConf().setAppName("spark-cds"))
counted = context.parallelize([[1, 2], [3]], 2).mapPartitions(lambda rows: [sum(map(sum, rows))])
assert sorted(counted.collect()) == [3, 3]
context.stop()
"""
# The archive's own warnings (a JVM that cannot map it) would land in the logs tests read.
QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off -Xlog:class+path=off"


def _java() -> str:
    """The java spark-submit runs (spark-class: $JAVA_HOME/bin/java, else java on PATH)."""
    home = os.environ.get("JAVA_HOME")
    found = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    if not found:
        raise RuntimeError("no java on PATH and no JAVA_HOME: run `make setup`")
    return found


def archive() -> Path:
    import pyspark

    java_version = subprocess.run([_java(), "-version"], capture_output=True, text=True, check=True).stderr
    # The job recorded is in the name too: a job that loads other classes records a new archive.
    named = f"{pyspark.__version__}\n{_java()}\n{java_version}\n{RECORD_JOB}"
    digest = hashlib.sha256(named.encode()).hexdigest()[:16]
    return ARCHIVE_DIR / f"spark-driver-{digest}.jsa"


def jvm_options() -> str:
    """The driver options that map the archive; empty when it was not built."""
    path = archive()
    return f"-XX:SharedArchiveFile={path} {QUIET}" if path.exists() else ""


def build(force: bool = False) -> Path:
    path = archive()
    if path.exists() and not force:
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(f".{os.getpid()}.tmp")
    submit = Path(sys.executable).parent / "spark-submit"
    with tempfile.TemporaryDirectory(prefix="spark-cds-") as tmp:
        job = Path(tmp) / "record.py"
        job.write_text(RECORD_JOB)
        env = {
            **os.environ,
            "PYSPARK_PYTHON": sys.executable,
            "SPARK_SUBMIT_OPTS": f"-XX:TieredStopAtLevel=1 -XX:ArchiveClassesAtExit={partial} {QUIET}",
        }
        done = subprocess.run(
            [str(submit), "--master", "local[2]", "--conf", "spark.ui.enabled=false", str(job)],
            capture_output=True,
            text=True,
            env=env,
            check=False,
            timeout=600,
        )
    if done.returncode != 0 or not partial.exists():
        partial.unlink(missing_ok=True)
        raise RuntimeError(f"recording Spark's classes failed:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    partial.replace(path)
    return path


def main() -> int:
    print(f"spark: class-data-sharing archive {build(force='--force' in sys.argv[1:])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
