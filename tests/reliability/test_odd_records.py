"""Records at the edges of Kafka's record format survive a copy byte for byte, in both delivery
modes: empty (b"") and null keys and values, tombstones, 200 headers on one record (repeated
names, null and empty values, in order), bytes that are not UTF-8 in keys, values and header
values, header names in non-ASCII UTF-8 (and the empty name), 100 KiB keys, and all of them
mixed in one partition.

The source is read back before the copy so that the test can only pass if Kafka really holds
each oddity (an empty key that a client turned into null would prove nothing). On the target,
each record carries its user headers in the source's order followed by exactly one provenance
header, mirrorflow's only change to a record.
"""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path

import pytest

from mirrorflow.policy.provenance import HEADER_PREFIX, PROVENANCE_HEADER, read_provenance

from ..integration.kafkatools import create_topics, produce, read_topic
from ..integration.mirror_setup import mm2_text

MIRRORFLOW = str(Path(sys.executable).parent / "mirrorflow")
SEED = 2_411
NOT_UTF8 = (b"\xff", b"\xc3\x28", b"\xed\xa0\x80", b"\x80abc", b"\xf8\x88\x80\x80\x80", bytes(range(256)))
LONG_KEY = 100 * 1024


def two_hundred_headers(rng: random.Random) -> list[tuple[str, bytes | None]]:
    """200 headers: repeated names, null and empty values, binary values, non-ASCII names."""
    names = ("dup", "dup", "trace", "", "ключ", "名前", "emoji-🚀", "é", "dup")
    headers = []
    for i in range(200):
        value = rng.choice((None, b"", b"%d" % i, rng.choice(NOT_UTF8), rng.randbytes(rng.randrange(40))))
        headers.append((names[i % len(names)], value))
    return headers


def odd_kinds(rng: random.Random) -> dict[str, list[dict]]:
    """Records of each kind, as produce() arguments (without partition)."""
    return {
        "empty": [
            {"key": b"", "value": b""},
            {"key": b"", "value": None},
            {"key": None, "value": b""},
            {"key": b"", "value": b"", "headers": [("", b""), ("empty", b"")]},
        ],
        "tombstone": [
            {"key": None, "value": None},
            {"key": b"deleted", "value": None},
            {"key": None, "value": None, "headers": [("why", None)]},
        ],
        "headers": [
            {"key": b"h200", "value": b"two hundred headers", "headers": two_hundred_headers(rng)},
            {"key": None, "value": None, "headers": two_hundred_headers(rng)},
        ],
        "not-utf8": [
            {"key": odd, "value": odd[::-1], "headers": [("bytes", odd), ("bytes", odd + b"\x00")]}
            for odd in NOT_UTF8
        ],
        "unicode-names": [
            {"key": b"u", "value": b"v", "headers": [("ключ-é-✓-名前-🚀", b"\xff\xfe"), ("ключ", None)]},
            {"key": "ключ".encode(), "value": "значение".encode(), "headers": [("🚀", "✓".encode())]},
        ],
        "long-keys": [
            {"key": rng.randbytes(LONG_KEY), "value": b"after a 100 KiB key"},
            {"key": b"k" * LONG_KEY, "value": None},
            {"key": rng.randbytes(LONG_KEY), "value": rng.randbytes(LONG_KEY), "headers": [("n", None)]},
        ],
    }


def source_records(rng: random.Random) -> tuple[list[dict], int]:
    """One partition per kind, then a last one with every kind mixed between plain records; all
    with timestamps of their own. Returns the records and the partition count."""
    kinds = odd_kinds(rng)
    records = []
    for partition, kind in enumerate(kinds.values()):
        records += [{**r, "partition": partition} for r in kind]
    mixed = [r for kind in kinds.values() for r in kind] + [
        {"key": b"plain-%d" % i, "value": b"plain", "headers": [("n", b"%d" % i)]} for i in range(20)
    ]
    rng.shuffle(mixed)
    records += [{**r, "partition": len(kinds)} for r in mixed]
    for i, record in enumerate(records):
        record["timestamp"] = 1_600_000_000_000 + 7 * i
    return records, len(kinds) + 1


@pytest.mark.parametrize("delivery", ["exactly-once", "at-least-once"])
def test_odd_records_survive_the_copy_byte_for_byte(shared_clusters, unique, tmp_path, delivery) -> None:
    a, b, _ = shared_clusters
    topic = unique("odd")
    records, partitions = source_records(random.Random(SEED))
    create_topics(a.bootstrap, (topic, partitions))
    produce(a.bootstrap, topic, records)

    source = read_topic(a.bootstrap, topic, partitions)
    for p in range(partitions):
        written = [
            (r["key"], r["value"], tuple(r.get("headers", ())), r["timestamp"])
            for r in records
            if r["partition"] == p
        ]
        assert [r.content() for r in source[p]] == written, (
            f"the source does not hold partition {p} as written"
        )

    config = tmp_path / "mm2.properties"
    config.write_text(mm2_text([a, b], ["A->B"], f"A->B.topics = {topic}\ntasks.max = 2\n"))
    done = subprocess.run(
        [MIRRORFLOW, "replicate", str(config), "--flow", "A->B", "--delivery", delivery],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]

    target = read_topic(b.bootstrap, f"A.{topic}", partitions)
    for p in range(partitions):
        assert len(target[p]) == len(source[p]), f"partition {p}"
        for s, t in zip(source[p], target[p], strict=True):
            where = f"{delivery}, partition {p}, source offset {s.offset}"
            assert (t.key, t.value, t.timestamp) == (s.key, s.value, s.timestamp), where
            assert t.headers[:-1] == s.headers, where
            assert t.headers[-1][0] == PROVENANCE_HEADER, where
            assert not any(name.startswith(HEADER_PREFIX) for name, _ in t.headers[:-1]), where
            provenance = read_provenance(t.headers)
            assert (provenance.source_topic, provenance.source_partition, provenance.source_offset) == (
                topic,
                p,
                s.offset,
            ), where
