"""Real MirrorMaker 2 in dedicated mode, from the pinned Kafka jars, for the interoperability
tests and the head-to-head benchmark.

`MirrorMaker(properties, work_dir).start()` runs `java ... org.apache.kafka.connect.mirror.MirrorMaker
<properties>` with the jars `make setup` resolved for MirrorMaker 2's line (runtime.mirrormaker_line;
`line="3.9"` runs an older line's MM2): the same properties file mirrorflow reads, so both tools
see one configuration. Its log goes to `<work_dir>/mm2.log`. `stop()` is a
clean shutdown (SIGTERM: Connect stops its tasks, commits their source offsets and leaves its
group), `kill()` a crash (SIGKILL: whatever MM2 copied after its last offset flush has no stored
offset).

MM2 says nothing to its caller about progress, so callers wait on what it writes to Kafka (a
remote topic's end offset, its Connect source offsets, checkpoints) with `wait_for`, always with a
deadline; a wait that times out, or finds MM2 dead, raises with the tail of MM2's log.
"""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

from localkafka import runtime
from localkafka.broker import die_with_parent

MM2_MAIN = "org.apache.kafka.connect.mirror.MirrorMaker"
LOG4J2 = Path(__file__).with_name("log4j2-mm2.properties")
RELOAD4J = Path(__file__).with_name("log4j-reload4j.properties")
HEAP = "512m"
POLL_S = 0.25

# What dedicated MM2 needs on single-broker clusters beside the replication factors of
# replication.factor and the offset-syncs, checkpoints, heartbeats and Connect offsets topics:
# Connect's config and status topics. Both are top-level keys MM2 passes to every herder's worker.
SINGLE_BROKER_WORKER = "config.storage.replication.factor = 1\nstatus.storage.replication.factor = 1\n"

T = TypeVar("T")
_PR_SET_PDEATHSIG = 1


class MirrorMakerError(RuntimeError):
    """MM2 died, or did not do what its caller waited for in time; the message carries its log."""


class MirrorMaker:
    """One dedicated-mode MM2 process (all its herders)."""

    def __init__(
        self,
        properties: Path,
        work_dir: Path,
        *,
        clusters: Sequence[str] = (),
        heap: str = HEAP,
        line: str | None = None,
    ) -> None:
        self.line = runtime.mirrormaker_line() if line is None else runtime.line(line)
        self.properties = properties
        self.work_dir = work_dir
        self.clusters = tuple(clusters)
        self.heap = heap
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def log_path(self) -> Path:
        return self.work_dir / "mm2.log"

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def command(self) -> list[str]:
        """MM2's command line; `--clusters X` keeps only the herders that write into X."""
        args = [str(self.properties)]
        if self.clusters:
            args += ["--clusters", *self.clusters]
        return runtime.java_command(
            MM2_MAIN, *args, heap=self.heap, system_properties=self._logging(), kafka_line=self.line
        )

    def _logging(self) -> dict[str, str]:
        if self.line.log4j2:
            return {"log4j2.configurationFile": str(LOG4J2), "mm2.logs.dir": str(self.work_dir)}
        return {
            "log4j.configuration": RELOAD4J.as_uri(),
            "kafka.logs.dir": str(self.work_dir),
            "localkafka.log.file": "mm2.log",
        }

    def start(self) -> MirrorMaker:
        if self.running:
            raise MirrorMakerError("MM2 is already running")
        self.work_dir.mkdir(parents=True, exist_ok=True)
        with open(self.work_dir / "jvm.out", "ab") as out:
            self.process = subprocess.Popen(
                self.command(),
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                preexec_fn=die_with_parent,  # noqa: PLW1509 - only sets the death signal
            )
        return self

    def stop(self, timeout_s: float = 60.0) -> int | None:
        """SIGTERM and wait; SIGKILL only if MM2 has not exited in time. Returns the exit code."""
        process = self.process
        if process is None:
            return None
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)
        return process.returncode

    def kill(self) -> None:
        """SIGKILL: MM2 gets no chance to flush its source offsets or leave its group."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def log_tail(self, lines: int = 30) -> str:
        text = self.log_text().splitlines()
        errors = [line for line in text if " ERROR " in line or line.startswith("Caused by")]
        out = self.work_dir / "jvm.out"
        jvm = out.read_text(errors="replace").splitlines()[-lines:] if out.exists() else []
        return "\n".join(
            [f"--- {out} ---", *jvm, f"--- {self.log_path} (errors) ---", *errors[:lines]]
            + [f"--- {self.log_path} (last lines) ---", *text[-lines:]]
        )

    def wait_for(self, check: Callable[[], T | None], what: str, timeout_s: float) -> T:
        """Poll `check` until it returns something true (which is returned); fail if MM2 dies first."""
        deadline = time.monotonic() + timeout_s
        while True:
            value = check()
            if value:
                return value
            if not self.running:
                code = None if self.process is None else self.process.returncode
                raise MirrorMakerError(
                    f"MM2 exited (code {code}) while waiting for {what}\n{self.log_tail()}"
                )
            if time.monotonic() > deadline:
                raise MirrorMakerError(f"MM2 did not {what} within {timeout_s:.0f}s\n{self.log_tail()}")
            time.sleep(POLL_S)
