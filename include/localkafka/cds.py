"""`python -m localkafka.cds`: build the class-data-sharing archive `make setup` leaves next to
kafka/libs, so every later broker and storage-tool JVM maps Kafka's classes instead of loading
them (1.5 s to a serving broker instead of 4 s here).

It records which classes a real format and a real broker start load (one throwaway node in a
temporary dir), dumps them into one static archive, and does nothing when the archive for this
classpath and JVM already exists.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from localkafka import runtime
from localkafka.node import LocalKafka


def _record_classes(directory: Path) -> list[str]:
    """Classes loaded by a storage-tool format and a broker start, with no archive in use."""
    kafka = LocalKafka(directory / "cluster")
    node = kafka.nodes[0]
    previous = os.environ.get(runtime.JVM_OPTS_ENV)
    lists = [directory / "format.lst", directory / "broker.lst"]
    try:
        os.environ[runtime.JVM_OPTS_ENV] = f"-Xshare:off -XX:DumpLoadedClassList={lists[0]}"
        node.format(reuse=False)
        os.environ[runtime.JVM_OPTS_ENV] = f"-Xshare:off -XX:DumpLoadedClassList={lists[1]}"
        kafka.start()
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": kafka.bootstrap, "log_level": 3})
        for future in admin.create_topics([NewTopic("cds-warmup", 1, 1)]).values():
            future.result(30)
        del admin
    finally:
        kafka.stop()
        if previous is None:
            os.environ.pop(runtime.JVM_OPTS_ENV, None)
        else:
            os.environ[runtime.JVM_OPTS_ENV] = previous
    return sorted(
        {
            line
            for path in lists
            for line in path.read_text().splitlines()
            if line and not line.startswith("#")
        }
    )


def build(force: bool = False) -> Path:
    archive = runtime.cds_archive()
    if archive.exists() and not force:
        return archive
    archive.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="localkafka-cds-") as tmp:
        class_list = Path(tmp) / "classes.lst"
        class_list.write_text("\n".join(_record_classes(Path(tmp))) + "\n")
        partial = archive.with_suffix(f".{os.getpid()}.tmp")
        command = [
            runtime.java_binary(),
            "-Xshare:dump",
            f"-XX:SharedClassListFile={class_list}",
            f"-XX:SharedArchiveFile={partial}",
            "-Xlog:cds=off",
            "-cp",
            os.pathsep.join(str(j) for j in runtime.classpath()),
        ]
        result = subprocess.run(command, capture_output=True, text=True, check=False)
        if result.returncode != 0 or not partial.exists():
            raise RuntimeError(f"building {archive} failed: {result.stdout}{result.stderr}")
        partial.replace(archive)
    return archive


def main() -> int:
    print(f"localkafka: class-data-sharing archive {build(force='--force' in sys.argv[1:])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
