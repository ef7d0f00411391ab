"""The one line each Spark task of a mirrorflow job logs as it starts: which Python and which
mirrorflow the executor runs. On a cluster the executors' Python comes from the job (a packed
environment shipped with `spark.archives`, docs/operations/scaling-out.md) or from the nodes'
image; when a copy behaves differently there than on the Airflow worker, this line in the
executor's stderr says which interpreter and which installation of mirrorflow ran it.
"""

from __future__ import annotations

import logging
import platform
import sys
from importlib import metadata
from pathlib import Path

import mirrorflow
from mirrorflow.logs import LOG_FORMAT

log = logging.getLogger("mirrorflow.spark.executor")


def mirrorflow_version() -> str:
    try:
        return metadata.version("mirrorflow")
    except metadata.PackageNotFoundError:
        return "(no installed metadata)"


def spark_task() -> str:
    """`Spark task P of stage S (attempt A)` inside a Spark task, else `a process outside Spark`."""
    try:
        from pyspark import TaskContext
    except ImportError:
        return "a process outside Spark"
    task = TaskContext.get()
    if task is None:
        return "a process outside Spark"
    return f"Spark task {task.partitionId()} of stage {task.stageId()} (attempt {task.attemptNumber()})"


def python_line() -> str:
    return (
        f"{spark_task()} runs Python {platform.python_version()} at {sys.executable} "
        f"with mirrorflow {mirrorflow_version()} from {Path(mirrorflow.__file__).parent}"
    )


def log_python() -> None:
    """python_line() at INFO on stderr, whatever the process's logging is set to: a copy job's
    executors leave Python logging unset (WARNING and up, the rest dropped), and turning INFO on
    for every logger there would change more than this line."""
    if not log.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter(LOG_FORMAT))
        log.addHandler(handler)
        log.setLevel(logging.INFO)
        log.propagate = False
    log.info("%s", python_line())
