"""Fixtures of the integration tests beside the shared ones in tests/conftest.py."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from mirrorflow.config import MirrorConfig

from .status_helpers import StatusClient, status_client


@pytest.fixture
def status_app() -> Iterator[Callable[..., StatusClient]]:
    """`status_app(config, **create_app options)`: the status app with its first snapshot read;
    its refresh thread is stopped at teardown."""
    with contextlib.ExitStack() as stack:

        def make(config: MirrorConfig, **options: Any) -> StatusClient:
            return stack.enter_context(status_client(config, **options))

        yield make
