"""mirrorflow reads what real MirrorMaker 2 wrote: its checkpoints, offset-syncs and heartbeats;
`mirrorflow status` and the status app show an MM2-run flow's lag and hops; failover of groups
that MM2 replicated uses MM2's translation and says so."""

from __future__ import annotations

import json

from click.testing import CliRunner

from mirrorflow.cli import main
from mirrorflow.config import load_config
from mirrorflow.control.checkpoints import read_checkpoints, remote_consumer_offsets
from mirrorflow.control.mirror_client import MirrorClient
from mirrorflow.control.mirror_status import mirror_status
from mirrorflow.control.translation.sync_index import read_sync_index
from mirrorflow.ops.failover import COMMITTED, failover

from ..integration.kafkatools import create_topics, read_all
from ..integration.status_helpers import status_client
from ..integration.test_failover_helpers import consume_rest, produce_numbered
from .interop import commit_groups, contents, run_java, write_properties
from .mm2_process import end_offsets, reached, source_offsets

PER_PARTITION = 1000
GROUPS = {
    "caught-up": {("orders", 0): PER_PARTITION, ("orders", 1): PER_PARTITION},
    "lagging": {("orders", 0): 437, ("orders", 1): 612},
    "near-end": {("orders", 0): 950, ("orders", 1): 999},
}
SYNCS = "mm2-offset-syncs.B.internal"


def mm2_finished(a, b) -> bool:
    """MM2 copied everything, stored its offsets, synced the last records (its delayed syncs are
    written at each offset flush), checkpointed every group, and A's heartbeats reached B."""
    full = {p: PER_PARTITION for p in (0, 1)}
    if not reached(end_offsets(b.bootstrap, "A.orders"), full):
        return False
    if not reached(source_offsets(b.bootstrap, "A"), {("orders", p): PER_PARTITION - 1 for p in (0, 1)}):
        return False
    synced = read_sync_index({"bootstrap.servers": a.bootstrap}, SYNCS)
    if any(synced.run("orders", p).ups[-1:] != (PER_PARTITION - 1,) for p in (0, 1)):
        return False
    checkpoints = read_checkpoints({"bootstrap.servers": b.bootstrap}, "A.checkpoints.internal")
    wanted = {(g, "A.orders", p) for g, parts in GROUPS.items() for _, p in parts}
    return wanted <= set(checkpoints) and bool(end_offsets(b.bootstrap, "A.heartbeats").get(0))


