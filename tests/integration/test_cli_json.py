"""`--output json` for scripts and CI on real clusters (issue 10): replicate, migrate, status and
failover print one JSON object on stdout with stable keys, the plan, progress and logs go to
stderr, and tables printed to a pipe are never wrapped mid-word. A 1 MiB record is copied (the
producer's own limit never refuses what the target topic takes), and a record the target topic
refuses names the record, the side that refused and the setting to raise."""

from __future__ import annotations

import json
import re

from click.testing import CliRunner

from mirrorflow.cli import main

from .kafkatools import create_topics, produce, read_all
from .mirror_setup import mm2_text
from .test_failover_helpers import commit_at

BIG = 1_100_000  # above librdkafka's default message.max.bytes (1,000,000) and Kafka's 1 MiB topic default


def _run(*args: object):
    return CliRunner().invoke(main, [str(a) for a in args])


def _json(result) -> dict:
    assert result.stdout.lstrip().startswith("{"), result.stdout
    return json.loads(result.stdout)


def test_replicate_json_copies_a_1_mib_record_and_status_json_sees_the_run(
    kafka_clusters, unique, tmp_path
) -> None:
    a, b = kafka_clusters(2)
    topic = unique("big")
    create_topics(a.bootstrap, (topic, 1, {"max.message.bytes": str(4 << 20)}))
    produce(
        a.bootstrap,
        topic,
        [{"value": b"s" * 10}, {"value": b"B" * BIG}, {"value": b"e" * 10}],
        **{"message.max.bytes": 8 << 20},
    )
    config = tmp_path / "mm2.properties"
    config.write_text(mm2_text([a, b], ["A->B"], f"A->B.topics = {topic}\n"))

    result = _run("replicate", config, "--flow", "A->B", "--output", "json")

    assert result.exit_code == 0, result.output
    body = _json(result)
    assert {"command", "ok", "error", "flow", "run_id", "mode", "passes", "plan", "summary"} <= set(body)
    assert body["command"] == "replicate" and body["ok"] is True and body["error"] is None
    assert body["flow"] == "A->B" and body["run_id"].startswith("cli__")
    assert body["plan"]["partitions"] == 1 and body["plan"]["created_topics"] == [f"A.{topic}"]
    assert body["summary"]["totals"]["records"] == 3
    assert body["summary"]["totals"]["failed_partitions"] == 0
    assert "replicate A->B run" in result.stderr  # the plan line went to stderr
    assert [len(r.value) for r in read_all(b.bootstrap, f"A.{topic}")] == [10, BIG, 10]

    status = _run("status", config, "--output", "json")
    assert status.exit_code == 0, status.output
    flows = {f["flow"]: f for f in _json(status)["flows"]}
    assert flows["A->B"]["last_run"]["run_id"] == body["run_id"]
    assert flows["A->B"]["lag"] == {topic: 0}
    alias = _run("status", config, "--json")
    assert {f["flow"] for f in _json(alias)["flows"]} == {"A->B"}

    table = _run("status", config)
    assert table.exit_code == 0
    [row] = [line for line in table.stdout.splitlines() if body["run_id"] in line]
    assert row.split("│")[1].strip() == "A->B", "a run's row stays on one line in a pipe"


def test_a_record_the_target_topic_refuses_names_the_side_and_the_setting(
    kafka_clusters, unique, tmp_path
) -> None:
    a, b = kafka_clusters(2)
    topic = unique("refused")
    create_topics(a.bootstrap, (topic, 1, {"max.message.bytes": str(4 << 20)}))
    create_topics(b.bootstrap, (f"A.{topic}", 1))  # Kafka's default limit: 1 MiB
    produce(a.bootstrap, topic, [{"value": b"B" * BIG}], **{"message.max.bytes": 8 << 20})
    config = tmp_path / "mm2.properties"
    config.write_text(mm2_text([a, b], ["A->B"], f"A->B.topics = {topic}\n"))

    result = _run("migrate", config, "--flow", "A->B", "--output", "json")

    assert result.exit_code == 1, result.output
    body = _json(result)
    assert body["command"] == "migrate" and body["ok"] is False
    [failed] = body["summary"]["failed"]
    assert failed["topic"] == topic
    error = failed["error"]
    assert f"{topic}-0 offset 0: the target refuses the record as too large" in error, error
    assert "its broker refused it, not mirrorflow's producer" in error
    assert f"max.message.bytes of A.{topic}" in error


