"""MM2's checkpoint emission rule (MirrorCheckpointTask): mirrorflow writes a checkpoint exactly when
MM2 would, so readers of the checkpoints topic see MM2's behaviour."""

from __future__ import annotations

import pytest

from mirrorflow.control.checkpoints import should_emit
from mirrorflow.mm2.formats import Checkpoint


def checkpoint(upstream: int, downstream: int, group: str = "g1") -> Checkpoint:
    return Checkpoint(group, "source1.topic1", 0, upstream, downstream)


@pytest.mark.parametrize(
    ("previous", "new", "expected"),
    [
        (None, checkpoint(10, 5), True),  # first for this group and partition
        (checkpoint(10, 5), checkpoint(9, 3), True),  # upstream rewind: emitted although downstream rewinds
        (checkpoint(10, 5), checkpoint(12, 6), True),  # downstream advanced
        (checkpoint(10, 5), checkpoint(12, 5), False),  # repeat of the downstream offset
        (checkpoint(10, 5), checkpoint(10, 5), False),  # exact repeat
        (checkpoint(10, 5), checkpoint(12, 4), False),  # downstream would rewind
    ],
)
def test_checkpoint_emission_rule(previous: Checkpoint | None, new: Checkpoint, expected: bool) -> None:
    assert should_emit(previous, new) is expected


def test_checkpoint_rule_needs_the_same_group_and_partition() -> None:
    with pytest.raises(ValueError, match="same group and partition"):
        should_emit(checkpoint(1, 1, group="a"), checkpoint(2, 2, group="b"))
