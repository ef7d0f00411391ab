"""Fixtures of the MM2 interoperability tests: real MirrorMaker 2 processes that never outlive a test."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest

from localkafka.mirrormaker import MirrorMaker


@pytest.fixture
def mirror_maker(tmp_path: Path, kafka_clusters: object) -> Iterator[Callable[..., MirrorMaker]]:
    """`mirror_maker(properties_path, clusters=("B",))` starts MM2 in dedicated mode; every MM2
    the test started is stopped (SIGTERM, then SIGKILL) at teardown. It depends on `kafka_clusters`
    so that it is torn down first: MM2 must be gone before the clusters are emptied."""
    started: list[MirrorMaker] = []

    def start(properties: Path, *, clusters: Sequence[str] = ()) -> MirrorMaker:
        mm2 = MirrorMaker(properties, tmp_path / f"mm2-{len(started) + 1}", clusters=clusters)
        started.append(mm2)
        return mm2.start()

    yield start
    for mm2 in started:
        mm2.stop(timeout_s=30)
