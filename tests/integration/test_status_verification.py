"""The last verification of each flow on the status: mirror_status, the JSON, the metrics, the
page and `mirrorflow status`, after real verifications on real clusters."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from mirrorflow.airflow.status_app import TOKEN_ENV
from mirrorflow.cli import main
from mirrorflow.control.mirror_status import mirror_status
from mirrorflow.ops.verification import service as verify_service
from mirrorflow.ops.verification.report import SUMMARY_KIND
from mirrorflow.replicate.run_history import FIRST_SCAN
from mirrorflow.replicate.runs import RUNS_TOPIC

from .kafkatools import create_topics, produce
from .mirror_setup import mm2_config, mm2_text, replicate_once


def test_status_shows_the_last_verification_of_each_flow(
    kafka_clusters, status_app, tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = kafka_clusters(2)
    create_topics(a.bootstrap, ("orders", 1))
    produce(a.bootstrap, "orders", [{"value": b"%d" % i} for i in range(20)])
    config = mm2_config([a, b], ["A->B", "B->A"])
    replicate_once(config, "A", "B", "copy-1")
    assert mirror_status(config).flow("A->B").last_verification is None

    assert verify_service.run_locally(config, "A", "B", run_id="verify-1", topics="orders")["verdict"] == (
        "verified"
    )
    produce(a.bootstrap, "orders", [{"value": b"late"}] * 5)
    pending = verify_service.run_locally(config, "A", "B", run_id="verify-2", topics="orders")
    assert pending["verdict"] == "incomplete", pending
    # Other flows' records push both summaries out of the first window read back.
    produce(
        b.bootstrap,
        RUNS_TOPIC,
        [{"key": b"B->A|other-%d|summary" % i, "value": b"{}"} for i in range(FIRST_SCAN + 10)],
    )

    status = mirror_status(config)
    flow = status.flow("A->B")
    # The run summary is older than both verifications: one scan back finds all of them.
    assert flow.last_run["run_id"] == "copy-1"
    assert flow.last_verification == {
        "run_id": "verify-2",
        "verdict": "incomplete",
        "finished_ms": pending["finished_ms"],
        "matched": 20,
        "wrong_total": 0,
        "explained_total": 0,
        "removed_from_target": 0,
        "removed_needed": 0,
        "pending": 5,
        "failed_partitions": 0,
        "sample": None,
        "confidence": None,
        "mismatch_count": 0,
    }
    assert flow.last_verification_ms >= pending["finished_ms"]
    assert status.flow("B->A").last_verification is None

    # A newer run does not hide the verification before it.
    replicate_once(config, "A", "B", "copy-2")
    flow = mirror_status(config, clusters=["B"]).flow("A->B")
    assert (flow.last_run["run_id"], flow.last_verification["run_id"]) == ("copy-2", "verify-2")

    monkeypatch.delenv(TOKEN_ENV, raising=False)
    app = status_app(config)
    shown = {f["flow"]: f for f in app.get("/status").json()["flows"]}
    assert shown["A->B"]["last_verification"]["verdict"] == "incomplete"
    assert shown["B->A"]["last_verification"] is None
    metrics = app.get("/metrics").text
    for line in (
        'mirrorflow_verification_ok{flow="A->B"} 0.0',
        'mirrorflow_verification_verdict{flow="A->B",verdict="incomplete"} 1.0',
        'mirrorflow_verification_verdict{flow="A->B",verdict="verified"} 0.0',
        'mirrorflow_verification_matched_records{flow="A->B"} 20.0',
        'mirrorflow_verification_wrong_records{flow="A->B"} 0.0',
        'mirrorflow_verification_pending_records{flow="A->B"} 5.0',
        'mirrorflow_verification_timestamp_seconds{flow="A->B"} ',
    ):
        assert line in metrics, line
    assert 'mirrorflow_verification_ok{flow="B->A"}' not in metrics
    # The page lists both verifications of A->B, the newest first, each with its verdict.
    page = app.get("/ui").text
    history = page[page.index("Migrations and verifications, the newest first") :]
    assert history.index("verify-2") < history.index("verify-1")
    assert '<span class="badge warn">incomplete</span>' in history
    assert '<span class="badge ok">verified</span>' in history

    # A failed verification's summary lists its mismatches; the status keeps their count only.
    totals = {"matched": 17, "wrong_total": 3, "explained_total": 1, "pending": 0, "failed_partitions": 0}
    mismatch = {"topic": "orders", "partition": 0, "kind": "different", "source_offset": 1}
    failed = {
        "run_id": "verify-3",
        "flow": "A->B",
        "verdict": "failed",
        "finished_ms": 1_700_000_000_000,
        "sample": 0.5,
        "confidence": "2 stretches",
        "totals": totals,
        "mismatches": [mismatch] * 200,
        "mismatch_count": 3_000,
    }
    produce(
        b.bootstrap,
        RUNS_TOPIC,
        [{"key": f"A->B|verify-3|{SUMMARY_KIND}".encode(), "value": json.dumps(failed)}],
    )
    app.refresh()
    (flow,) = [f for f in app.get("/status").json()["flows"] if f["flow"] == "A->B"]
    assert flow["last_verification"]["verdict"] == "failed"
    assert flow["last_verification"]["mismatch_count"] == 3_000
    assert "mismatches" not in flow["last_verification"]
    metrics = app.get("/metrics").text
    assert 'mirrorflow_verification_ok{flow="A->B"} 0.0' in metrics
    assert 'mirrorflow_verification_wrong_records{flow="A->B"} 3.0' in metrics
    assert 'mirrorflow_verification_timestamp_seconds{flow="A->B"} ' in metrics

    path = tmp_path / "mm2.properties"
    path.write_text(mm2_text([a, b], ["A->B", "B->A"]))
    table = CliRunner().invoke(main, ["status", str(path)], env={"COLUMNS": "250"})
    assert table.exit_code == 0, table.output
    assert "last verification" in table.output
    assert "verify-3" in table.output and "failed" in table.output and "50%" in table.output
    assert "never verified" in table.output
    as_json = CliRunner().invoke(main, ["status", str(path), "--json"])
    flows = {f["flow"]: f for f in json.loads(as_json.output)["flows"]}
    assert flows["A->B"]["last_verification"]["run_id"] == "verify-3"