def test_failover_json_is_one_object_with_the_moved_groups(kafka_clusters, unique, tmp_path) -> None:
    a, b = kafka_clusters(2)
    topic, group = unique("fo"), unique("app")
    create_topics(a.bootstrap, (topic, 1))
    produce(a.bootstrap, topic, [{"value": b"v"} for _ in range(5)])
    commit_at(a.bootstrap, group, {(topic, 0): 3})
    config = tmp_path / "mm2.properties"
    config.write_text(mm2_text([a, b], ["A->B"], f"A->B.topics = {topic}\n"))
    assert _run("replicate", config, "--flow", "A->B", "--output", "json").exit_code == 0

    result = _run(
        "failover", config, "--from", "A", "--to", "B", "--groups", group, "--dry-run", "--output", "json"
    )

    assert result.exit_code == 0, result.output
    body = _json(result)
    assert body["command"] == "failover" and body["ok"] is True and body["dry_run"] is True
    assert body["moved"] == [group] and body["refused"] == {}
    [row] = body["rows"]
    assert (row["group"], row["topic"], row["source_offset"], row["target_offset"]) == (
        group,
        f"A.{topic}",
        3,
        3,
    )
    assert row["action"] == "would commit"

    bad = _run("failover", config, "--from", "A", "--to", "A", "--groups", group, "--output", "json")
    assert bad.exit_code == 1
    assert _json(bad) == {"command": "failover", "ok": False, "error": bad_error(bad)}


def bad_error(result) -> str:
    message = json.loads(result.stdout)["error"]
    assert "name two different clusters" in message
    return message


def test_a_record_above_the_producers_own_limit_names_the_producer_key(
    kafka_clusters, unique, tmp_path
) -> None:
    """librdkafka refuses a record above its message.max.bytes in produce() with the broker's
    error code ("Broker: Message size too large") though no broker saw it. A compressed batch
    lets the source hold a record bigger than mirrorflow's producer allows (100 MiB)."""
    a, b = kafka_clusters(2)
    topic = unique("huge")
    create_topics(a.bootstrap, (topic, 1, {"max.message.bytes": str(4 << 20)}))
    huge = (100 << 20) + 4096
    produce(
        a.bootstrap,
        topic,
        [{"value": b"small"}, {"value": bytes(huge)}],
        **{"message.max.bytes": 200 << 20, "compression.type": "zstd"},
    )
    config = tmp_path / "mm2.properties"
    config.write_text(
        mm2_text(
            [a, b],
            ["A->B"],
            f"A->B.topics = {topic}\nB.producer.compression.type = zstd\n"
            # librdkafka decompresses a batch up to receive.message.max.bytes (100,000,000 by default)
            "A.consumer.receive.message.max.bytes = 250000000\n",
        )
    )

    result = _run("migrate", config, "--flow", "A->B", "--output", "json")

    assert result.exit_code == 1, result.output
    [failed] = _json(result)["summary"]["failed"]
    error = failed["error"]
    assert f"{topic}-0 offset 1: mirrorflow's producer refuses the record as too large" in error, error
    # the record's value plus the provenance header mirrorflow adds
    assert re.search(r"\(104,86\d,\d{3} bytes, above its message\.max\.bytes of 104,857,600\)", error), error
    assert "the target cluster never saw it" in error
    assert "raise B.producer.message.max.bytes" in error
