"""Where the Kafka jars and Java are, and how a Kafka JVM is launched.

`make setup` resolves the pinned Kafka version (kafka/pom.xml) into kafka/libs with Maven and
then builds one class-data-sharing archive for the broker and the storage tool
(`python -m localkafka cds`): with it a broker starts in about 1.5 s instead of 4 s on two
cores, which is most of what a test that needs its own broker waits for. Nothing here
downloads anything; a missing runtime is an error that says to run `make setup`.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
from functools import cache
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[2]
LIBS_ENV = "MIRRORFLOW_KAFKA_LIBS"
POM = PROJECT_ROOT / "kafka" / "pom.xml"

# Small enough for several brokers on a 2-core, 24 GB machine, large enough for benchmarks.
DEFAULT_HEAP = os.environ.get("LOCALKAFKA_HEAP", "768m")
# Extra JVM options for every Kafka JVM localkafka starts (like Kafka's KAFKA_OPTS).
JVM_OPTS_ENV = "LOCALKAFKA_JVM_OPTS"
JVM_FLAGS = (
    # The serial collector costs the least CPU and threads on two cores; pauses at these heap
    # sizes are a few milliseconds.
    "-XX:+UseSerialGC",
    "-Djava.awt.headless=true",
    "-Dfile.encoding=UTF-8",
)


class RuntimeMissing(RuntimeError):
    """The Kafka jars or Java are not installed; the message says how to install them."""


def libs_dir() -> Path:
    return Path(os.environ.get(LIBS_ENV) or PROJECT_ROOT / "kafka" / "libs")


@cache
def kafka_version() -> str:
    """The pinned version, read from kafka/pom.xml (the one place it is written)."""
    match = re.search(r"<kafka\.version>([^<]+)</kafka\.version>", POM.read_text())
    if match is None:
        raise RuntimeMissing(f"{POM} has no <kafka.version> property")
    return match.group(1).strip()


def classpath() -> list[Path]:
    directory = libs_dir()
    jars = sorted(directory.glob("*.jar"))
    if not any(j.name.startswith("kafka_2.13-") for j in jars):
        raise RuntimeMissing(
            f"no Kafka broker jars in {directory}; run `make setup` (it resolves kafka/pom.xml with "
            f"Maven), or point {LIBS_ENV} at a folder holding Kafka's jars"
        )
    return jars


def java_binary() -> str:
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").exists():
        return str(Path(home) / "bin" / "java")
    found = shutil.which("java")
    if found is None:
        raise RuntimeMissing("java is not on PATH; run `make setup` (it installs Java 17 when missing)")
    return found


@cache
def _java_version() -> str:
    result = subprocess.run([java_binary(), "-version"], capture_output=True, text=True, check=False)
    return result.stderr.strip()


def cds_archive() -> Path:
    """The class-data-sharing archive for this classpath and this JVM (the name says which)."""
    digest = hashlib.sha256()
    for jar in classpath():
        digest.update(jar.name.encode())
    digest.update(_java_version().encode())
    return libs_dir().parent / "cds" / f"kafka-{digest.hexdigest()[:16]}.jsa"


def java_command(
    main_class: str, *args: str, heap: str | None = None, system_properties: dict[str, str] | None = None
) -> list[str]:
    """`java ... main_class args`, with the shared archive when one was built for this runtime."""
    jars = classpath()
    command = [java_binary(), *JVM_FLAGS]
    if heap is not None:
        command += [f"-Xms{min_heap(heap)}", f"-Xmx{heap}"]
    archive = cds_archive()
    if archive.exists():
        # -Xshare:auto: a stale archive is ignored, never an error; -Xlog keeps its warning quiet.
        command += [
            f"-XX:SharedArchiveFile={archive}",
            "-Xshare:auto",
            "-Xlog:cds=off",
            "-Xlog:cds+dynamic=off",
        ]
    command += os.environ.get(JVM_OPTS_ENV, "").split()  # last, so they win
    for key, value in (system_properties or {}).items():
        command.append(f"-D{key}={value}")
    command += ["-cp", os.pathsep.join(str(j) for j in jars), main_class, *args]
    return command


def min_heap(heap: str) -> str:
    """A quarter of the maximum heap up front: the JVM grows it when a benchmark needs it."""
    match = re.fullmatch(r"(\d+)([kKmMgG])", heap)
    if match is None:
        raise ValueError(f"heap size {heap!r} is not like 768m or 2g")
    value, unit = int(match[1]), match[2].lower()
    megabytes = {"k": value / 1024, "m": value, "g": value * 1024}[unit]
    return f"{max(64, int(megabytes // 4))}m"
