"""Seeded fault schedules against a real flow (tests/chaos/schedule.py): kill -9 and SIGSTOP of
runs, a concurrent run, a target broker killed or frozen, the source killed, its link dark; then
a clean run, and the target must hold every committed source record exactly once, in order,
byte-equal, with exact offset-syncs, progress never ahead of visible data and nothing left open.

`make test` keeps two short schedules on a single-node target with Kafka's default broker
settings: batch runs back to back (seed 3) and micro-batch windows back to back (seed 17). The long schedules, on both target shapes, are marked chaos (`make chaos`); their
length comes from MIRRORFLOW_CHAOS_MINUTES (default 30) and their seed from MIRRORFLOW_CHAOS_SEED.
benchmarks/chaos.py runs the same from the command line. A failure prints the seed, the schedule
and the first differences: the same seed replays the same faults.
"""

from __future__ import annotations

import os
from itertools import pairwise

import pytest

from .runs import classify
from .schedule import MICRO_BATCH_KINDS, MODES, SHAPES, draw_schedule, kinds, run_schedule

pytestmark = pytest.mark.local_kafka

SHORT_S = 40
SHORT = ((3, "batch"), (17, "micro-batch"))
"""The short schedules of `make test`: (seed, mode); between them they meet every kind of fault."""
LONG_S = float(os.environ.get("MIRRORFLOW_CHAOS_MINUTES", "30")) * 60
LONG_SEED = int(os.environ.get("MIRRORFLOW_CHAOS_SEED", "34"))
# Start-up, the end of the schedule, clean runs and the check come on top of the schedule itself.
MARGIN_S = 600


def test_the_seed_alone_fixes_the_schedule() -> None:
    """Replaying a seed must replay its faults: nothing but the seed may feed the draw."""
    for mode in MODES:
        drawn = draw_schedule(LONG_SEED, 1800, 3, mode)
        assert drawn == draw_schedule(LONG_SEED, 1800, 3, mode) != draw_schedule(LONG_SEED + 1, 1800, 3, mode)
        assert {fault.kind for fault in drawn} == set(kinds(mode))
        assert all(a.at + a.hold < b.at for a, b in pairwise(drawn))
    # The short schedules of `make test` meet every kind of fault between them.
    met = {fault.kind for seed, mode in SHORT for fault in draw_schedule(seed, SHORT_S, 1, mode)}
    assert met == set(MICRO_BATCH_KINDS)


def test_a_run_is_recorded_with_the_reason_it_gave() -> None:
    error = (
        '{"ok": false, "error": "1 of 8 partitions failed:\\n  orders-3: fenced: another writer took over"}'
    )
    assert classify(1, False, error, "") == (
        "fenced",
        "1 of 8 partitions failed: | orders-3: fenced: another writer took over",
    )
    assert classify(-9, True, "", "") == ("killed by the schedule", "")
    assert classify(0, False, '{"ok": true, "error": null}', "") == ("ok", "")
    assert classify(1, False, "", "Traceback (most recent call last):\n  boom")[0] == "traceback"


@pytest.mark.parametrize(("seed", "mode"), SHORT)
def test_a_short_fault_schedule_on_a_single_node_target_loses_and_duplicates_nothing(
    seed, mode, tmp_path
) -> None:
    outcome = run_schedule(seed, SHORT_S, "single", tmp_path, mode)
    print(outcome.describe())
    assert outcome.ok, f"a fault schedule broke an invariant\n{outcome.describe()}"


@pytest.mark.chaos
@pytest.mark.timeout(LONG_S + MARGIN_S)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shape", list(SHAPES))
def test_a_long_fault_schedule_loses_and_duplicates_nothing(shape, mode, tmp_path) -> None:
    outcome = run_schedule(LONG_SEED, LONG_S, shape, tmp_path, mode)
    print(outcome.describe())
    assert outcome.ok, f"a fault schedule broke an invariant\n{outcome.describe()}"


def test_a_transaction_the_source_left_hanging_is_ended_with_kafkas_command(local_kafka) -> None:
    """A source broker killed and restarted can lose the markers of the load's own transaction; the
    source then holds it open for good, and the schedule failed on it (seed 17, micro-batch, in the
    suite) though the copy had done nothing wrong. The schedule ends it as an operator would."""
    from ..conftest import UNVERIFIED
    from ..integration.kafkatools import create_topics
    from ..integration.wire import forge_hanging_transaction
    from .invariants import abort_hanging, wait_settled

    source = local_kafka(overrides=UNVERIFIED)
    create_topics(source.bootstrap, ("orders", 2))
    forge_hanging_transaction(
        source.bootstrap, "chaos-load-17", "orders", 1, [(b"k", b"v")], 1_700_000_000_000
    )
    assert wait_settled(source.bootstrap, ["orders"], 1) == ["orders (1 partitions)"]

    ended = abort_hanging(source.bootstrap, ["orders"])

    assert ended == ["orders-1 from offset 0: exit 0"], ended
    assert wait_settled(source.bootstrap, ["orders"], 30) == []
