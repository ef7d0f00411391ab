"""The install is what requirements.txt promises (the pyspark-client collision is the trap)."""

from __future__ import annotations

import re
from importlib import metadata
from pathlib import Path

import pytest

from localkafka.runtime import (
    Line,
    classpath,
    kafka_version,
    mirrormaker_line,
)
from localkafka.runtime import (
    test_lines as lines_under_test,
)

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
    for package in ("apache-airflow", "confluent-kafka", "apache-airflow-providers-apache-spark"):
        assert metadata.version(package) == _pinned(package)


def test_kafka_jars_are_the_pinned_version() -> None:
    """`make setup` resolved kafka/pom.xml: the broker and its clients at one version, and no
    second clients jar on its classpath."""
    names = {jar.name for jar in classpath()}
    version = kafka_version()
    for artifact in (
        "kafka_2.13",
        "kafka-server",
        "kafka-storage",
        "kafka-raft",
        "kafka-metadata",
        "kafka-group-coordinator",
        "kafka-transaction-coordinator",
        "kafka-clients",
    ):
        assert f"{artifact}-{version}.jar" in names, artifact
    assert [n for n in names if n.startswith("kafka-clients-")] == [f"kafka-clients-{version}.jar"]


@pytest.mark.parametrize(
    "kafka_line", [mirrormaker_line(), *lines_under_test()], ids=lambda line: line.version
)
def test_each_further_line_is_one_release(kafka_line: Line) -> None:
    """MM2's line and every test line hold the broker, MM2, the Connect runtime and the clients of
    one release, and one slf4j binding of the logging that release was built for."""
    names = {jar.name for jar in kafka_line.classpath()}
    for artifact in (
        "kafka_2.13",
        "connect-mirror",
        "connect-mirror-client",
        "connect-runtime",
        "kafka-clients",
    ):
        assert f"{artifact}-{kafka_line.version}.jar" in names, artifact
    assert [n for n in names if n.startswith("kafka-clients-")] == [f"kafka-clients-{kafka_line.version}.jar"]
    bindings = [n for n in names if n.startswith(("log4j-slf4j-impl-", "slf4j-reload4j-"))]
    assert len(bindings) == 1 and bindings[0].startswith(
        "log4j-slf4j-impl-" if kafka_line.log4j2 else "slf4j-reload4j-"
    )
