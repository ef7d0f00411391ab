"""A worker's share of its flow's byte rate (replicate/copy/clients.Throttle), on a clock the
test moves: what it lets through over time, not how long a test waits."""

from __future__ import annotations

import pytest

from mirrorflow.replicate.copy import clients
from mirrorflow.replicate.copy.clients import Throttle


@pytest.fixture
def clock(monkeypatch):
    now = [1000.0]
    monkeypatch.setattr(clients.time, "monotonic", lambda: now[0])
    monkeypatch.setattr(clients.time, "sleep", lambda seconds: now.__setitem__(0, now[0] + seconds))
    return now


def test_reads_are_held_to_the_rate_over_any_stretch_longer_than_the_burst(clock) -> None:
    throttle = Throttle(1_000_000)
    start = clock[0]
    for _ in range(100):
        throttle.take(100_000)  # 10 MB in all
    elapsed = clock[0] - start
    assert 10 - Throttle.BURST_S <= elapsed <= 10


def test_a_pause_earns_no_more_than_a_burst(clock) -> None:
    throttle = Throttle(1_000_000)
    throttle.take(1_000_000)
    clock[0] += 60  # idle for a minute: the budget does not pile up
    start = clock[0]
    for _ in range(20):
        throttle.take(100_000)
    assert clock[0] - start >= 2 - Throttle.BURST_S - 1e-9


def test_no_cap_never_waits(clock) -> None:
    throttle = Throttle(0)
    start = clock[0]
    throttle.take(10**12)
    assert clock[0] == start
