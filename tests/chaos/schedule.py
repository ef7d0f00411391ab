"""One seeded fault schedule against a real flow, end to end (see tests/chaos/__init__.py).

Two clusters of the schedule's own (localkafka, 127.0.0.1, free ports): a single-node source,
reached by the flow through localkafka's latency proxy (a SLOW listener, 1 ms each way) so its
link can go dark, and a target that is either one node with Kafka's default broker settings or
three brokers (every copy topic with three replicas, offset-syncs on the target, as
tests/reliability/test_target_crash.py's three-broker variant). While the load writes and the
copier runs `mirrorflow replicate` back to back (exactly-once and provenance, the defaults), the
schedule applies its faults one after another at their drawn moments:

| fault | what is done |
|---|---|
| kill-run | kill -9 of the run in flight, its whole process group |
| freeze-run | SIGSTOP of the run's process group, SIGCONT after `hold` |
| concurrent-run | a second run of the same flow, started beside the one in flight |
| kill-target-broker | kill -9 of target node `node`, started again on its data after `hold` |
| freeze-target-broker | SIGSTOP of target node `node`, SIGCONT after `hold` |
| kill-source-broker | kill -9 of the source node, started again after `hold` |
| link-blackout | the source link's proxy stopped (SIGSTOP: no byte passes either way) for `hold` |
| freeze-source-broker | SIGSTOP of the source node, SIGCONT after `hold` (micro-batch schedules) |

In micro-batch mode (`mode="micro-batch"`) each run is a window of WINDOW_S seconds
(`mirrorflow replicate --window`), the flow's micro-batch settings otherwise its defaults (a
batch every 250 ms); a concurrent run is a second window beside the one in flight, which takes
its writer slots over as the next window of a DAG does.

The schedule (every moment, kind, hold and node) is drawn from the seed before anything starts,
so a seed replays the same faults; what the faults meet (which run, which transaction) depends on
timing, which is why a schedule that fails prints itself, the runs and the first differences.
Afterwards faults and load stop, clean runs are tried until one succeeds (CLEAN_RUNS at most),
and tests/chaos/invariants.py judges the target. Every wait is bounded; everything started is
stopped, also when something fails half-way.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import time
import traceback
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

from localkafka import QUICK_CLUSTER, LocalKafka, LocalKafkaError
from mirrorflow.config import load_config

from ..integration.kafkatools import create_topics
from ..integration.mirror_setup import mm2_text
from ..reliability.test_kill_nine import MIRRORFLOW
from ..reliability.test_target_crash import DURABLE
from .invariants import Findings, abort_hanging, check, wait_settled
from .load import Load
from .runs import EXPECTED, Copier, Run, SurvivedKill

SHAPES = {"single": 1, "three": 3}
TOPICS, PARTITIONS = ("orders", "payments"), 4
LINK_DELAY_MS = 1.0
# kind -> (weight, shortest hold, longest hold) in seconds
KINDS = {
    "kill-run": (3, 0.0, 0.0),
    "freeze-run": (2, 1.0, 5.0),
    "concurrent-run": (2, 0.0, 0.0),
    "kill-target-broker": (2, 0.5, 6.0),
    "freeze-target-broker": (2, 1.0, 12.0),  # past broker.session.timeout.ms (9 s) at times
    "kill-source-broker": (1, 0.5, 5.0),
    "link-blackout": (1, 1.0, 6.0),
}
MICRO_BATCH_KINDS = {**KINDS, "freeze-source-broker": (1, 1.0, 8.0)}
"""A micro-batch schedule's faults: the batch ones (whose draws stay as they were, so recorded
seeds replay) and a frozen source node."""
MODES = ("batch", "micro-batch")
WINDOW_S = 20
"""How long each window of a micro-batch schedule copies: a run is one window."""
GAP_S = (2.0, 6.0)  # between one fault's end and the next fault's moment
FLOW = (
    f"A->B.topics = {', '.join(TOPICS)}\n"
    "emit.heartbeats.enabled = false\n"
    "tasks.max = 2\n"
    "mirrorflow.range.max.records = 100\n"
    # A killed run's open transaction ends when the next run fences its slot, or when the broker
    # times it out: 10 s instead of librdkafka's 60 s (a client setting; brokers keep their defaults).
    "B.producer.transaction.timeout.ms = 10000\n"
)
# What Injector.apply says when a fault found nothing to hit (a run that had just ended).
MISSED = ("no run in flight", "had ended", "was not running")
CLEAN_RUNS = 5
SETTLE_S = 60.0  # open transactions get this long to end (10 s timeout, and Kafka's 10 s abort sweep)
READY_S = 120.0


@dataclass(frozen=True)
class Fault:
    at: float  # seconds after the schedule starts
    kind: str
    hold: float
    node: int

    def __str__(self) -> str:
        node = f" node {self.node}" if self.kind.endswith("target-broker") else ""
        hold = f" for {self.hold:.1f}s" if self.hold else ""
        return f"{self.at:7.1f}s {self.kind}{node}{hold}"


def kinds(mode: str) -> dict[str, tuple[int, float, float]]:
    return MICRO_BATCH_KINDS if mode == "micro-batch" else KINDS


def draw_schedule(seed: int, seconds: float, brokers: int, mode: str = "batch") -> list[Fault]:
    """The whole schedule, from the seed (and the mode) alone."""
    rng = random.Random(f"chaos-schedule-{seed}")
    drawn = kinds(mode)
    names = list(drawn)
    faults, at = [], rng.uniform(*GAP_S)
    while at < seconds:
        kind = rng.choices(names, [drawn[n][0] for n in names])[0]
        _, shortest, longest = drawn[kind]
        fault = Fault(round(at, 1), kind, round(rng.uniform(shortest, longest), 1), rng.randrange(brokers))
        faults.append(fault)
        at += fault.hold + rng.uniform(*GAP_S)
    return faults


@dataclass
class Outcome:
    seed: int
    shape: str
    mode: str
    seconds: float
    schedule: list[Fault]
    applied: list[str] = field(default_factory=list)  # one line per fault: when and what it met
    runs: list[Run] = field(default_factory=list)
    findings: Findings | None = None
    load_line: str = ""
    problems: list[str] = field(default_factory=list)
    missed: Counter = field(default_factory=Counter)  # kind -> faults that found nothing to hit
    wall_s: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.problems and self.findings is not None and self.findings.ok

    def summary(self) -> str:
        kinds = Counter(f.kind for f in self.schedule)
        reasons = Counter(r.reason for r in self.runs)
        lines = [
            f"seed {self.seed}, {self.mode}, {self.shape} target: {self.seconds:.0f}s schedule, {self.wall_s:.0f}s wall, "
            f"{len(self.schedule)} faults: "
            + ", ".join(
                f"{k} {n}" + (f" ({self.missed[k]} found nothing to hit)" if self.missed[k] else "")
                for k, n in sorted(kinds.items())
            ),
            *(self.findings.lines() if self.findings else ["not checked"]),
            f"runs {len(self.runs)}: " + ", ".join(f"{r} {n}" for r, n in reasons.most_common()),
            self.load_line,
        ]
        odd = [str(r) for r in self.runs if r.reason not in EXPECTED]
        if odd:
            lines.append("runs that ended without an expected reason:\n  " + "\n  ".join(odd))
        return "\n".join(lines)

    def describe(self, limit: int | None = 80) -> str:
        """Everything needed to replay and read a failure; `limit` caps the listed faults and runs."""
        applied = self.applied or [str(f) for f in self.schedule]
        runs = [str(r) for r in self.runs]

        def capped(lines: list[str]) -> str:
            shown = lines if limit is None else lines[:limit]
            more = (
                [f"... {len(lines) - len(shown)} more in logs/outcome.txt"] if len(shown) < len(lines) else []
            )
            return "\n  ".join(shown + more)

        parts = [
            f"replay: seed {self.seed} (benchmarks/chaos.py --seed {self.seed} --target-shape {self.shape} "
            f"--mode {self.mode} --minutes {self.seconds / 60:.2f})",
            self.summary(),
            "problems:\n  " + "\n  ".join(self.problems or ["none"]),
            "first differences:\n  "
            + "\n  ".join((self.findings.differences or ["none"]) if self.findings else ["not checked"]),
            "schedule (drawn: applied):\n  " + capped(applied),
            "runs:\n  " + capped(runs),
        ]
        return "\n".join(parts)


@contextlib.contextmanager
def clusters(workdir: Path, shape: str) -> Iterator[tuple[LocalKafka, LocalKafka]]:
    """The source and the target of `shape`, started side by side, and stopped (resumed first)
    whatever happens."""
    source = LocalKafka(workdir / "source", overrides=QUICK_CLUSTER, link_delay_ms=LINK_DELAY_MS)
    target = LocalKafka(workdir / "target", brokers=SHAPES[shape])  # Kafka's defaults
    try:
        source.launch()
        target.launch()
        source.start(READY_S)
        target.start(READY_S)
        yield source, target
    finally:
        resume(source, target)
        target.stop()
        source.stop()


def resume(*clusters: LocalKafka) -> None:
    """SIGCONT to every node and proxy of `clusters` (a schedule stopped half-way may have frozen one)."""
    for cluster in clusters:
        processes = [node.process for node in cluster.nodes]
        processes.append(cluster.proxy.process if cluster.proxy else None)
        for process in processes:
            if process is not None and process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(process.pid, signal.SIGCONT)


class Injector:
    """Applies one fault and says what it met."""

    def __init__(self, source: LocalKafka, target: LocalKafka, copier: Copier) -> None:
        self.source, self.target, self.copier = source, target, copier

    def apply(self, fault: Fault) -> str:
        if fault.kind == "concurrent-run":
            return self.copier.concurrent()
        if fault.kind in ("kill-run", "freeze-run"):
            run = self._run_in_flight()
            if run is None:
                return "no run in flight"
            if fault.kind == "kill-run":
                return self.copier.kill(run, f"fault {fault}")
            return self.copier.freeze(run, fault.hold)
        if fault.kind == "link-blackout":
            assert self.source.proxy is not None and self.source.proxy.process is not None
            return self._freeze(self.source.proxy.process, fault.hold, "the source link")
        cluster = self.source if "source-broker" in fault.kind else self.target
        node = cluster.nodes[fault.node % len(cluster.nodes)]
        if fault.kind == "freeze-target-broker":
            return self._freeze(node.process, fault.hold, f"target node {node.node_id}")
        if fault.kind == "freeze-source-broker":
            return self._freeze(node.process, fault.hold, f"source node {node.node_id}")
        node.kill()
        time.sleep(fault.hold)
        started = time.monotonic()
        self._restart(cluster, node)
        side = "source" if cluster is self.source else "target"
        ready = time.monotonic() - started
        return f"{side} node {node.node_id} down {fault.hold:.1f}s, ready {ready:.1f}s after its start"

    def _run_in_flight(self) -> Run | None:
        """The loop's run in flight; between two runs, the next one (waited for briefly)."""
        deadline = time.monotonic() + 5
        while (run := self.copier.current()) is None and time.monotonic() < deadline:
            time.sleep(0.05)
        return run

    @staticmethod
    def _freeze(process, hold: float, what: str) -> str:
        if process is None or process.poll() is not None:
            return f"{what} was not running"
        os.kill(process.pid, signal.SIGSTOP)
        try:
            time.sleep(hold)
        finally:
            os.kill(process.pid, signal.SIGCONT)
        return f"froze {what} for {hold:.1f}s"

    @staticmethod
    def _restart(cluster: LocalKafka, node) -> None:
        for attempt in range(2):
            node.launch()
            try:
                cluster.wait_ready(READY_S, nodes=[node])
                return
            except Exception:
                if attempt:
                    raise
                node.kill()

    def heal(self) -> None:
        """Every node and proxy running and unfrozen, every node serving metadata."""
        resume(self.source, self.target)
        for cluster in (self.source, self.target):
            for node in cluster.nodes:
                if not node.running:
                    self._restart(cluster, node)
            cluster.wait_ready(READY_S)


