"""copy/recovery/landed.py's answers where no record needs reading: a topic whose remote topic the caller
does not know, and a source partition that no longer exists."""

from __future__ import annotations

import pytest

from mirrorflow.replicate.copy.recovery import landed


@pytest.fixture
def no_reads(monkeypatch):
    def no_read(*args, **kwargs):
        raise AssertionError("read a partition where no record needs reading")

    monkeypatch.setattr(landed, "read_tails", no_read)
    monkeypatch.setattr(landed, "last_committed", no_read)
    monkeypatch.setattr(landed, "reader", no_read)
    return monkeypatch


def _source_has(partitions):
    return lambda config, topics: dict.fromkeys(topics, partitions)


def test_a_topic_without_a_known_remote_topic_cannot_be_told(no_reads) -> None:
    """A slot writer knows the remote topics of its plan's topics only: for another topic the
    answer is "cannot be told" (the hanging transaction is left open and reported), never a read
    of a guessed remote topic."""
    no_reads.setattr(landed, "_source_partitions", _source_has({3}))
    check = landed.landed_check({}, {}, {"orders": "A.orders"}.get)

    assert check([("elsewhere", 3, 41)]) == {("elsewhere", 3): None}


@pytest.mark.parametrize(("source_has", "answer"), [(set(), False), ({1}, False), (None, None)])
def test_a_source_partition_gone_has_nothing_to_lose_and_an_unanswered_one_cannot_be_told(
    no_reads, source_has, answer
) -> None:
    no_reads.setattr(landed, "_source_partitions", _source_has(source_has))
    check = landed.landed_check({}, {}, {"orders": "A.orders"}.get)

    assert check([("orders", 0, 7), ("gone", 0, 9)]) == {("orders", 0): answer, ("gone", 0): answer}
