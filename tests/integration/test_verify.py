"""Verification by content on real clusters (issue 11): a flow copies, `verify` compares.

Each test works on uniquely named topics of the shared clusters and verifies only those
(`topics=`). The faulty copier is written by hand: records stamped with provenance exactly as
the copy stamps them, a value changed, one left out, one written twice, and the progress that
says they were all copied; verification must name each, by source and target offset.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from mirrorflow.ops.verification import service as verify_service
from mirrorflow.ops.verification.report import VerificationFailed
from mirrorflow.policy.provenance import stamp_provenance
from mirrorflow.replicate.progress import progress_record

from .kafkatools import create_topics, produce
from .mirror_setup import mm2_config, mm2_text, replicate_once


def records(count: int, *, start: int = 0, partitions: int = 1) -> list[dict[str, Any]]:
    """Keys, values, headers, null values (tombstones) and a null key among them."""
    out = []
    for i in range(start, start + count):
        out.append(
            {
                "key": None if i % 17 == 5 else b"k%d" % i,
                "value": None if i % 13 == 7 else b"v%d" % i * 3,
                "headers": [("h", b"%d" % i), ("trace", None)] if i % 2 else None,
                "partition": i % partitions,
                "timestamp": 1_700_000_000_000 + i,
            }
        )
    return out


def _flow(shared_clusters, topic_regex: str, extra: str = ""):
    a, b, _ = shared_clusters
    return mm2_config([a, b], ["A->B"], f"A->B.topics = {topic_regex}\ntasks.max = 2\n{extra}")


def _verify(config, topic_regex: str, run_id: str, **options: Any) -> dict[str, Any]:
    return verify_service.run_locally(config, "A", "B", run_id=run_id, topics=topic_regex, **options)


def test_an_exact_copy_verifies_and_both_digests_agree(shared_clusters, unique) -> None:
    a, b, _ = shared_clusters
    topic = unique("vf-exact")
    create_topics(a.bootstrap, (topic, 2))
    produce(a.bootstrap, topic, records(300, partitions=2))
    # An aborted transaction on the source: its records are never copied and never compared.
    aborted = Producer({"bootstrap.servers": a.bootstrap, "transactional.id": unique("tx")})
    aborted.init_transactions(30)
    aborted.begin_transaction()
    aborted.produce(topic, b"aborted", partition=0)
    assert aborted.flush(30) == 0  # written, then aborted (abort alone would purge it unsent)
    aborted.abort_transaction(30)
    produce(a.bootstrap, topic, records(20, start=300, partitions=2))
    config = _flow(shared_clusters, topic)
    replicate_once(config, "A", "B", unique("copy"))

    summary = _verify(config, topic, unique("verify"))

    totals = summary["totals"]
    assert summary["verdict"] == "verified", summary
    assert totals["source_records"] == totals["target_records"] == totals["matched"] == 320
    assert totals["wrong_total"] == 0 and totals["pending"] == 0
    assert totals["gaps"] >= 2, summary  # the aborted record and its marker
    assert summary["topics"][topic]["matched"] == 320


def test_what_the_flow_has_not_copied_yet_is_pending_and_until_bounds_it(shared_clusters, unique) -> None:
    a, _, _ = shared_clusters
    topic = unique("vf-pending")
    create_topics(a.bootstrap, (topic, 1))
    produce(a.bootstrap, topic, records(50))
    config = _flow(shared_clusters, topic)
    replicate_once(config, "A", "B", unique("copy"))
    time.sleep(0.01)
    cut = int(time.time() * 1000)
    produce(
        a.bootstrap, topic, [{**r, "timestamp": cut + 1000 + i} for i, r in enumerate(records(30, start=50))]
    )

    pending = _verify(config, topic, unique("verify"))
    assert pending["verdict"] == "incomplete", pending
    assert pending["totals"]["pending"] == 30 and pending["totals"]["matched"] == 50

    bounded = _verify(config, topic, unique("verify"), until=cut + 500)
    assert bounded["verdict"] == "verified", bounded
    assert bounded["totals"]["pending"] == 0 and bounded["totals"]["matched"] == 50


def test_records_retention_removed_from_the_source_after_the_copy_are_explained(
    shared_clusters, unique
) -> None:
    a, _, _ = shared_clusters
    topic = unique("vf-retention")
    create_topics(a.bootstrap, (topic, 1))
    produce(a.bootstrap, topic, records(40))
    config = _flow(shared_clusters, topic)
    replicate_once(config, "A", "B", unique("copy"))
    admin = AdminClient({"bootstrap.servers": a.bootstrap})
    for future in admin.delete_records([TopicPartition(topic, 0, 15)]).values():
        future.result(30)

    summary = _verify(config, topic, unique("verify"))

    assert summary["verdict"] == "verified", summary
    assert summary["totals"]["explained"]["removed_from_source"] == 15
    assert summary["totals"]["matched"] == 25 and summary["totals"]["wrong_total"] == 0


def _faulty_copy(shared_clusters, unique, config, count: int) -> tuple[str, str]:
    """A source topic of `count` records and a remote topic a faulty copier wrote: source offset
    3 with another value, 4 left out, 6 written twice; progress says all were copied."""
    a, b, _ = shared_clusters
    topic = unique("vf-faulty")
    remote = f"A.{topic}"
    create_topics(a.bootstrap, (topic, 1))
    create_topics(b.bootstrap, (remote, 1))
    source = records(count)
    produce(a.bootstrap, topic, source)
    copies = []
    for offset, record in enumerate(source):
        if offset == 4:
            continue
        value = b"tampered" if offset == 3 else record["value"]
        headers = stamp_provenance(
            record["headers"], source_alias="A", topic=topic, partition=0, offset=offset
        )
        copies.append({**record, "value": value, "headers": headers})
        if offset == 6:
            copies.append({**record, "headers": headers})
    produce(b.bootstrap, remote, copies)
    flow = config.flow("A", "B")
    key, value, part = progress_record("A", topic, 0, count - 1, flow.offset_storage_partitions)
    produce(
        b.bootstrap,
        flow.offset_storage_topic,
        [{"key": key, "value": value, "partition": part}],
    )
    return topic, remote


@pytest.mark.parametrize("sample", [None, 1.0], ids=["full", "sampled"])
def test_a_faulty_copy_is_named_record_by_record(shared_clusters, unique, sample) -> None:
    # The flow's internal topics exist once it has run; its topic filter selects nothing.
    config = _flow(shared_clusters, unique("vf-none"))
    replicate_once(config, "A", "B", unique("copy"))
    topic, remote = _faulty_copy(shared_clusters, unique, config, 2500)

    with pytest.raises(VerificationFailed) as failed:
        _verify(config, topic, unique("verify"), sample=sample)

    summary = failed.value.summary
    assert summary["verdict"] == "failed"
    found = {(m["kind"], m["source_offset"], m["target_offset"]) for m in summary["mismatches"]}
    # Target offsets: 0..2 are copies of 0..2, 3 the tampered copy, 4 the copy of 5, 5 and 6 of 6.
    assert found == {("different", 3, 3), ("missing", 4, None), ("repeated", 6, 6)}, summary["mismatches"]
    different = next(m for m in summary["mismatches"] if m["kind"] == "different")
    assert different["detail"] == "value differ" and different["remote_topic"] == remote
    assert summary["totals"]["matched"] == 2500 - 2
    message = str(failed.value)
    assert f"{topic}-0 source offset 3 -> {remote} offset 3: different (value differ)" in message
    if sample:
        assert summary["totals"]["stretches"] == 3 and "stretches" in summary["confidence"]


def test_at_least_once_repeats_are_explained_not_wrong(shared_clusters, unique) -> None:
    config = _flow(shared_clusters, unique("vf-none"))
    replicate_once(config, "A", "B", unique("copy"))
    topic, _ = _faulty_copy(shared_clusters, unique, config, 20)
    with pytest.raises(VerificationFailed) as failed:
        _verify(config, topic, unique("verify"), delivery="at-least-once")
    summary = failed.value.summary
    assert summary["totals"]["explained"]["repeated_at_least_once"] == 1
    assert summary["totals"]["wrong"] == {"missing": 1, "different": 1, "unexpected": 0, "repeated": 0}


def test_a_sample_compares_stretches_and_says_what_it_proves(shared_clusters, unique) -> None:
    a, _, _ = shared_clusters
    topic = unique("vf-sample")
    create_topics(a.bootstrap, (topic, 1))
    produce(a.bootstrap, topic, records(5000))
    config = _flow(shared_clusters, topic)
    replicate_once(config, "A", "B", unique("copy"))

    summary = _verify(config, topic, unique("verify"), sample=0.2, seed=7)

    assert summary["verdict"] == "sample passed", summary
    assert summary["totals"]["stretches"] == 1 and summary["totals"]["matched"] == 1000
    assert "1 stretches of up to 1000 offsets" in summary["confidence"]


def test_the_cli_shows_the_verdict_and_every_mismatch_and_exits_by_it(
    shared_clusters, unique, tmp_path
) -> None:
    from click.testing import CliRunner

    from mirrorflow.cli import main

    a, b, _ = shared_clusters
    nothing = unique("vf-none")
    config = _flow(shared_clusters, nothing)
    replicate_once(config, "A", "B", unique("copy"))
    faulty, remote = _faulty_copy(shared_clusters, unique, config, 12)
    exact = unique("vf-cli")
    create_topics(a.bootstrap, (exact, 1))
    produce(a.bootstrap, exact, records(12))
    replicate_once(_flow(shared_clusters, exact), "A", "B", unique("copy"))
    path = tmp_path / "mm2.properties"
    path.write_text(mm2_text([a, b], ["A->B"], f"A->B.topics = {nothing}\n"))
    runner = CliRunner()
    args = ["verify", str(path), "--flow", "A->B", "--topics"]

    ok = runner.invoke(main, [*args, exact])
    assert ok.exit_code == 0, ok.output
    assert "12 source record(s) compared with 12 copies" in ok.output and "VERIFIED" in ok.output

    bad = runner.invoke(main, [*args, faulty])
    assert bad.exit_code == 1, bad.output
    assert f"{faulty}-0 source offset 4: missing (no copy of this source record on the target)" in bad.output
    assert f"{faulty}-0 source offset 3 -> {remote} offset 3: different (value differ)" in bad.output
    assert "FAILED" in bad.output

    produce(a.bootstrap, exact, records(3, start=12))
    pending = runner.invoke(main, [*args, exact, "--output", "json"])
    assert pending.exit_code == 3, pending.output
    assert json.loads(pending.output)["totals"]["pending"] == 3

    wrong = runner.invoke(main, [*args, exact, "--sample", "2"])
    assert wrong.exit_code == 2 and "not a fraction in (0, 1]" in wrong.output
