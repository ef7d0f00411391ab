"""Where the DAGs find their configuration and the Spark applications."""

from __future__ import annotations

import os
from pathlib import Path

import mirrorflow

CONFIG_ENV = "MIRRORFLOW_CONFIG"
PROJECT_ROOT = Path(mirrorflow.__file__).resolve().parents[2]
DEFAULT_CONFIG = PROJECT_ROOT / "include" / "config" / "mirrorflow.properties"
COPY_APPLICATION = PROJECT_ROOT / "spark_apps" / "mirrorflow_copy.py"
VERIFY_APPLICATION = PROJECT_ROOT / "spark_apps" / "mirrorflow_verify.py"
WINDOW_APPLICATION = PROJECT_ROOT / "spark_apps" / "mirrorflow_window.py"


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
