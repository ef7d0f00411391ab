"""Offset translation: mirrorflow's exactness after failover on compacted and transactional data, and
the time of a checkpoint pass.

Part 1 copies two topics from cluster A to cluster B (single-node Apache Kafka clusters started
by localkafka) with mirrorflow (a gap-free topic, and a compacted transactional one with aborted
transactions, compacted by Kafka's log cleaner between runs), in several replicate runs, then
translates group positions with mirrorflow's translator (dense offset-syncs, then
provenance-header probes) and counts records re-delivered or skipped per group and partition.
Group positions are those real consumers commit (one past a consumed record): at the end of the
partition, within its last 100 records (offset.lag.max), or anywhere (lagging). MirrorMaker 2's
own figures on the same kind of data come from real MM2 in benchmarks/vs_mm2.py.

Part 2 commits offsets for G groups x P partitions on A and times one checkpoint pass (the
first writes every checkpoint; the second finds nothing new and writes none).

Run: `.venv/bin/python benchmarks/translation.py` (options: --help).
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from bisect import bisect_left
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from rich.console import Console
from rich.table import Table

from localkafka import QUICK_CLUSTER, LocalKafka
from localkafka.compaction import compact
from mirrorflow.clients import FlowClients
from mirrorflow.config import FlowConfig, load_config
from mirrorflow.control.checkpoints import checkpoint_pass
from mirrorflow.control.groups import Committed, commit_offsets
from mirrorflow.control.translation.partition_pass import Translator
from mirrorflow.kafka import admin_client, read_partition
from mirrorflow.policy.provenance import read_provenance
from mirrorflow.replicate.copy import copy_unit
from mirrorflow.replicate.planner import make_plan
from mirrorflow.replicate.runner import copy_job_for

# Group positions: how many of the partition's last records a group may still have to read.
KINDS = {"at the end": 1, "caught-up (last 100)": 100, "lagging (anywhere)": 10**12}

CONFIG = """\
clusters = A, B
A.bootstrap.servers = {a}
B.bootstrap.servers = {b}
A->B.enabled = true
replication.factor = 1
offset-syncs.topic.replication.factor = 1
checkpoints.topic.replication.factor = 1
offset.storage.replication.factor = 1
"""


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=4, help="partitions per topic in part 1")
    parser.add_argument("--records", type=int, default=20_000, help="records per partition in part 1")
    parser.add_argument("--runs", type=int, default=4, help="replicate runs the records are copied in")
    parser.add_argument("--groups", type=int, default=200, help="group positions per partition and kind")
    parser.add_argument("--pass-groups", type=int, default=1000, help="groups in part 2")
    parser.add_argument("--pass-partitions", type=int, default=100, help="partitions in part 2")
    parser.add_argument("--seed", type=int, default=1)
    return parser.parse_args()


def create(bootstrap: str, topic: str, partitions: int, config: dict[str, str] | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1, config=config or {})])[topic].result(30)


def produce_plain(bootstrap: str, partitions: int, count: int, start: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "enable.idempotence": True})
    for p in range(partitions):
        for i in range(start, start + count):
            _produce(producer, "plain", f"k{i}".encode(), f"plain-{p}-{i}".encode(), p)
    producer.flush(60)


def produce_ledger(bootstrap: str, partitions: int, count: int, start: int) -> None:
    """Transactions of 50 records, every fourth aborted; keys repeat so compaction leaves gaps."""
    producer = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": f"ledger-{start}", "linger.ms": 20}
    )
    producer.init_transactions(30)
    for batch, first in enumerate(range(start, start + count, 50)):
        producer.begin_transaction()
        for p in range(partitions):
            for i in range(first, min(first + 50, start + count)):
                key = f"k{i % 97}" if i % 3 == 0 else f"u{i}"
                _produce(producer, "ledger", key.encode(), f"ledger-{p}-{i}".encode(), p)
        if batch % 4 == 3:
            # Aborted records reach the log (flushed first), so readers meet real gaps; an abort
            # of records still queued also trips librdkafka issue #4849 (INVALID_TXN_STATE).
            producer.flush(30)
            producer.abort_transaction(30)
        else:
            producer.commit_transaction(30)


def _produce(producer: Producer, topic: str, key: bytes, value: bytes, partition: int) -> None:
    while True:
        try:
            producer.produce(topic, key=key, value=value, partition=partition)
            return
        except BufferError:
            producer.poll(0.05)


def replicate(flow: FlowConfig, clients: FlowClients, run: int) -> None:
    plan = make_plan(flow, clients, run_id=f"bench-{run}").plan
    job = copy_job_for(flow, clients, plan)
    for unit in plan.units():
        result = copy_unit(job, unit)
        if not result.ok:
            raise SystemExit(f"copy of {unit.topic}-{unit.partition} failed: {result.error}")


@dataclass
class Copied:
    """One partition's copies on the target, in order: target offsets and their source offsets."""

    offsets: list[int] = field(default_factory=list)
    sources: list[int] = field(default_factory=list)

    def misplaced(self, upstream: int, downstream: int) -> tuple[int, int]:
        """(re-delivered, skipped) records for a group at `upstream` that resumes at `downstream`."""
        first_unread = bisect_left(self.sources, upstream)
        first_resumed = bisect_left(self.offsets, downstream)
        return max(0, first_unread - first_resumed), max(0, first_resumed - first_unread)


