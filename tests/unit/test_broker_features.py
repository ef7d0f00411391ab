"""What mirrorflow makes of a broker's ApiVersions answer: the layouts it parses (v3 with finalized
features, and the v0 layout of UNSUPPORTED_VERSION from brokers older than Kafka 2.4, which
nothing here runs) and what each gap means for a flow."""

from __future__ import annotations

import struct

from mirrorflow.ops.broker_features import BrokerFeatures, compact, parse_api_versions, uvarint
from mirrorflow.ops.cluster_versions import meaning, release_name


def v3_answer(apis: dict[int, int], finalized: dict[str, int]) -> bytes:
    body = struct.pack(">h", 0) + uvarint(len(apis) + 1)
    for key, high in apis.items():
        body += struct.pack(">hhh", key, 0, high) + b"\x00"
    body += struct.pack(">i", 0)
    features = uvarint(len(finalized) + 1)
    for name, level in finalized.items():
        features += compact(name.encode()) + struct.pack(">hh", level, 1) + b"\x00"
    epoch = struct.pack(">q", 7)
    return (
        body
        + uvarint(2)
        + uvarint(1)
        + uvarint(len(epoch))
        + epoch
        + uvarint(2)
        + uvarint(len(features))
        + features
    )


def test_a_v3_answer_gives_api_versions_and_finalized_features_past_other_tags() -> None:
    apis, finalized = parse_api_versions(
        v3_answer({0: 13, 3: 13, 22: 5}, {"metadata.version": 33, "transaction.version": 2})
    )
    assert apis == {0: 13, 3: 13, 22: 5}
    assert finalized == {"metadata.version": 33, "transaction.version": 2}
    assert release_name(finalized) == "4.4-IV2"


def test_a_broker_older_than_2_4_answers_in_the_v0_layout() -> None:
    body = struct.pack(">hi", 35, 2) + struct.pack(">hhh", 0, 0, 7) + struct.pack(">hhh", 3, 0, 8)
    assert parse_api_versions(body) == ({0: 7, 3: 8}, {})


def test_what_an_old_broker_lacks_is_said_with_what_mirrorflow_falls_back_to() -> None:
    ancient = BrokerFeatures("h:1", {0: 2, 3: 5}, {}, 0.4)
    said = meaning(ancient)
    assert release_name({}).startswith("no metadata.version")
    assert any("no transactions" in n and "at-least-once" in n for n in said)
    assert any("no topic IDs" in n and "names only" in n for n in said)
    assert not any("round trip" in n for n in said)
    far = BrokerFeatures(
        "h:1", {3: 12, 22: 5}, {"metadata.version": 99, "transaction.version": 2, "group.version": 1}, 52.0
    )
    assert meaning(far)[0].startswith("transactions v2")
    assert any("round trip 52 ms" in n for n in meaning(far))
    assert release_name(far.finalized) == "level 99, newer than 4.4-IV2"


def test_transactions_v2_is_said_as_the_broker_s_not_mirrorflow_s() -> None:
    """librdkafka does not speak transactions v2: no epoch bump per transaction for mirrorflow."""
    [note] = [
        n
        for n in meaning(
            BrokerFeatures("h:1", {3: 12, 22: 5}, {"transaction.version": 2, "group.version": 1}, 0.4)
        )
        if "transactions" in n
    ]
    assert "bumps" not in note
    assert "classic protocol" in note and "one epoch per producer session" in note
    assert "\n" not in note and len(note) < 180
