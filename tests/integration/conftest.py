"""Fixtures of the integration tests beside the shared ones in tests/conftest.py."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from mirrorflow.config import MirrorConfig

from .kafkatools import create_topics
from .status_helpers import StatusClient, status_client
from .test_copy import PROGRESS, SYNCS_ON_SOURCE


@pytest.fixture
def status_app() -> Iterator[Callable[..., StatusClient]]:
    """`status_app(config, **create_app options)`: the status app with its first snapshot read;
    its refresh thread is stopped at teardown."""
    with contextlib.ExitStack() as stack:

        def make(config: MirrorConfig, **options: Any) -> StatusClient:
            return stack.enter_context(status_client(config, **options))

        yield make


@pytest.fixture
def clusters(kafka_clusters):
    """Clusters A and B of the copy-engine tests: the flow's offset-syncs topic on A (the source)
    and its progress topic on B, both compacted as MM2 creates them."""
    src, dst = kafka_clusters(2)
    create_topics(src.bootstrap, (SYNCS_ON_SOURCE, 1, {"cleanup.policy": "compact"}))
    create_topics(dst.bootstrap, (PROGRESS, 25, {"cleanup.policy": "compact"}))
    return src, dst