def flow_text(source: LocalKafka, target: LocalKafka, shape: str, mode: str = "batch") -> str:
    """The flow's mm2.properties: the source through its slow link, the target direct."""
    sides = [
        SimpleNamespace(alias="A", bootstrap=source.bootstrap_for("SLOW")),
        SimpleNamespace(alias="B", bootstrap=target.bootstrap),
    ]
    flow = FLOW + ("A->B.mirrorflow.replicate.mode = micro-batch\n" if mode == "micro-batch" else "")
    if shape == "single":
        return mm2_text(sides, ["A->B"], flow)
    return (
        f"clusters = A, B\nA.bootstrap.servers = {sides[0].bootstrap}\n"
        f"B.bootstrap.servers = {target.bootstrap}\nA->B.enabled = true\n" + flow + DURABLE
    )


def apply_schedule(injector: Injector, faults: list[Fault], clock0: float, outcome: Outcome) -> None:
    for fault in faults:
        time.sleep(max(0.0, clock0 + fault.at - time.monotonic()))
        late = time.monotonic() - clock0 - fault.at
        try:
            what = injector.apply(fault)
        except SurvivedKill as exc:
            what = "processes survived the kill"
            outcome.problems.append(f"{fault}: {exc}")
        except LocalKafkaError as exc:  # a broker that would not start again: no fault after it means much
            outcome.problems.append(f"{fault}: {exc}")
            outcome.applied.append(f"{fault}: failed; the schedule stopped here")
            return
        if any(word in what for word in MISSED):
            outcome.missed[fault.kind] += 1
        outcome.applied.append(f"{fault}: {what}" + (f" ({late:.1f}s late)" if late > 1 else ""))


