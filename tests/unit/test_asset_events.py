"""What a run tells Airflow's Assets: one event per remote topic that received records, named by
OpenLineage's Kafka naming with host:port only, with the run's figures for that topic; none for
a run that copied nothing; the per-flow verified and cut-over events; and the Assets a DAG
author names at parse time are the ones the runs emit."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mirrorflow.airflow.assets import (
    CUTOVER,
    NAME_ROWS,
    VERIFIED,
    cluster_address,
    copies_alias,
    copy_events,
    cutover_asset,
    cutover_event,
    every_pair,
    flow_asset,
    remote_topic_asset,
    topic_asset,
    verified_asset,
    verified_event,
)
from mirrorflow.config import load_config
from mirrorflow.replicate.copy import UnitResult
from mirrorflow.replicate.plan import PartitionSpan, Plan
from mirrorflow.replicate.report import RunReport
from mirrorflow.replicate.window.partitions import PartitionState

SOURCE, TARGET = "src-1.example:9092", "dr-1.example:9093"


def plan_of(spans: list[PartitionSpan], mode: str = "replicate") -> Plan:
    return Plan("manual__1", "A", "B", mode, 1, 10_000, 1 << 20, "exactly-once", 2, tuple(spans))


def copied(span: PartitionSpan, records: int, target_last: int) -> UnitResult:
    return UnitResult(
        span.topic,
        span.partition,
        span.remote_topic,
        span.start,
        span.end,
        progress=span.start + records - 1 if records else span.start - 1,
        records=records,
        bytes=10 * records,
        last_target_offset=target_last,
    )


@pytest.mark.parametrize(
    ("servers", "address"),
    [
        ("kafka-1:9092", "kafka-1:9092"),
        (" kafka-1:9092 , kafka-2:9092", "kafka-1:9092"),
        (
            "SASL_SSL://kafka-1.example.com:9093,SASL_SSL://kafka-2.example.com:9093",
            "kafka-1.example.com:9093",
        ),
        ("SASL_SSL://alice:s3cret@kafka-1:9093", "kafka-1:9093"),
        ("[::1]:9092", "[::1]:9092"),
    ],
)
def test_a_cluster_is_named_by_its_first_host_and_port_alone(servers: str, address: str) -> None:
    assert cluster_address(servers) == address
    assert topic_asset(cluster_address(servers), "A.orders").uri == f"kafka://{address}/A.orders"


def test_a_cluster_without_servers_has_no_address() -> None:
    with pytest.raises(ValueError, match="no bootstrap server"):
        cluster_address("")


def test_a_run_emits_one_event_per_remote_topic_that_received_records() -> None:
    orders = [PartitionSpan("orders", p, "A.orders", 100, 130) for p in range(2)]
    quiet = PartitionSpan("quiet", 0, "A.quiet", 5, 5)
    plan = plan_of([*orders, quiet])
    results = [copied(orders[0], 30, 57), copied(orders[1], 12, 11), copied(quiet, 0, -1)]
    report = RunReport.from_results(plan, results, 0, 1)

    events = copy_events(report, SOURCE, TARGET)

    assert [asset.uri for asset, _ in events] == [f"kafka://{TARGET}/A.orders"]
    ((asset, extra),) = events
    assert asset.name == asset.uri  # `Asset("kafka://...")` in a DAG names the same Asset
    assert extra == {
        "flow": "A->B",
        "run_id": "manual__1",
        "mode": "replicate",
        "micro_batch": False,
        "source": f"kafka://{SOURCE}/orders",
        "records": 42,
        "bytes": 420,
        "partitions": 2,
        "last_offsets": {"0": {"source": 129, "target": 57}, "1": {"source": 111, "target": 11}},
    }
    assert json.loads(json.dumps(extra)) == extra  # what Airflow stores


def test_a_run_that_copied_nothing_emits_nothing() -> None:
    spans = [PartitionSpan("orders", p, "A.orders", 130, 130, progress=129) for p in range(2)]
    report = RunReport.from_results(plan_of(spans), [copied(s, 0, -1) for s in spans], 0, 1)

    assert copy_events(report, SOURCE, TARGET) == []


def test_a_topic_of_many_partitions_lists_the_offsets_of_the_first_ones_and_counts_the_rest() -> None:
    spans = [PartitionSpan("wide", p, "A.wide", 0, 1) for p in range(250)]
    report = RunReport.from_results(plan_of(spans), [copied(s, 1, 0) for s in spans], 0, 1)

    ((_, extra),) = copy_events(report, SOURCE, TARGET, offset_rows=100)

    assert extra["partitions"] == 250 and extra["records"] == 250
    assert list(extra["last_offsets"]) == [str(p) for p in range(100)]
    assert extra["last_offsets_left_out"] == 150


def test_attempts_and_window_batches_keep_the_last_target_offset_a_copy_reached() -> None:
    span = PartitionSpan("orders", 0, "A.orders", 0, 100)
    plan = plan_of([span])
    first = RunReport.from_results(plan, [copied(span, 60, 59)], 0, 1)
    # A retried copy step that found the partition done: it wrote nothing, so no target offset.
    second = RunReport.from_results(plan, [UnitResult("orders", 0, "A.orders", 0, 100, progress=99)], 1, 2)

    merged = RunReport.merge([first, second])

    assert merged.copied_topics()["A.orders"]["partitions"] == {0: {"source": 99, "target": 59}}

    state = PartitionState(span)
    state.fold(span, copied(span, 10, 9), fenced=False, interval_s=1.0)
    state.fold(span, UnitResult("orders", 0, "A.orders", 10, 10, progress=9), fenced=False, interval_s=1.0)
    final = state.final()
    assert final is not None and final.last_target_offset == 9 and final.records == 10


def test_a_passing_verification_emits_the_flows_verified_event(tmp_path: Path) -> None:
    flow = load_config(config_file(tmp_path)).flow("A", "B")
    summary = {
        "run_id": "manual__2",
        "verdict": "verified",
        "until_ms": None,
        "sample": None,
        "totals": {"partitions": 3, "source_records": 90, "matched": 90},
        "topics": {f"t{i:03d}": {} for i in range(NAME_ROWS + 5)},
        "topic_count": NAME_ROWS + 5,
    }

    asset, extra = verified_event(flow, TARGET, summary)

    assert (
        asset == flow_asset(TARGET, "A", VERIFIED) == verified_asset("A", "B", config=config_file(tmp_path))
    )
    assert asset.uri == f"mirrorflow://{TARGET}/A/verified"
    assert (
        extra["verdict"] == "verified" and extra["matched"] == 90 and extra["topics_count"] == NAME_ROWS + 5
    )
    assert len(extra["topics"]) == NAME_ROWS


def test_a_cut_over_that_moved_groups_emits_the_flows_cutover_event_and_a_dry_run_none(
    tmp_path: Path,
) -> None:
    flow = load_config(config_file(tmp_path)).flow("A", "B")
    moved = {"committed": ["billing", "shop"], "dry_run": False, "partitions": 4}

    event = cutover_event(flow, TARGET, "manual__3", moved, "orders|billing")

    assert event is not None
    asset, extra = event
    assert asset == cutover_asset("A", "B", config=config_file(tmp_path))
    assert asset.uri == f"mirrorflow://{TARGET}/A/{CUTOVER}"
    assert extra == {
        "flow": "A->B",
        "run_id": "manual__3",
        "groups": ["billing", "shop"],
        "groups_count": 2,
        "partitions": 4,
        "topics": "orders|billing",
    }
    assert cutover_event(flow, TARGET, "manual__4", {**moved, "dry_run": True}, "orders") is None
    assert cutover_event(flow, TARGET, "manual__5", {**moved, "committed": []}, "orders") is None


def config_file(tmp_path: Path, extra: str = "") -> str:
    path = tmp_path / "mm2.properties"
    path.write_text(
        "clusters = A, B\n"
        f"A.bootstrap.servers = {SOURCE}\n"
        f"B.bootstrap.servers = SSL://{TARGET},dr-2.example:9093\n"
        "B.ssl.key.password = never-in-an-asset\n"
        "A->B.enabled = true\n" + extra
    )
    return str(path)


def test_the_asset_a_dag_names_at_parse_time_is_the_one_runs_emit(tmp_path: Path) -> None:
    """The remote name follows the flow's replication policy; the address comes from the file."""
    default = remote_topic_asset("A", "B", "orders", config=config_file(tmp_path))
    assert default.uri == f"kafka://{TARGET}/A.orders"
    identity = config_file(
        tmp_path, "replication.policy.class = org.apache.kafka.connect.mirror.IdentityReplicationPolicy\n"
    )
    assert remote_topic_asset("A", "B", "orders", config=identity).uri == f"kafka://{TARGET}/orders"
    assert "never-in-an-asset" not in repr(default)


def test_a_target_known_only_from_an_airflow_connection_must_be_named_by_hand(tmp_path: Path) -> None:
    config = config_file(tmp_path, "B.airflow.connection.id = backup_kafka\n")
    with pytest.raises(ValueError, match=r"Airflow connection 'backup_kafka'.*topic_asset\('<host:port>'"):
        remote_topic_asset("A", "B", "orders", config=config)


def test_a_task_whose_flow_comes_from_a_form_declares_every_pairs_alias(tmp_path: Path) -> None:
    path = Path(config_file(tmp_path, "C.bootstrap.servers = c-1:9092\n"))
    path.write_text(path.read_text().replace("clusters = A, B", "clusters = A, B, C"))
    config = load_config(str(path))
    names = [alias.name for alias in every_pair(config, copies_alias)]
    assert len(names) == 6 and "mirrorflow A->B copies" in names and "mirrorflow C->A copies" in names
