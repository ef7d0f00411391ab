"""Which broker answers a batched offsets read asks again rather than fails on (kafka_offsets.py)."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError

from mirrorflow import kafka_offsets


@pytest.mark.parametrize(
    "code",
    [
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.OFFSET_NOT_AVAILABLE,
        # A plan failed on this under load in the suite: ListOffsets right after a topic's
        # creation answered "Leader epoch is newer than broker epoch", which librdkafka does not
        # mark retriable.
        KafkaError.UNKNOWN_LEADER_EPOCH,
        KafkaError.FENCED_LEADER_EPOCH,
    ],
)
def test_a_leader_in_motion_is_asked_again(code: int) -> None:
    assert kafka_offsets._ask_again(KafkaError(code))


@pytest.mark.parametrize("code", [KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError.UNKNOWN_TOPIC_OR_PART])
def test_a_refusal_is_not_asked_again(code: int) -> None:
    assert not kafka_offsets._ask_again(KafkaError(code))
