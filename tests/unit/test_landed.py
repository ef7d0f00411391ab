"""copy/landed.py's answer for a topic whose remote topic the caller does not know."""

from __future__ import annotations

from mirrorflow.replicate.copy import landed


def test_a_topic_without_a_known_remote_topic_cannot_be_told_and_reads_nothing(monkeypatch) -> None:
    """A slot writer knows the remote topics of its plan's topics only: for another topic the
    answer is "cannot be told" (the hanging transaction is left open and reported), never a read
    of a guessed remote topic."""

    def no_read(*args, **kwargs):
        raise AssertionError("read a partition for a topic whose remote topic is unknown")

    monkeypatch.setattr(landed, "_record_at", no_read)
    monkeypatch.setattr(landed, "_last_committed", no_read)
    check = landed.landed_check({}, {}, {"orders": "A.orders"}.get)

    assert check("elsewhere", 3, 41) is None
