"""How the heartbeat DAG spreads MM2's emit intervals over Airflow runs."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from mirrorflow.control.heartbeats import heartbeat_period, heartbeat_schedule, heartbeat_window

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("interval_s", "period_s"),
    [(1, 60), (7, 63), (45, 90), (60, 60), (300, 300), (0, 60), (0.25, 60)],
)
def test_period_is_a_whole_number_of_intervals_of_at_least_a_minute(interval_s, period_s) -> None:
    assert heartbeat_period([timedelta(seconds=interval_s)]) == timedelta(seconds=period_s)


def test_an_hour_long_run_gives_24_runs_a_day_for_every_pair_together() -> None:
    hour = timedelta(hours=1)
    assert heartbeat_period([timedelta(seconds=1)] * 6, hour) == hour
    assert timedelta(days=1) / heartbeat_period([timedelta(seconds=1)] * 6, hour) == 24
    # The shortest interval sets the grid; the longest still fits in a run at least once.
    assert heartbeat_period([timedelta(seconds=7), timedelta(seconds=45)], hour) == timedelta(seconds=3605)
    assert heartbeat_period([timedelta(seconds=1), timedelta(hours=2)], hour) == timedelta(hours=2)
    with pytest.raises(ValueError, match="no pair"):
        heartbeat_period([], hour)


def test_window_ends_one_interval_before_the_next_run() -> None:
    interval = [timedelta(seconds=1)]
    assert heartbeat_window(interval, T0, T0) == 59.0
    # A run that starts late keeps the next run's slot: it emits for less.
    assert heartbeat_window(interval, T0, T0 + timedelta(seconds=4)) == 55.0
    # A run so late that its slot is over still emits its single immediate heartbeat.
    assert heartbeat_window(interval, T0, T0 + timedelta(minutes=5)) == 0.0
    # An hour-long run ends one shortest interval before the next.
    both = [timedelta(seconds=1), timedelta(seconds=30)]
    assert heartbeat_window(both, T0, T0, timedelta(hours=1)) == 3599.0


def test_an_interval_of_a_minute_or_more_emits_once_per_run() -> None:
    assert heartbeat_window([timedelta(minutes=10)], T0, T0) == 0.0
    assert heartbeat_schedule([600.0], 0.0) == [(0.0, 0)]


def test_schedule_sends_at_start_and_every_interval_within_the_window() -> None:
    assert heartbeat_schedule([1.0], 3.0) == [(0.0, 0), (1.0, 0), (2.0, 0), (3.0, 0)]
    assert heartbeat_schedule([1.0], 2.5) == [(0.0, 0), (1.0, 0), (2.0, 0)]


def test_schedule_merges_emitters_with_their_own_intervals_in_time_order() -> None:
    schedule = heartbeat_schedule([2.0, 3.0], 6.0)
    assert schedule == [(0.0, 0), (0.0, 1), (2.0, 0), (3.0, 1), (4.0, 0), (6.0, 0), (6.0, 1)]


def test_interval_zero_is_capped_at_ten_heartbeats_a_second() -> None:
    assert len(heartbeat_schedule([0.0], 1.0)) == 11


def test_a_pair_whose_heartbeats_did_not_start_says_why_even_for_a_bare_timeout() -> None:
    """The target's ACL check times out with concurrent.futures' TimeoutError, which has no
    message: the log and the run said "no heartbeats this run: " and nothing more."""
    import concurrent.futures

    from mirrorflow.control.heartbeats import not_started_reason

    assert not_started_reason(concurrent.futures.TimeoutError(), "B") == "cluster B did not answer in time"
    assert (
        not_started_reason(TimeoutError("after 30s"), "B") == "cluster B did not answer in time (after 30s)"
    )
    assert not_started_reason(RuntimeError("refused"), "B") == "refused"
    assert "KeyError" in not_started_reason(KeyError(), "B")
