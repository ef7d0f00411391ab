"""mirrorflow's offset-sync, checkpoint and heartbeat bytes against MirrorMaker 2's own classes:
MM2 decodes what mirrorflow encodes to the same fields, and MM2's schemas encode those fields to
the same bytes (tests/mm2/java/FormatCheck.java, run with the pinned Kafka jars)."""

from __future__ import annotations

import random
import subprocess
from pathlib import Path

from localkafka import runtime
from mirrorflow.mm2.formats import Checkpoint, Heartbeat, OffsetSync

CHECKER = Path(__file__).with_name("java") / "FormatCheck.java"
TEXT_SAMPLES = ["", "orders", "A.orders", "ünïcødé", "日本語", "emoji-😀", "x" * 300, "tab\tand\nnewline"]


def random_records(rnd: random.Random) -> list[OffsetSync | Checkpoint | Heartbeat]:
    def text() -> str:
        return rnd.choice(TEXT_SAMPLES)

    def long() -> int:
        return rnd.choice([0, -1, 1, 2**63 - 1, -(2**63), rnd.randrange(-(2**63), 2**63)])

    def partition() -> int:
        return rnd.choice([0, 1, 2**31 - 1, rnd.randrange(0, 2**31)])

    out: list[OffsetSync | Checkpoint | Heartbeat] = []
    for _ in range(60):
        out.append(OffsetSync(text(), partition(), long(), long()))
        out.append(Checkpoint(text(), text(), partition(), long(), long(), text()))
        out.append(Heartbeat(text(), text(), long()))
    return out


def fields(record: OffsetSync | Checkpoint | Heartbeat) -> list[str]:
    """The fields as FormatCheck prints them: strings as UTF-8 hex, numbers in decimal."""

    def text(s: str) -> str:
        return s.encode().hex()

    if isinstance(record, OffsetSync):
        return [
            text(record.topic),
            str(record.partition),
            str(record.upstream_offset),
            str(record.downstream_offset),
        ]
    if isinstance(record, Checkpoint):
        return [
            text(record.group),
            text(record.topic),
            str(record.partition),
            str(record.upstream_offset),
            str(record.downstream_offset),
            text(record.metadata),
        ]
    return [text(record.source_alias), text(record.target_alias), str(record.timestamp_ms)]


def test_mm2_decodes_and_encodes_exactly_what_mirrorflow_does() -> None:
    records = random_records(random.Random(7))
    lines = "".join(f"{type(r).__name__} {r.key_bytes().hex()} {r.value_bytes().hex()}\n" for r in records)
    jars = runtime.mirrormaker_line().classpath()
    command = [runtime.java_binary(), "-cp", ":".join(str(j) for j in jars), str(CHECKER)]
    result = subprocess.run(command, input=lines, capture_output=True, text=True, check=False, timeout=120)
    assert result.returncode == 0, result.stderr
    answers = result.stdout.splitlines()
    assert len(answers) == len(records)
    for record, answer in zip(records, answers, strict=True):
        kind, *decoded = answer.split(" ")
        java_key, java_value = decoded[-2:]
        assert kind == type(record).__name__
        assert decoded[:-2] == fields(record), record
        assert (java_key, java_value) == (record.key_bytes().hex(), record.value_bytes().hex()), record
