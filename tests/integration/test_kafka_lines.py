"""The migration users run most: from a cluster on an older Kafka line to one on the newest, and
back. Source A runs each older line kafka/pom.xml pins (kafka.test.lines: 3.9 and an older 3.x),
target B the main line (4.4), both with Kafka's StandardAuthorizer; every step runs on them as it
would in production: an exactly-once copy, topic config and ACL sync, verify, checkpoints and
failover (exact), then failback onto the old cluster, exact again.

The clusters are the module's own, started once per line and shared by its tests (unique names).
"""

from __future__ import annotations

import json
import subprocess
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    OffsetSpec,
    ResourcePatternType,
    ResourceType,
)

from localkafka import runtime
from mirrorflow.cli import main
from mirrorflow.config import load_config
from mirrorflow.control.checkpoints import emit_checkpoints, remote_consumer_offsets
from mirrorflow.control.topic_sync import run_sync_topic_acls, run_sync_topic_configs
from mirrorflow.kafka_offsets import list_offsets
from mirrorflow.ops.cluster_versions import METADATA_VERSIONS
from mirrorflow.ops.failover import failover
from mirrorflow.ops.verification import service as verify_service

from ..conftest import WITH_AUTHORIZER, Cluster, cluster_pair
from .kafkatools import create_topics, produce_aborted
from .mirror_setup import mm2_text, replicate_once
from .test_failover_helpers import committed, consume, consume_rest, produce_numbered

OLD_LINES = [line.name for line in runtime.test_lines()]
JAVA = Path(__file__).with_name("java")


