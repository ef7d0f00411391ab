"""Which partitions a window's batch asks the end offset of: every one with records lately, and
the quiet ones in turns, each once in as many batches as fit in QUIET_ASKED_S at the interval
(window/partitions.py)."""

from __future__ import annotations

import pytest

from mirrorflow.replicate.plan import PartitionSpan
from mirrorflow.replicate.window import partitions
from mirrorflow.replicate.window.partitions import PartitionState
from mirrorflow.replicate.window.settings import QUIET_AFTER_S, QUIET_ASKED_S, WindowSettings


def _settings(interval_s: float) -> WindowSettings:
    return WindowSettings(ends_ms=0, interval_s=interval_s, handover_s=0.0, refresh_s=None, max_records=100)


@pytest.mark.parametrize(("interval_s", "turns"), [(0.25, 4), (0.2, 5), (0.5, 2), (1.0, 1), (5.0, 1)])
def test_quiet_partitions_are_asked_at_least_every_quiet_asked_s(interval_s: float, turns: int) -> None:
    settings = _settings(interval_s)
    assert settings.quiet_turns == turns
    assert settings.quiet_turns * interval_s <= QUIET_ASKED_S or turns == 1


def _state(turn: int, progress: int = 9) -> PartitionState:
    return PartitionState(
        PartitionSpan("t", turn, "A.t", progress + 1, progress + 1, progress=progress), 2, turn
    )


def test_a_partition_is_asked_every_batch_until_it_has_been_quiet_long_enough(monkeypatch) -> None:
    clock = [1000.0]
    monkeypatch.setattr(partitions.time, "monotonic", lambda: clock[0])
    states = [_state(turn) for turn in range(8)]
    for st in states:
        st.listed(10, 0)  # its end, all of it copied (progress 9)
    # Not quiet yet: every batch asks every partition.
    for batch in range(6):
        assert all(st.due(clock[0], batch, 4) for st in states)
    clock[0] += QUIET_AFTER_S
    # Quiet: each batch asks a quarter of them, every partition once in four batches.
    asked = [[st.turn for st in states if st.due(clock[0], batch, 4)] for batch in range(8)]
    assert asked[:4] == [[0, 4], [1, 5], [2, 6], [3, 7]] and asked[4:] == asked[:4]
    # The first batch of a task asks everything.
    assert all(st.due(clock[0], 3, 4, first=True) for st in states)


def test_a_quiet_partition_whose_end_moves_is_asked_every_batch_again(monkeypatch) -> None:
    clock = [1000.0]
    monkeypatch.setattr(partitions.time, "monotonic", lambda: clock[0])
    st = _state(1)
    st.listed(10, 0)
    clock[0] += QUIET_AFTER_S
    assert st.quiet(clock[0]) and not st.due(clock[0], 0, 4)
    st.listed(12, 0)  # records arrived: asked every batch from now on
    assert not st.quiet(clock[0]) and all(st.due(clock[0], batch, 4) for batch in range(4))
    # Records left to copy keep it asked however long its end stands still.
    clock[0] += 2 * QUIET_AFTER_S
    assert not st.quiet(clock[0])
    st.committed = 11
    assert st.quiet(clock[0])


def test_a_partition_waiting_to_be_retried_is_not_asked(monkeypatch) -> None:
    clock = [1000.0]
    monkeypatch.setattr(partitions.time, "monotonic", lambda: clock[0])
    st = _state(0)
    st.absent(0.25)
    assert not st.due(clock[0], 0, 1, first=True)
    clock[0] += 1.0
    assert st.due(clock[0], 0, 1)
