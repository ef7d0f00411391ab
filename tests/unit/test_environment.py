"""The install is what requirements.txt promises (the pyspark-client collision is the trap)."""

from __future__ import annotations

import re
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _pinned(package: str) -> str:
    text = (ROOT / "requirements.txt").read_text()
    match = re.search(rf"^{re.escape(package)}==(\S+)$", text, re.MULTILINE | re.IGNORECASE)
    assert match, f"{package} is not pinned in requirements.txt"
    return match.group(1)


def test_pyspark_python_files_match_the_pinned_release() -> None:
    import pyspark

    assert pyspark.__version__ == _pinned("pyspark") == metadata.version("pyspark")


def test_pyspark_jars_match_the_python_files() -> None:
    import pyspark

    jars = Path(pyspark.__file__).parent / "jars"
    core = [p.name for p in jars.glob("spark-core_*.jar")]
    assert core, "pyspark is installed without its jars"
    assert core[0].endswith(f"-{pyspark.__version__}.jar"), core


def test_every_requirement_is_pinned() -> None:
    for line in (ROOT / "requirements.txt").read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            assert re.fullmatch(r"[A-Za-z0-9_.\-\[\]]+==[\w.\-+]+", line), f"unpinned: {line}"


def test_core_versions() -> None:
    for package in ("apache-airflow", "confluent-kafka", "apache-airflow-providers-apache-spark", "kio"):
        assert metadata.version(package) == _pinned(package)
