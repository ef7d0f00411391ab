"""Where the DAGs find their configuration and the Spark applications."""

from __future__ import annotations

import os
from pathlib import Path

import mirrorflow

CONFIG_ENV = "MIRRORFLOW_CONFIG"
PACKAGE_DIR = Path(mirrorflow.__file__).resolve().parent
PROJECT_ROOT = PACKAGE_DIR.parents[1]
DEFAULT_CONFIG = PROJECT_ROOT / "include" / "config" / "mirrorflow.properties"
# The spark-submit entry points travel inside the package (in the repository, mirrorflow/spark_apps
# links to the top-level spark_apps/), so an installed wheel submits the same files a checkout does.
SPARK_APPS = PACKAGE_DIR / "spark_apps"
COPY_APPLICATION = SPARK_APPS / "mirrorflow_copy.py"
VERIFY_APPLICATION = SPARK_APPS / "mirrorflow_verify.py"
WINDOW_APPLICATION = SPARK_APPS / "mirrorflow_window.py"


class MissingConfig(RuntimeError):
    pass


def config_path() -> Path:
    """The properties file named by MIRRORFLOW_CONFIG, else include/config/mirrorflow.properties."""
    raw = os.environ.get(CONFIG_ENV)
    path = Path(raw) if raw else DEFAULT_CONFIG
    if not path.is_file():
        where = f"{CONFIG_ENV}={raw}" if raw else f"{CONFIG_ENV} is not set and {DEFAULT_CONFIG}"
        raise MissingConfig(
            f"mirrorflow has no configuration: {where} is not a file. Point {CONFIG_ENV} at your "
            "MM2 properties file (e.g. include/config/demo.properties)."
        )
    return path