def run_schedule(seed: int, seconds: float, shape: str, workdir: Path, mode: str = "batch") -> Outcome:
    """One schedule of `seconds` on a target of `shape`, its runs batch runs or micro-batch
    windows (`mode`), judged; see the module docstring."""
    started = time.monotonic()
    faults = draw_schedule(seed, seconds, SHAPES[shape], mode)
    outcome = Outcome(seed, shape, mode, seconds, faults)
    logs = workdir / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    with clusters(workdir, shape) as (source, target):
        create_topics(source.bootstrap, *((t, PARTITIONS) for t in TOPICS))
        config = workdir / "mm2.properties"
        config.write_text(flow_text(source, target, shape, mode))
        flow = load_config(config.read_text()).flow("A", "B")
        load = Load(source.bootstrap, TOPICS, PARTITIONS, seed).start()
        clock0 = time.monotonic()
        command = [MIRRORFLOW, "replicate", str(config), "--flow", "A->B"]
        if mode == "micro-batch":
            command += ["--window", str(WINDOW_S)]
        copier = Copier(command, logs, clock0)
        injector = Injector(source, target, copier)
        try:
            copier.start()
            apply_schedule(injector, faults, clock0, outcome)
            time.sleep(max(0.0, clock0 + seconds - time.monotonic()))
            injector.heal()
            load.stop()
            copier.stop()
            for thread in (load, copier):
                if thread.failure is not None:
                    where = "".join(traceback.format_exception(thread.failure)[-3:])
                    outcome.problems.append(f"{type(thread).__name__} failed: {where}")
            still = wait_settled(source.bootstrap, list(TOPICS), SETTLE_S)
            if still:
                # The load's own transactions, left hanging on the source by a source broker's
                # restart: Kafka's command ends them, as an operator would; not the copy's doing.
                outcome.applied += [
                    f"source: {line}" for line in abort_hanging(source.bootstrap, list(TOPICS))
                ]
                still = wait_settled(source.bootstrap, list(TOPICS), SETTLE_S)
            if still:
                outcome.problems.append(f"the source kept transactions open: {still}")
            for _ in range(CLEAN_RUNS):
                if copier.clean().reason == "ok":
                    break
                time.sleep(2)
            else:
                outcome.problems.append(
                    f"none of {CLEAN_RUNS} clean runs succeeded: nothing may be left stuck"
                )
            stuck = [str(r) for r in copier.runs if r.reason == "stuck"]
            outcome.problems += [f"a run did not end: {r}" for r in stuck]
            syncs_on = target.bootstrap if flow.offset_syncs_cluster == "B" else source.bootstrap
            try:
                outcome.findings = check(
                    flow, source.bootstrap, target.bootstrap, syncs_on, TOPICS, PARTITIONS, SETTLE_S
                )
            except Exception as exc:  # the outcome, with its seed and schedule, must still be told
                outcome.problems.append(f"the checker could not read the clusters: {exc!r}")
        finally:
            copier.kill_all()
            resume(source, target)
            with contextlib.suppress(TimeoutError):
                load.stop(30)
            outcome.runs = list(copier.runs)
            outcome.load_line = load.figures.line()
    outcome.wall_s = time.monotonic() - started
    (logs / "outcome.txt").write_text(outcome.describe(limit=None) + "\n")
    return outcome
