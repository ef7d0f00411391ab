"""A migration off an old cluster often starts with the MirrorMaker 2 that came with it: real MM2
of the old line (3.9, beside its 3.9 source) and mirrorflow take turns on one flow into a 4.4
target, each continuing where the other stopped, without a gap or a repeat.

The pair of clusters is the module's own and shared by its tests; each test copies its own topic.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from localkafka import LocalKafka, runtime
from localkafka.mirrormaker import MirrorMaker
from mirrorflow.config import load_config

from ..conftest import TEST_BROKER_OVERRIDES, Cluster
from ..integration.kafkatools import create_topics, read_all
from ..integration.mirror_setup import replicate_once
from .interop import copied_by_mirrorflow, partition_contents, produce_shaped, write_properties
from .mm2_process import end_offsets, reached, source_offsets

OLD_LINE = runtime.test_lines()[0].name  # the newest older line: 3.9
PARTITIONS = 2
HALF = 200
MM2_WAIT_S = 120.0
CLEAN_EXIT = 143


@pytest.fixture(scope="module")
def old_and_new(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[Cluster]]:
    old = LocalKafka(tmp_path_factory.mktemp("kafka-old"), line=OLD_LINE, overrides=TEST_BROKER_OVERRIDES)
    new = LocalKafka(tmp_path_factory.mktemp("kafka-new"), overrides=TEST_BROKER_OVERRIDES)
    try:
        old.launch()
        new.launch()
        yield [Cluster("A", old.start().bootstrap, old), Cluster("B", new.start().bootstrap, new)]
    finally:
        old.stop()
        new.stop()


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


def test_old_mm2_continues_a_flow_mirrorflow_copied_half_of(
    old_and_new: list[Cluster], old_mirror_maker: list[MirrorMaker], tmp_path: Path, unique
) -> None:
    a, b = old_and_new
    topic = unique("orders")
    properties = write_properties(tmp_path, [a, b], f"topics = {topic}\nB.offset.flush.interval.ms = 1000\n")
    create_topics(a.bootstrap, (topic, PARTITIONS))
    produce_shaped(a.bootstrap, topic, PARTITIONS, HALF)
    replicate_once(load_config(str(properties)), "A", "B", unique("run"))
    produce_shaped(a.bootstrap, topic, PARTITIONS, HALF, start=HALF)

    mm2 = _start(old_mirror_maker, properties, tmp_path / "mm2")
    ends = end_offsets(a.bootstrap, topic)
    mm2.wait_for(
        lambda: reached(source_offsets(b.bootstrap, "A"), {(topic, p): end - 1 for p, end in ends.items()}),
        "store offsets of the second half",
        MM2_WAIT_S,
    )

    assert partition_contents(b.bootstrap, f"A.{topic}", PARTITIONS) == partition_contents(
        a.bootstrap, topic, PARTITIONS
    )
    half = HALF // PARTITIONS
    for p in range(PARTITIONS):
        by_mirrorflow = [copied_by_mirrorflow(r) for r in read_all(b.bootstrap, f"A.{topic}", p)]
        assert by_mirrorflow == [True] * half + [False] * half, "MM2 3.9 started right after mirrorflow"


def test_mirrorflow_continues_after_old_mm2_stopped(
    old_and_new: list[Cluster], old_mirror_maker: list[MirrorMaker], tmp_path: Path, unique
) -> None:
    a, b = old_and_new
    topic = unique("orders")
    properties = write_properties(
        tmp_path, [a, b], f"topics = {topic}\nB.offset.flush.interval.ms = 600000\n"
    )
    create_topics(a.bootstrap, (topic, PARTITIONS))
    produce_shaped(a.bootstrap, topic, PARTITIONS, HALF)
    first_ends = end_offsets(a.bootstrap, topic)

    mm2 = _start(old_mirror_maker, properties, tmp_path / "mm2")
    mm2.wait_for(
        lambda: reached(end_offsets(b.bootstrap, f"A.{topic}"), first_ends), "copy the first half", MM2_WAIT_S
    )
    assert mm2.stop() == CLEAN_EXIT
    assert {k: v for k, v in source_offsets(b.bootstrap, "A").items() if k[0] == topic} == {
        (topic, p): end - 1 for p, end in first_ends.items()
    }

    produce_shaped(a.bootstrap, topic, PARTITIONS, HALF, start=HALF)
    run = replicate_once(load_config(str(properties)), "A", "B", unique("run"))

    assert run["topics"][topic]["records"] == HALF, "exactly the second half, nothing again"
    assert partition_contents(b.bootstrap, f"A.{topic}", PARTITIONS) == partition_contents(
        a.bootstrap, topic, PARTITIONS
    )
