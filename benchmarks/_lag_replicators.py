"""The replicators benchmarks/lag.py compares, and how each is started and stopped.

Each launcher gets the measurement's context, the flow's aliases and its properties file (the
flow `src->dst` copying the measurement's topics, tasks.max and the row's own settings), starts
the replicator and returns a `Replicator`: its live processes (for CPU), how to stop it, a note
for its row, and, for mirrorflow, the offsets topic whose commit tokens count its transactions.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from confluent_kafka.admin import AdminClient, NewTopic
from vs_mm2 import mm2_properties, spark_env, spark_submit

from localkafka.mirrormaker import MirrorMaker
from mirrorflow.config import load_config
from mirrorflow.replicate import service

if TYPE_CHECKING:
    from _lag_load import Context

BIN = Path(sys.executable).parent


@dataclass
class Replicator:
    """A running replicator: its live processes (for CPU), how to stop it, and what it has to
    say about its run (for the row's note)."""

    processes: Callable[[], list[int]]
    stop: Callable[[], None]
    note: Callable[[], str] = lambda: ""
    metered: bool = True
    """Whether CpuMeter can count its CPU: not for Spark applications that end while measured
    (their Python processes are not waited for by the JVM, so their CPU is lost with them)."""
    progress_topic: str | None = None
    """mirrorflow's offsets topic on the target, whose commit tokens count its transactions."""


Launcher = Callable[["Context", str, str, Path], Replicator]


def _popen(command: list[str], log: Path, **kwargs) -> subprocess.Popen:
    with log.open("ab") as out:
        return subprocess.Popen(
            command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True, **kwargs
        )


def _end(process: subprocess.Popen, sig: int = signal.SIGINT, wait_s: float = 60) -> None:
    """Ask the process group to end (Ctrl-C for mirrorflow), then make sure it did."""
    if process.poll() is None:
        os.killpg(process.pid, sig)
        try:
            process.wait(wait_s)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(30)


def _progress_topic(path: Path, src: str, dst: str) -> str:
    return load_config(str(path)).flow(src, dst).offset_storage_topic


def micro_batch_cli(ctx: Context, src: str, dst: str, path: Path) -> Replicator:
    process = _popen(
        [str(BIN / "mirrorflow"), "replicate", str(path), "--flow", f"{src}->{dst}", "--window", "86400"],
        ctx.tmp / f"{src}.log",
    )
    return Replicator(
        lambda: [process.pid], lambda: _end(process), progress_topic=_progress_topic(path, src, dst)
    )


def micro_batch_spark(ctx: Context, src: str, dst: str, path: Path) -> Replicator:
    planned = service.plan_run(str(path), src, dst, run_id=f"bench-{uuid.uuid4().hex[:8]}")
    command = spark_submit(
        ctx.args.spark_master, "mirrorflow_window.py", path, f"{src}->{dst}", planned["plan_offset"]
    )
    process = _popen([*command, "--window", "86400"], ctx.tmp / f"{src}.log", env=spark_env())
    # Nothing takes over from it: it is stopped once measured.
    return Replicator(
        lambda: [process.pid],
        lambda: _end(process, signal.SIGTERM, 30),
        progress_topic=_progress_topic(path, src, dst),
    )


def micro_batch_handovers(ctx: Context, src: str, dst: str, path: Path) -> Replicator:
    """Windows of --handover-window seconds, each its own Spark application, started when the
    one before ends, as the replicate DAG's runs start them (plan, then spark-submit): the window
    before copies on until the next has taken every slot over, then ends by itself. The row's
    lag covers the handovers; its note says how many there were and how each window ended."""
    halt, windows = threading.Event(), []
    length = ctx.args.handover_window

    def loop() -> None:
        while not halt.is_set():
            began, cpu = time.monotonic(), time.process_time()
            planned = service.plan_run(str(path), src, dst, run_id=f"bench-{uuid.uuid4().hex[:8]}")
            ends = time.monotonic() + length
            planning = f"planned in {ends - length - began:.1f}s ({time.process_time() - cpu:.1f} CPU-s)"
            command = spark_submit(
                ctx.args.spark_master, "mirrorflow_window.py", path, f"{src}->{dst}", planned["plan_offset"]
            )
            log = ctx.tmp / f"{src}-window-{len(windows)}.log"
            windows.append(_popen([*command, "--window", f"{length:g}"], log, env=spark_env()))
            submitted_ms = int(time.time() * 1000)
            print(
                f"    window {len(windows) - 1} {planning}, submitted at epoch ms {submitted_ms}", flush=True
            )
            with open(ctx.tmp / f"{src}-windows.tsv", "a") as submitted:
                submitted.write(f"{len(windows) - 1}\t{submitted_ms}\t{log.name}\n")
            halt.wait(max(0.0, ends - time.monotonic()))

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    ended: dict[int, int] = {}

    def live() -> list[int]:
        for index, window in enumerate(windows):
            if index not in ended and window.poll() is not None:
                ended[index] = window.returncode
        return [w.pid for i, w in enumerate(windows) if i not in ended]

    def stop() -> None:
        halt.set()
        thread.join(120)
        live()
        for window in windows:
            _end(window, signal.SIGTERM, 30)

    def note() -> str:
        by_itself = sum(code == 0 for code in ended.values())
        return (
            f"{max(0, len(windows) - 1)} handovers of {length:g}s windows; {by_itself} of "
            f"{len(ended)} ended windows ended by themselves (exit 0)"
        )

    return Replicator(live, stop, note, metered=False, progress_topic=_progress_topic(path, src, dst))


def batch_loop(ctx: Context, src: str, dst: str, path: Path) -> Replicator:
    halt, current = threading.Event(), [None]

    def loop() -> None:
        while not halt.is_set():
            current[0] = _popen(
                [str(BIN / "mirrorflow"), "replicate", str(path), "--flow", f"{src}->{dst}"],
                ctx.tmp / f"{src}.log",
            )
            current[0].wait()

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()

    def stop() -> None:
        halt.set()
        thread.join(600)

    return Replicator(
        lambda: [current[0].pid] if current[0] and current[0].poll() is None else [],
        stop,
        progress_topic=_progress_topic(path, src, dst),
    )


def txn_loop(*flags: str) -> Launcher:
    """The floor: benchmarks/txn_loop.py in --tasks processes, partitions dealt round-robin. It
    copies one topic, so it runs only with --topics 1."""
    return lambda ctx, src, dst, path: _txn_loop(ctx, src, flags)


def _txn_loop(ctx: Context, src: str, flags: tuple[str, ...]) -> Replicator:
    (topic,) = ctx.layout.names
    remote, partitions = f"{src}.{topic}", ctx.layout.partitions
    admin = AdminClient({"bootstrap.servers": ctx.target.bootstrap})
    created = admin.create_topics(
        [
            NewTopic(remote, partitions, 1),
            NewTopic(f"{remote}.positions", 1, 1, config={"cleanup.policy": "compact"}),
        ]
    )
    for future in created.values():
        future.result(30)
    processes = []
    for task in range(ctx.args.tasks):
        mine = ",".join(str(p) for p in range(task, partitions, ctx.args.tasks))
        command = [sys.executable, str(Path(__file__).with_name("txn_loop.py")), ctx.source.bootstrap]
        command += [ctx.target.bootstrap, topic, remote, mine, *flags]
        processes.append(_popen(command, ctx.tmp / f"{src}-{task}.log"))

    def stop() -> None:
        for process in processes:
            _end(process)

    return Replicator(lambda: [p.pid for p in processes if p.poll() is None], stop)


def mm2(exactly_once: bool) -> Launcher:
    """Real MirrorMaker 2 on the flow's properties (its topics regex and tasks.max), as
    benchmarks/vs_mm2.py runs it."""

    def start(ctx: Context, src: str, dst: str, path: Path) -> Replicator:
        extra = f"{src}->{dst}.topics = {ctx.layout.pattern}\ntasks.max = {ctx.args.tasks}\n"
        config = mm2_properties(
            ctx.tmp / f"{src}-mm2.properties", ctx.source, ctx.target, src, dst, extra, exactly_once
        )
        runner = MirrorMaker(config, ctx.tmp / f"mm2-{src}", clusters=(dst,)).start()
        return Replicator(
            lambda: [runner.process.pid] if runner.running else [], lambda: runner.stop(timeout_s=60)
        )

    return start


MICRO = "mirrorflow.replicate.mode = micro-batch\nmirrorflow.microbatch.interval.ms = {interval}\n"
FLOORS = ("librdkafka exactly-once loop (floor)", "librdkafka exactly-once loop per partition (floor)")
REPLICATORS: dict[str, tuple[Launcher, str]] = {
    "mirrorflow micro-batch (CLI)": (micro_batch_cli, MICRO),
    "mirrorflow micro-batch (Spark)": (micro_batch_spark, MICRO),
    "mirrorflow micro-batch handovers (Spark)": (micro_batch_handovers, MICRO),
    "mirrorflow batch (CLI loop)": (batch_loop, ""),
    "MM2 at-least-once": (mm2(False), ""),
    "MM2 exactly-once": (mm2(True), ""),
    FLOORS[0]: (txn_loop(), ""),
    FLOORS[1]: (txn_loop("--per-partition"), ""),
}
"""By name: the launcher and the properties the row's flow adds ({interval}: --interval-ms)."""
