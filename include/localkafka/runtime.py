"""Where the Kafka jars and Java are, and how a Kafka JVM is launched.

`make setup` resolves the pinned Kafka version (kafka/pom.xml) into kafka/libs with Maven and
then builds one class-data-sharing archive for the broker and the storage tool
(`python -m localkafka cds`): with it a broker starts in about 1.5 s instead of 4 s on two
cores, which is most of what a test that needs its own broker waits for. Nothing here
downloads anything; a missing runtime is an error that says to run `make setup`.

Besides that main line, kafka/pom.xml names further lines, each a released Kafka version whose
broker and MirrorMaker 2 jars sit in their own folder kafka/lines/<version>: MirrorMaker 2's
(`mirrormaker.version`, which trails the broker when Maven does not serve MM2's newest jars) and
the older brokers tests run beside the main one (`kafka.test.lines`). A test asks for a line by
name, "3.9" or "3.9.1" (`line("3.9")`), and gets the pinned release of it.
"""

from __future__ import annotations

import dataclasses
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


def _pom_property(name: str) -> str:
    match = re.search(rf"<{re.escape(name)}>([^<]*)</{re.escape(name)}>", POM.read_text())
    if match is None:
        raise RuntimeMissing(f"{POM} has no <{name}> property")
    return match.group(1).strip()


@cache
def kafka_version() -> str:
    """The pinned broker version, read from kafka/pom.xml (the one place it is written)."""
    return _pom_property("kafka.version")


@cache
def mirrormaker_version() -> str:
    """The pinned MirrorMaker 2 version, which can trail the broker's when Maven does not serve
    MM2's jars of the newest release."""
    return _pom_property("mirrormaker.version")


@dataclasses.dataclass(frozen=True)
class Line:
    """One released Kafka version this machine can run, and the folder of its jars."""

    version: str
    libs: Path

    @property
    def name(self) -> str:
        """major.minor, what a test asks for ("3.9")."""
        return ".".join(self.version.split(".")[:2])

    @property
    def major(self) -> int:
        return int(self.version.split(".")[0])

    @property
    def log4j2(self) -> bool:
        """Kafka 4 logs through log4j2; Kafka 3 through reload4j (log4j 1.2 properties)."""
        return self.major >= 4

    def classpath(self) -> list[Path]:
        jars = sorted(self.libs.glob("*.jar"))
        if not any(j.name.startswith("kafka_2.13-") for j in jars):
            raise RuntimeMissing(
                f"no Kafka {self.version} jars in {self.libs}; run `make setup` (it resolves kafka/pom.xml "
                f"and its lines with Maven)"
                + (f", or point {LIBS_ENV} at a folder holding Kafka's jars" if self == main_line() else "")
            )
        return jars

    def cds_archive(self) -> Path:
        """The class-data-sharing archive for this classpath and this JVM (the name says which)."""
        digest = hashlib.sha256()
        for jar in self.classpath():
            digest.update(jar.name.encode())
        digest.update(_java_version().encode())
        return PROJECT_ROOT / "kafka" / "cds" / f"kafka-{digest.hexdigest()[:16]}.jsa"


def main_line() -> Line:
    return Line(kafka_version(), libs_dir())


def _extra_line(version: str) -> Line:
    return Line(version, PROJECT_ROOT / "kafka" / "lines" / version)


def mirrormaker_line() -> Line:
    """Where MirrorMaker 2 runs from: the main line when its MM2 jars are served, else its own."""
    version = mirrormaker_version()
    return main_line() if version == kafka_version() else _extra_line(version)


def test_lines() -> list[Line]:
    """The older lines kafka/pom.xml pins for tests (`kafka.test.lines`), newest first."""
    versions = [v for v in re.split(r"[,\s]+", _pom_property("kafka.test.lines")) if v]
    return sorted(
        (_extra_line(v) for v in versions), key=lambda line: version_key(line.version), reverse=True
    )


def line(name: str | None = None) -> Line:
    """The pinned line called `name` ("3.9" or "3.9.1"; None: the main line)."""
    if name is None:
        return main_line()
    known = [main_line(), *test_lines(), mirrormaker_line()]
    for candidate in known:
        if name in (candidate.version, candidate.name):
            return candidate
    raise RuntimeMissing(
        f"Kafka line {name!r} is not pinned; kafka/pom.xml pins "
        f"{', '.join(dict.fromkeys(c.version for c in known))} (add it to kafka.test.lines and run `make setup`)"
    )


def version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", version))


def classpath() -> list[Path]:
    return main_line().classpath()


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
    return main_line().cds_archive()


def java_command(
    main_class: str,
    *args: str,
    heap: str | None = None,
    system_properties: dict[str, str] | None = None,
    kafka_line: Line | None = None,
) -> list[str]:
    """`java ... main_class args` on `kafka_line`'s jars (default: the main line), with the shared
    archive when one was built for that classpath."""
    chosen = kafka_line or main_line()
    jars = chosen.classpath()
    command = [java_binary(), *JVM_FLAGS]
    if heap is not None:
        command += [f"-Xms{min_heap(heap)}", f"-Xmx{heap}"]
    archive = chosen.cds_archive()
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
