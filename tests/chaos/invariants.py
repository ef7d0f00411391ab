"""What the target must hold once a fault schedule has ended and a clean run has succeeded.

Each target record is mapped to the source record it copies through its provenance header
(mirrorflow.policy.provenance), never by position or content: two records with equal bytes
would hide a duplicate, and a position says nothing once a run has been killed mid-transaction.
Per source partition, with read_committed readers on both clusters:

- every source record is on the target exactly once, in source order, equal in key, value,
  headers (mirrorflow's own aside) and timestamp; the target holds nothing else (no aborted
  source record, nothing without this flow's provenance);
- every offset-sync points at what it claims: the committed target record at its downstream
  offset copies its upstream offset, and so do the records of the run its `mirrorflow.run`
  header states (docs/concepts/translation.md: `d-n .. d-1` copy `u-n .. u-1`). Source-side
  syncs are sent only once their records are visible (docs/concepts/exactly-once.md), so the
  relation holds for every sync, a zombie's late one included; a partition may lack syncs
  (a crash can lose the last ones), which is counted, not judged;
- committed progress names a source offset no record past which is missing on the target, and
  no offset the source never had;
- nothing is left open: each remote, progress and (on the target) offset-syncs partition has
  its last stable offset at its high watermark, once the writers' transaction timeout has
  passed.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field

from confluent_kafka import IsolationLevel, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from mirrorflow.config import FlowConfig
from mirrorflow.mm2.formats import OffsetSync
from mirrorflow.policy.provenance import ProvenanceError, read_provenance
from mirrorflow.replicate.offset_syncs import run_of
from mirrorflow.replicate.progress import ProgressReadError, read_progress

from ..integration.kafkatools import Rec, kafka_transactions, read_topic
from ..reliability.test_kill_nine import open_transactions

SHOWN = 8  # differences printed per kind


@dataclass
class Findings:
    records: int = 0  # source records (read_committed) checked
    lost: int = 0
    duplicated: int = 0
    out_of_order: int = 0
    altered: int = 0
    foreign: int = 0  # target records that copy no committed source record of their partition
    syncs: int = 0
    syncs_wrong: int = 0
    unsynced: list[str] = field(default_factory=list)  # partitions without any sync (not a failure)
    progress_wrong: int = 0
    left_open: list[str] = field(default_factory=list)
    differences: list[str] = field(default_factory=list)
    _shown: Counter = field(default_factory=Counter)

    def note(self, kind: str, text: str) -> None:
        self._shown[kind] += 1
        if self._shown[kind] <= SHOWN:
            self.differences.append(f"{kind}: {text}")

    @property
    def ok(self) -> bool:
        wrong = (self.lost, self.duplicated, self.out_of_order, self.altered, self.foreign)
        return not any(wrong) and not self.syncs_wrong and not self.progress_wrong and not self.left_open

    def lines(self) -> list[str]:
        return [
            f"records checked {self.records:,}: lost {self.lost}, duplicated {self.duplicated}, out of order "
            f"{self.out_of_order}, altered {self.altered}, foreign {self.foreign}",
            f"offset-syncs checked {self.syncs:,}: wrong {self.syncs_wrong}; partitions without a sync: "
            f"{', '.join(self.unsynced) or 'none'}",
            f"progress wrong in {self.progress_wrong} partitions; "
            f"left open: {', '.join(self.left_open) or 'nothing'}",
        ]


def _shown(record: Rec) -> str:
    value = (record.value or b"")[:40]
    return f"offset {record.offset} key={record.key!r} value={value!r}"


def check_partition(
    found: Findings, where: str, source: list[Rec], target: list[Rec], topic: str, partition: int
) -> dict[int, int]:
    """Exactly once, in order, byte-equal; returns target offset -> source offset it copies."""
    by_offset = {r.offset: r for r in source}
    copies: Counter = Counter()
    mapping: dict[int, int] = {}
    highest = -1
    for record in target:
        try:
            provenance = read_provenance(record.headers)
        except ProvenanceError as exc:
            provenance, error = None, str(exc)
        else:
            error = "no provenance header"
        if provenance is None or (provenance.source_topic, provenance.source_partition) != (topic, partition):
            found.foreign += 1
            found.note(
                "foreign", f"{where} target {_shown(record)}: {error if provenance is None else provenance}"
            )
            continue
        upstream = provenance.source_offset
        mapping[record.offset] = upstream
        copies[upstream] += 1
        original = by_offset.get(upstream)
        if copies[upstream] > 1:
            found.duplicated += 1
            found.note(
                "duplicated", f"{where} source offset {upstream} again at target offset {record.offset}"
            )
        elif upstream < highest:
            found.out_of_order += 1
            found.note(
                "out of order", f"{where} source offset {upstream} at target {record.offset}, after {highest}"
            )
        highest = max(highest, upstream)
        if original is None:
            found.foreign += 1
            found.note(
                "foreign",
                f"{where} target offset {record.offset} copies source offset {upstream}, "
                "which read_committed readers of the source do not see",
            )
        elif original.content() != record.content():
            found.altered += 1
            found.note("altered", f"{where} source {_shown(original)} became target {_shown(record)}")
    found.records += len(source)
    for record in source:
        if record.offset not in copies:
            found.lost += 1
            found.note("lost", f"{where} source {_shown(record)}")
    return mapping


def check_syncs(found: Findings, syncs: list[Rec], mappings: dict[tuple[str, int], dict[int, int]]) -> None:
    """Each sync, and each record of the run it states, points at the copy of its upstream offset."""
    synced = set()
    for record in syncs:
        sync = OffsetSync.decode(record.key, record.value)
        mapping = mappings.get((sync.topic, sync.partition))
        if mapping is None:
            continue  # a topic this schedule does not write
        synced.add((sync.topic, sync.partition))
        found.syncs += 1
        run = run_of(record.headers) or 0
        for back in range(run + 1):
            there = mapping.get(sync.downstream_offset - back)
            if there != sync.upstream_offset - back:
                found.syncs_wrong += 1
                found.note(
                    "offset-sync",
                    f"{sync} (run {run}, sync record {record.offset}): "
                    f"downstream {sync.downstream_offset - back} "
                    f"holds {'no committed copy' if there is None else f'the copy of {there}'}, "
                    f"not of {sync.upstream_offset - back}",
                )
                break
    found.unsynced = [f"{t}-{p}" for (t, p) in sorted(set(mappings) - synced)]


def check_progress(
    found: Findings,
    progress: dict[tuple[str, int], int],
    ends: dict[tuple[str, int], int],
    sources: dict[tuple[str, int], list[Rec]],
    mappings: dict[tuple[str, int], dict[int, int]],
) -> None:
    """Progress never claims a source offset whose record is not visible on the target, nor one
    past the source's end; after a clean run it stands at (or past, over markers) the last record."""
    for (topic, partition), records in sources.items():
        where = f"{topic}-{partition}"
        stored = progress.get((topic, partition))
        copied = set(mappings[(topic, partition)].values())
        last = records[-1].offset if records else -1
        missing = [
            r.offset for r in records if stored is not None and r.offset <= stored and r.offset not in copied
        ]
        if stored is None and records:
            problem = "no progress stored"
        elif stored is not None and stored >= ends[(topic, partition)]:
            problem = f"progress {stored} is past the source's end {ends[(topic, partition)]}"
        elif missing:
            problem = (
                f"progress {stored} is ahead of visible data: source offset {missing[0]} is not on the target"
            )
        elif stored is not None and stored < last:
            problem = f"progress {stored} is behind the last source record {last} after a clean run"
        else:
            continue
        found.progress_wrong += 1
        found.note("progress", f"{where}: {problem}")