def copies_on_target(bootstrap: str, remote: str, partition: int) -> Copied:
    copied = Copied()
    for message in read_partition({"bootstrap.servers": bootstrap}, remote, partition):
        provenance = read_provenance(message.headers())
        copied.offsets.append(message.offset())
        copied.sources.append(provenance.source_offset)
    return copied


@dataclass
class Tally:
    groups: int = 0
    redelivered: list[int] = field(default_factory=list)
    skipped: int = 0
    no_checkpoint: int = 0

    def add(self, misplaced: tuple[int, int] | None) -> None:
        self.groups += 1
        if misplaced is None:
            self.no_checkpoint += 1
            return
        self.redelivered.append(misplaced[0])
        self.skipped += misplaced[1]

    def cells(self) -> list[str]:
        values = self.redelivered or [0]
        return [
            f"{sum(values):,}",
            f"{sum(values) / len(values):.1f}",
            f"{max(values):,}",
            f"{self.skipped:,}",
            f"{self.no_checkpoint:,}",
        ]


def part_one(args: argparse.Namespace, a: LocalKafka, b: LocalKafka, console: Console) -> Table:
    rng = random.Random(args.seed)
    config = load_config(CONFIG.format(a=a.bootstrap, b=b.bootstrap))
    flow = config.flow("A", "B")
    clients = FlowClients.resolve(flow)
    create(a.bootstrap, "plain", args.partitions)
    create(a.bootstrap, "ledger", args.partitions, {"cleanup.policy": "compact"})
    per_run = args.records // args.runs
    started = time.monotonic()
    for run in range(args.runs):
        produce_plain(a.bootstrap, args.partitions, per_run, run * per_run)
        produce_ledger(a.bootstrap, args.partitions, per_run, run * per_run)
        # Kafka's cleaner compacts what is before each partition's roll record (see localkafka.compaction).
        compact(a, "ledger", {q: (f"roll-{run}".encode(), b"") for q in range(args.partitions)})
        replicate(flow, clients, run)
    console.print(
        f"part 1: {2 * args.partitions} partitions x {args.records:,} records copied in {args.runs} runs "
        f"({time.monotonic() - started:.1f} s)"
    )

    table = Table(title="mirrorflow: records re-delivered after failover (per group and partition)")
    for column in (
        "topic",
        "groups",
        "re-delivered",
        "mean",
        "max",
        "skipped",
        "no checkpoint",
    ):
        table.add_column(column, justify="right")
    for topic in ("plain", "ledger"):
        copies = {p: copies_on_target(b.bootstrap, f"A.{topic}", p) for p in range(args.partitions)}
        tallies = {kind: Tally() for kind in KINDS}
        with Translator(flow, clients) as translator:
            for p, copied in copies.items():
                count = len(copied.sources)
                for kind, behind in KINDS.items():
                    for _ in range(args.groups):
                        upstream = copied.sources[count - 1 - rng.randrange(0, min(behind, count))] + 1
                        ours = translator.translate(topic, p, upstream)
                        tallies[kind].add(
                            copied.misplaced(upstream, ours.downstream_offset) if ours else None
                        )
            probes = translator.probes
        label = "gap-free" if topic == "plain" else "compacted + aborted txns"
        for kind, tally in tallies.items():
            table.add_row(f"{topic} ({label})", f"{tally.groups:,} {kind}", *tally.cells())
        console.print(f"  {topic}: mirrorflow translated with {probes} probe fetches")
    return table


