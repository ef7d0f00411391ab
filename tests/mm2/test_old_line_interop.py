"""A migration off an old cluster often starts with the MirrorMaker 2 that came with it: real MM2
of the old line (3.9, beside its 3.9 source) and mirrorflow take turns on one flow into a 4.4
target, each continuing where the other stopped, without a gap or a repeat.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from localkafka import runtime
from localkafka.mirrormaker import MirrorMaker
from mirrorflow.config import load_config

from ..conftest import Cluster, cluster_pair
from ..integration.kafkatools import create_topics, read_all
from ..integration.mirror_setup import replicate_once
from .interop import copied_by_mirrorflow, partition_contents, produce_shaped, write_properties
from .mm2_process import end_offsets, reached, source_offsets

OLD_LINE = runtime.test_lines()[0].name  # the newest older line: 3.9
PARTITIONS = 2
THIRD = 150  # records per turn, over all partitions
MM2_WAIT_S = 120.0
CLEAN_EXIT = 143


@pytest.fixture(scope="module")
def old_and_new(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[Cluster]]:
    with cluster_pair(tmp_path_factory, lines=(OLD_LINE, None)) as (old, new):
        yield [Cluster("A", old.bootstrap, old), Cluster("B", new.bootstrap, new)]


@pytest.fixture
def old_mirror_maker(tmp_path: Path) -> Iterator[list[MirrorMaker]]:
    """MM2 processes of the old line this test starts; each is stopped at teardown."""
    started: list[MirrorMaker] = []
    yield started
    for mm2 in started:
        mm2.stop(timeout_s=30)


def _start(started: list[MirrorMaker], properties: Path, work_dir: Path) -> MirrorMaker:
    mm2 = MirrorMaker(properties, work_dir, clusters=("B",), line=OLD_LINE)
    started.append(mm2)
    return mm2.start()


def test_old_mm2_and_mirrorflow_take_turns_on_one_flow(
    old_and_new: list[Cluster], old_mirror_maker: list[MirrorMaker], tmp_path: Path, unique
) -> None:
    """mirrorflow copies a third; MM2 3.9 continues from there and stops cleanly after the second
    third; mirrorflow copies exactly the last third. One test, so the pair starts once."""
    a, b = old_and_new
    topic = unique("orders")
    properties = write_properties(
        tmp_path, [a, b], f"topics = {topic}\nB.offset.flush.interval.ms = 600000\n"
    )
    config = load_config(str(properties))
    create_topics(a.bootstrap, (topic, PARTITIONS))
    produce_shaped(a.bootstrap, topic, PARTITIONS, THIRD)
    replicate_once(config, "A", "B", unique("run"))
    produce_shaped(a.bootstrap, topic, PARTITIONS, THIRD, start=THIRD)
    second_ends = end_offsets(a.bootstrap, topic)

    mm2 = _start(old_mirror_maker, properties, tmp_path / "mm2")
    mm2.wait_for(
        lambda: reached(end_offsets(b.bootstrap, f"A.{topic}"), second_ends),
        "copy the second third",
        MM2_WAIT_S,
    )
    assert mm2.stop() == CLEAN_EXIT
    # A clean stop stores MM2's source offsets (the periodic flush is ten minutes away).
    stored = {k: v for k, v in source_offsets(b.bootstrap, "A").items() if k[0] == topic}
    assert stored == {(topic, p): end - 1 for p, end in second_ends.items()}

    produce_shaped(a.bootstrap, topic, PARTITIONS, THIRD, start=2 * THIRD)
    run = replicate_once(config, "A", "B", unique("run"))

    assert run["topics"][topic]["records"] == THIRD, "exactly the last third, nothing again"
    assert partition_contents(b.bootstrap, f"A.{topic}", PARTITIONS) == partition_contents(
        a.bootstrap, topic, PARTITIONS
    )
    per = THIRD // PARTITIONS
    for p in range(PARTITIONS):
        by_mirrorflow = [copied_by_mirrorflow(r) for r in read_all(b.bootstrap, f"A.{topic}", p)]
        assert by_mirrorflow == [True] * per + [False] * per + [True] * per, (
            "each began where the other stopped"
        )