def high_watermarks(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    request = {TopicPartition(topic, p): OffsetSpec.latest() for p in range(partitions)}
    answers = admin.list_offsets(request, isolation_level=IsolationLevel.READ_UNCOMMITTED, request_timeout=10)
    return {tp.partition: future.result(15).offset for tp, future in answers.items()}


def partition_count(bootstrap: str, topic: str) -> int:
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    metadata = admin.list_topics(topic, timeout=10).topics.get(topic)
    return 0 if metadata is None or metadata.error is not None else len(metadata.partitions)


def wait_settled(bootstrap: str, topics: list[str], timeout_s: float) -> list[str]:
    """Until no partition of `topics` has an open transaction (bounded); what is still open."""
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    counts = {topic: partition_count(bootstrap, topic) for topic in topics}
    deadline = time.monotonic() + timeout_s
    while True:
        still = [f"{t} ({n} partitions)" for t, c in counts.items() if (n := open_transactions(admin, t, c))]
        if not still or time.monotonic() > deadline:
            return still
        time.sleep(0.5)


def check(
    flow: FlowConfig,
    source: str,
    target: str,
    syncs_on: str,
    topics: tuple[str, ...],
    partitions: int,
    settle_s: float,
) -> Findings:
    """Everything above, for `topics` of `partitions` each; `syncs_on` is the bootstrap of the
    cluster that holds the flow's offset-syncs, `settle_s` how long open transactions may take to end."""
    found = Findings()
    internal = [flow.offset_storage_topic] + ([flow.offset_syncs_topic] if syncs_on == target else [])
    found.left_open = wait_settled(
        target, [flow.policy.format_remote_topic(flow.source, t) for t in topics] + internal, settle_s
    )
    sources, ends, mappings = {}, {}, {}
    for topic in topics:
        remote = flow.policy.format_remote_topic(flow.source, topic)
        read, copied = read_topic(source, topic, partitions), read_topic(target, remote, partitions)
        hwm = high_watermarks(source, topic, partitions)
        for p in range(partitions):
            sources[(topic, p)], ends[(topic, p)] = read[p], hwm[p]
            mappings[(topic, p)] = check_partition(found, f"{topic}-{p}", read[p], copied[p], topic, p)
    check_syncs(found, read_topic(syncs_on, flow.offset_syncs_topic, 1)[0], mappings)
    try:
        progress = read_progress(
            {"bootstrap.servers": target}, flow.offset_storage_topic, flow.source, timeout_s=settle_s
        )
    except ProgressReadError as exc:
        found.progress_wrong += 1
        found.note("progress", f"unreadable: {exc}")
    else:
        check_progress(found, progress, ends, sources, mappings)
    return found


def abort_hanging(bootstrap: str, topics: list[str]) -> list[str]:
    """End, as an operator would with Kafka's own command, the transactions still open on the
    source after the settle time: the load's, whose markers a killed and restarted source broker
    lost (Kafka's coordinator skips partitions it finds no leader for just after a restart). No
    client can end them (the transaction timed out on the coordinator, which forgot it), and a
    replicator of the source must stop in front of them, as MM2 would. Returns one line per
    partition ended."""
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    ended = []
    for topic in topics:
        count = partition_count(bootstrap, topic)
        request = {TopicPartition(topic, p): OffsetSpec.latest() for p in range(count)}
        stable = admin.list_offsets(
            request, isolation_level=IsolationLevel.READ_COMMITTED, request_timeout=10
        )
        end = admin.list_offsets(request, isolation_level=IsolationLevel.READ_UNCOMMITTED, request_timeout=10)
        for tp in request:
            start, high = stable[tp].result(10).offset, end[tp].result(10).offset
            if start >= high:
                continue
            done = kafka_transactions(
                bootstrap,
                "abort",
                "--topic",
                topic,
                "--partition",
                str(tp.partition),
                "--start-offset",
                str(start),
            )
            ended.append(f"{topic}-{tp.partition} from offset {start}: exit {done.returncode}")
    return ended