def part_two(args: argparse.Namespace, a: LocalKafka, b: LocalKafka, console: Console) -> Table:
    rng = random.Random(args.seed)
    config = load_config(
        CONFIG.format(a=a.bootstrap, b=b.bootstrap).replace(
            "A->B.enabled", "A->B.topics = load\nA->B.enabled"
        )
    )
    flow = config.flow("A", "B")
    clients = FlowClients.resolve(flow)
    partitions, records = args.pass_partitions, 100
    create(a.bootstrap, "load", partitions)
    producer = Producer({"bootstrap.servers": a.bootstrap, "linger.ms": 20})
    for p in range(partitions):
        for i in range(records):
            _produce(producer, "load", None, f"load-{p}-{i}".encode(), p)
    producer.flush(60)
    started = time.monotonic()
    replicate(flow, clients, 0)
    copied_s = time.monotonic() - started
    offsets = {
        f"group-{g:04d}": {
            ("load", p): Committed(rng.randrange(0, records + 1), "") for p in range(partitions)
        }
        for g in range(args.pass_groups)
    }
    started = time.monotonic()
    outcomes = commit_offsets(admin_client({"bootstrap.servers": a.bootstrap}), offsets)
    failed = [o for o in outcomes.values() if o.error]
    if failed:
        raise SystemExit(f"committing group offsets failed: {failed[0].error}")
    console.print(
        f"part 2: {partitions} partitions x {records} records copied in {copied_s:.1f} s; "
        f"{args.pass_groups:,} groups x {partitions} partitions committed in {time.monotonic() - started:.1f} s"
    )
    table = Table(title=f"One checkpoint pass: {args.pass_groups:,} groups x {partitions} partitions")
    for column in (
        "pass",
        "group partitions",
        "checkpoints written",
        "repeats skipped",
        "probe fetches",
        "seconds",
    ):
        table.add_column(column, justify="right")
    for name in ("first (all new)", "second (nothing changed)"):
        report = checkpoint_pass(flow, clients)
        table.add_row(
            name,
            f"{report.partitions:,}",
            f"{report.emitted:,}",
            f"{report.repeats_skipped:,}",
            str(report.probes),
            f"{report.seconds:.2f}",
        )
    return table


def main() -> int:
    args = parse_args()
    console = Console(width=150)
    console.print("command: " + " ".join([".venv/bin/python", "benchmarks/translation.py", *sys.argv[1:]]))
    with tempfile.TemporaryDirectory(prefix="mirrorflow-translation-") as tmp:
        clusters = [
            LocalKafka(Path(tmp) / name, overrides=QUICK_CLUSTER) for name in ("a1", "b1", "a2", "b2")
        ]
        with clusters[0] as a, clusters[1] as b:
            first = part_one(args, a, b, console)
        with clusters[2] as a, clusters[3] as b:
            second = part_two(args, a, b, console)
    console.print(first)
    console.print(second)
    return 0


if __name__ == "__main__":
    sys.exit(main())