@pytest.fixture(scope="module", params=OLD_LINES)
def line_pair(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[list[Cluster]]:
    """A on the older line `request.param`, B on the main line, both with an authorizer."""
    with cluster_pair(tmp_path_factory, WITH_AUTHORIZER, lines=(request.param, None)) as (old, new):
        yield [Cluster("A", old.bootstrap, old), Cluster("B", new.bootstrap, new)]


def assert_read_once(before: list, after: list, expected: list[str]) -> None:
    seen = Counter([g.payload for g in before] + [g.payload for g in after])
    assert not [p for p, n in seen.items() if n > 1], "records read twice"
    assert set(seen) == set(expected), f"never read: {sorted(set(expected) - set(seen))[:10]}"


def _topic_acl(topic: str, principal: str) -> AclBinding:
    return AclBinding(
        ResourceType.TOPIC,
        topic,
        ResourcePatternType.LITERAL,
        principal,
        "*",
        AclOperation.READ,
        AclPermissionType.ALLOW,
    )


def test_the_metadata_version_names_are_kafkas_own() -> None:
    """cluster_versions.METADATA_VERSIONS is what the pinned Kafka's MetadataVersion says."""
    jars = ":".join(str(jar) for jar in runtime.classpath())
    result = subprocess.run(
        [runtime.java_binary(), "-cp", jars, str(JAVA / "MetadataVersions.java")],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    from_kafka = {int(level): name for level, name in (line.split() for line in result.stdout.splitlines())}
    assert from_kafka == METADATA_VERSIONS


def test_old_source_to_new_target_and_back_stays_exact(
    line_pair: list[Cluster], unique, tmp_path: Path
) -> None:
    """One test per line, so each line's pair of clusters starts once whatever xdist deals."""
    a, b = line_pair
    topic, caught_up, lagging = unique("orders"), unique("billing"), unique("audit")
    properties = mm2_text([a, b], ["A->B", "B->A"], f"topics = {topic}\nmirrorflow.range.max.records = 60\n")
    config = load_config(properties)

    # validate --connect says which line each cluster runs and what the old one lacks.
    path = tmp_path / "mm2.properties"
    path.write_text(properties)
    body = json.loads(
        CliRunner().invoke(main, ["validate", str(path), "--connect", "--output", "json"]).output
    )
    versions = {c["alias"]: c for c in body["clusters"]}
    assert versions["A"]["metadata_version"].startswith(a.kafka.line.name + "-IV")
    assert versions["B"]["metadata_version"].startswith(runtime.main_line().name + "-IV")
    said_old, said_new = " ".join(versions["A"]["notes"]), " ".join(versions["B"]["notes"])
    assert "transactions v1" in said_old and "classic consumer groups only" in said_old
    assert "transactions v2" in said_new and "classic consumer groups only" not in said_new
    assert "no topic IDs" not in said_old + said_new  # both lines have them (KRaft, Metadata v10+)
    table = CliRunner().invoke(main, ["validate", str(path), "--connect"])
    assert "Cluster versions" in table.output and versions["A"]["metadata_version"] in table.output

    create_topics(a.bootstrap, (topic, 3, {"max.message.bytes": "500000"}))
    history = produce_numbered(a.bootstrap, topic, 3, 240)
    produce_aborted(a.bootstrap, topic, 1, unique("tx"))
    history += produce_numbered(a.bootstrap, topic, 3, 60, start=240)
    read_caught_up = consume(a.bootstrap, caught_up, [topic], 290)
    read_lagging = consume(a.bootstrap, lagging, [topic], 25)
    source_admin = AdminClient({"bootstrap.servers": a.bootstrap})
    source_admin.create_acls([_topic_acl(topic, "User:alice")])[_topic_acl(topic, "User:alice")].result(30)

    copied = replicate_once(config, "A", "B", unique("ab"))
    assert copied["topics"][topic]["records"] == 300, copied

    # Configs and ACLs of the old cluster's topic reach its remote topic on the new one.
    change = ConfigResource(
        ResourceType.TOPIC,
        topic,
        incremental_configs=[
            ConfigEntry("retention.ms", "86400000", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    source_admin.incremental_alter_configs([change])[change].result(30)
    flow = config.flow("A", "B")
    configs = run_sync_topic_configs(flow)
    assert configs["topics"][f"A.{topic}"]["set"]["retention.ms"] == "86400000", configs
    acls = run_sync_topic_acls(flow)
    assert acls["errors"] == {} and len(acls["synced"]) == 1, acls
    target_admin = AdminClient({"bootstrap.servers": b.bootstrap})
    remote_acls = target_admin.describe_acls(_acl_filter(f"A.{topic}")).result(30)
    assert {(x.name, x.principal, x.operation) for x in remote_acls} == {
        (f"A.{topic}", "User:alice", AclOperation.READ)
    }

    verified = verify_service.run_locally(config, "A", "B", run_id=unique("verify"), topics=topic)
    assert verified["verdict"] == "verified", verified
    assert verified["totals"]["matched"] == 300

    emit_checkpoints(config, "A", "B")
    moved = failover(config, "A", "B", f"{caught_up}|{lagging}")
    assert moved.mode == "live" and sorted(moved.committed) == sorted([caught_up, lagging])
    assert {r.status for r in moved.rows} == {"exact"}
    for group in (caught_up, lagging):
        checkpointed = remote_consumer_offsets({"bootstrap.servers": b.bootstrap}, "A", group)
        failed_over = {(r.topic, r.partition): r.target_offset for r in moved.rows if r.group == group}
        assert {k: v.offset for k, v in checkpointed.items()} == failed_over
    on_b_caught_up = consume_rest(b.bootstrap, caught_up, [f"A.{topic}"])
    on_b_lagging = consume(b.bootstrap, lagging, [f"A.{topic}"], 100)
    assert_read_once(read_caught_up, on_b_caught_up, history)

    # Failback onto the old cluster: what the groups did on B continues exactly on A.
    written_on_b = produce_numbered(b.bootstrap, topic, 1, 40, start=1000)
    back_copy = replicate_once(config, "B", "A", unique("ba"))
    assert back_copy["topics"][topic]["records"] == 40, back_copy
    back = failover(config, "B", "A", f"{caught_up}|{lagging}")
    assert sorted(back.committed) == sorted([caught_up, lagging]) and back.divergent == []
    assert {r.status for r in back.rows if r.topic == topic} == {"exact"}
    lagging_back = consume_rest(a.bootstrap, lagging, [topic, f"B.{topic}"])
    assert_read_once(read_lagging + on_b_lagging, lagging_back, history + written_on_b)
    assert committed(a.bootstrap, caught_up, [(topic, p) for p in range(3)]) == {
        (topic, p): end for p, end in _ends(a.bootstrap, topic, 3).items()
    }


def _acl_filter(topic: str) -> AclBindingFilter:
    return AclBindingFilter(
        ResourceType.TOPIC,
        topic,
        ResourcePatternType.LITERAL,
        None,
        None,
        AclOperation.ANY,
        AclPermissionType.ANY,
    )


def _ends(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    ends = list_offsets(
        AdminClient({"bootstrap.servers": bootstrap}),
        [(topic, p) for p in range(partitions)],
        OffsetSpec.latest(),
    )
    return {p: ends[(topic, p)] for p in range(partitions)}
