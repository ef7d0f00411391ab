"""The status app under test: a TestClient with its lifespan entered, so the refresh thread it
starts stops when the block ends, and its first snapshot read before the first request."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from fastapi.testclient import TestClient

from mirrorflow.airflow.status_app import create_app
from mirrorflow.config import MirrorConfig
from mirrorflow.control.status_snapshots import StatusSnapshots


class StatusClient(TestClient):
    @property
    def snapshots(self) -> StatusSnapshots:
        return self.app.state.status_snapshots  # type: ignore[attr-defined]

    def refresh(self) -> None:
        """Read the status now, as the refresh thread does every refresh_s."""
        self.snapshots.refresh()


@contextlib.contextmanager
def status_client(config: MirrorConfig, *, first_read: bool = True, **options: Any) -> Iterator[StatusClient]:
    with StatusClient(create_app(lambda: config, **options)) as client:
        if first_read:
            client.refresh()
        yield client