def test_mirrorflow_reads_mm2s_state_shows_its_flow_and_fails_its_groups_over(
    kafka_clusters, mirror_maker, tmp_path
) -> None:
    a, b = kafka_clusters(2)
    # Every herder runs (no --clusters): B->A writes A's `heartbeats`, which A->B carries to B.
    # A's `heartbeats` exists before MM2 starts, as on a cluster MM2 already serves: a topic that
    # appears later makes MM2 reconfigure its source tasks, and a restarted task copies again
    # what it copied after its last offset flush.
    properties = write_properties(
        tmp_path,
        [a, b],
        "emit.checkpoints.interval.seconds = 1\nA.offset.flush.interval.ms = 1000\nB.offset.flush.interval.ms = 1000\n",
    )
    config = load_config(str(properties))
    create_topics(a.bootstrap, ("orders", 2), ("heartbeats", 1, {"cleanup.policy": "compact"}))
    produce_numbered(a.bootstrap, "orders", 2, 2 * PER_PARTITION)
    commit_groups(a.bootstrap, GROUPS)

    mm2 = mirror_maker(properties)
    mm2.wait_for(lambda: mm2_finished(a, b), "replicate, sync, checkpoint and heartbeat", 120)

    # MM2 copied every record once: offsets on B are those on A.
    source = {p: read_all(a.bootstrap, "orders", p) for p in (0, 1)}
    remote = {p: read_all(b.bootstrap, "A.orders", p) for p in (0, 1)}
    assert {p: contents(records) for p, records in remote.items()} == {
        p: contents(r) for p, r in source.items()
    }
    # Offset-syncs: MM2's sparse syncs decode, and each names a true pair of offsets.
    syncs = read_sync_index({"bootstrap.servers": a.bootstrap}, SYNCS)
    for p in (0, 1):
        run = syncs.run("orders", p)
        # The first record copied and (promoted at an offset flush) the last one always get a sync;
        # in between MM2 syncs every offset.lag.max records, fewer when its sync producer is busy.
        assert (run.ups[0], run.ups[-1]) == (0, PER_PARTITION - 1), run
        for up, down in zip(run.ups, run.downs, strict=True):
            assert source[p][up].content() == remote[p][down].content()
    # Checkpoints: MM2's, read by mirrorflow's reader and MirrorClient's; none skips a record.
    # (A lagging group's checkpoint can lie far behind it: MM2 keeps 64 syncs per partition.)
    checkpoints = read_checkpoints({"bootstrap.servers": b.bootstrap}, "A.checkpoints.internal")
    for group, parts in GROUPS.items():
        expected = {}
        for (_, p), upstream in parts.items():
            checkpoint = checkpoints[(group, "A.orders", p)].checkpoint
            assert checkpoint.upstream_offset == upstream
            # MM2's rule on its own syncs: one past a kept sync at or below the group's offset.
            run = syncs.run("orders", p)
            mm2_rule = {d + (u != upstream) for u, d in zip(run.ups, run.downs, strict=True) if u <= upstream}
            assert checkpoint.downstream_offset in mm2_rule and checkpoint.downstream_offset <= upstream
            expected[("A.orders", p)] = (checkpoint.downstream_offset, "")
        assert remote_consumer_offsets({"bootstrap.servers": b.bootstrap}, "A", group) == expected
    # Heartbeats: MirrorClient's answers on B and the newest heartbeat from A.
    on_b = MirrorClient.for_cluster(config, "B")
    assert on_b.heartbeat_topics() == {"heartbeats", "A.heartbeats"}
    assert on_b.upstream_clusters() == {"A"} and on_b.replication_hops("A") == 1
    assert on_b.checkpoint_topics() == {"A.checkpoints.internal"}

    mm2.stop()
    produce_numbered(a.bootstrap, "orders", 2, 60, start=2 * PER_PARTITION)  # 30 more per partition
    status = mirror_status(config)
    flow = status.flow("A->B")
    assert flow.last_run is None, "mirrorflow never ran this flow"
    # Heartbeat topics are replicated too; MM2's last heartbeats at shutdown may not be copied.
    assert flow.lag["orders"] == 60 and flow.lag["heartbeats"] in (0, 1)
    (upstream,) = status.cluster("B").upstreams
    assert (upstream.alias, upstream.hops, upstream.via) == ("A", 1, "A.heartbeats")
    assert status.cluster("B").heartbeat_jobs.keys() == {"A->B"}
    assert status.cluster("A").heartbeat_jobs.keys() == {"B->A"}

    shown = CliRunner().invoke(main, ["status", str(properties), "--json"])
    assert shown.exit_code == 0, shown.output
    data = json.loads(shown.output)
    assert next(f for f in data["flows"] if f["flow"] == "A->B")["lag"]["orders"] == 60
    table = CliRunner().invoke(main, ["status", str(properties)])
    assert table.exit_code == 0, table.output
    row = next(line for line in table.output.splitlines() if "A->B" in line and "no mirrorflow" in line)
    assert row.split("│")[-2].strip() == str(sum(flow.lag.values())), "the lag now column"

    with status_client(config) as app:
        page_data, metrics = app.get("/status").json(), app.get("/metrics").text
    assert next(f for f in page_data["flows"] if f["flow"] == "A->B")["lag"]["orders"] == 60
    b_status = next(c for c in page_data["clusters"] if c["alias"] == "B")
    assert [(u["alias"], u["hops"]) for u in b_status["upstreams"]] == [("A", 1)]
    assert 'mirrorflow_flow_progress_lag_records{flow="A->B",topic="orders"} 60.0' in metrics
    assert 'mirrorflow_replication_hops{cluster="B",upstream="A"} 1.0' in metrics

    # Failover from MM2's own checkpoints (A down, or --from-checkpoints) would commit what MM2 wrote.
    from_checkpoints = failover(config, "A", "B", "lagging", from_checkpoints=True, dry_run=True)
    assert {(r.partition, r.target_offset, r.status) for r in from_checkpoints.rows} == {
        (p, checkpoints[("lagging", "A.orders", p)].checkpoint.downstream_offset, "checkpoint")
        for p in (0, 1)
    }
    # Live failover translates with MM2's rule on MM2's syncs, and says so.
    result = failover(config, "A", "B", "caught-up|lagging|near-end")
    assert result.committed == sorted(GROUPS) and not result.refused
    assert {(r.status, r.action) for r in result.rows} == {("mm2", COMMITTED)}
    assert all("MirrorMaker 2" in r.note for r in result.rows)
    assert any("MirrorMaker 2" in w for w in result.warnings)
    # What Java consumers (and MM2) will find on B: the offsets, and the source's empty metadata as
    # Kafka's empty string, not confluent-kafka's C terminator.
    assert run_java("CommittedOffsets.java", b.bootstrap, *sorted(GROUPS)) == sorted(
        f"{r.group} A.orders {r.partition} {r.target_offset} " for r in result.rows
    )
    redelivered = {}
    for group, parts in GROUPS.items():
        # A caught-up group has nothing left to read (and a consumer could not commit nothing).
        after = consume_rest(b.bootstrap, group, ["A.orders"]) if group != "caught-up" else []
        for (_, p), upstream in parts.items():
            read = [g.offset for g in after if g.partition == p]
            row = next(r for r in result.rows if (r.group, r.partition) == (group, p))
            # Nothing skipped: the group reads on B from the translated offset to the end of what MM2 copied.
            assert read == list(range(row.target_offset, PER_PARTITION)), (group, p)
            # MM2's rule on every sync MM2 wrote: one past the newest at or below the group's offset.
            run = syncs.run("orders", p)
            below = max(i for i, u in enumerate(run.ups) if u <= upstream)
            assert row.target_offset == run.downs[below] + (run.ups[below] != upstream), (group, p)
            mm2_checkpoint = checkpoints[(group, "A.orders", p)].checkpoint.downstream_offset
            assert mm2_checkpoint <= row.target_offset, "every MM2 sync is used, not only the 64 MM2 keeps"
            redelivered[(group, p)] = upstream - row.target_offset
    assert min(redelivered.values()) >= 0
    assert redelivered[("caught-up", 0)] == redelivered[("caught-up", 1)] == 0
