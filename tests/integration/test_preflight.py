"""`mirrorflow validate --connect` asks the clusters what the file alone cannot say, and reports
every problem at once with its fix: filters that match nothing, remote topics written from two
sources, clusters that refuse the client's protocol; `--output json` for CI."""

from __future__ import annotations

import json

from click.testing import CliRunner

from mirrorflow.cli import main

from .kafkatools import create_topics
from .mirror_setup import mm2_text
from .test_failover_helpers import commit_at

IDENTITY = "replication.policy.class = org.apache.kafka.connect.mirror.IdentityReplicationPolicy\n"


def validate(path, *extra: str):
    return CliRunner().invoke(main, ["validate", "--connect", *extra, str(path)], env={"COLUMNS": "250"})


def test_filters_that_match_nothing_are_named_with_their_flow(shared_clusters, unique, tmp_path) -> None:
    a, b, _ = shared_clusters
    group = unique("billing")
    topic = unique("orders")
    create_topics(a.bootstrap, (topic, 1))
    commit_at(a.bootstrap, group, {(topic, 0): 0})
    path = tmp_path / "mm2.properties"
    path.write_text(mm2_text([a, b], ["A->B"], "A->B.topics = ordres-.*\nA->B.groups = biling-.*\n"))

    result = validate(path, "--output", "json")

    body = json.loads(result.output)
    keys = {p["key"]: p for p in body["problems"]}
    assert (
        "matches none of the" in keys["A->B.topics"]["problem"]
        and "ordres-.*" in keys["A->B.topics"]["problem"]
    )
    assert (
        "matches none of the" in keys["A->B.groups"]["problem"]
        and "biling-.*" in keys["A->B.groups"]["problem"]
    )
    assert body["errors"] == 0 and result.exit_code == 0 and body["connected"] is True


def test_a_remote_topic_written_from_two_sources_is_named(shared_clusters, unique, tmp_path) -> None:
    a, b, c = shared_clusters
    topic = unique("orders")
    create_topics(a.bootstrap, (topic, 1))
    create_topics(c.bootstrap, (topic, 1))
    path = tmp_path / "mm2.properties"
    path.write_text(mm2_text([a, b, c], ["A->B", "C->B"], IDENTITY + f"topics = {topic}\n"))

    result = validate(path, "--output", "json")

    problems = json.loads(result.output)["problems"]
    [clash] = [p for p in problems if p["key"] == f"B:{topic}" and "would be written from" in p["problem"]]
    assert f"{topic} of A, {topic} of C" in clash["problem"] and clash["severity"] == "warning"


def test_a_cluster_that_refuses_the_protocol_is_an_error_saying_why(shared_clusters, tmp_path) -> None:
    a, b, _ = shared_clusters
    path = tmp_path / "mm2.properties"
    path.write_text(mm2_text([a, b], ["A->B"], "B.security.protocol = SSL\n"))

    result = validate(path, "--connect-timeout", "2", "--output", "json")

    body = json.loads(result.output)
    assert result.exit_code == 1 and body["errors"] == 1
    [problem] = [p for p in body["problems"] if p["severity"] == "error"]
    assert problem["key"] == "B.bootstrap.servers"
    assert "SSL handshake failed" in problem["problem"] and "B.security.protocol" in problem["fix"]
