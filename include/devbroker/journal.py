"""Append-only journal of metadata changes (topics, configs, offsets, ACLs, producer and
transaction state) for brokers started with --data-dir.

Record data has its own segment files; everything else a broker acknowledges is one JSON
line here, written before the response leaves, so a restart replays exactly what clients
were told succeeded. At start-up the journal is replayed and then rewritten as a snapshot
of the live state, so it does not grow without bound across restarts.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

Entry = tuple[str, dict[str, Any]]


class Journal:
    def __init__(self, path: Path | None, *, fsync: bool = False) -> None:
        self.path = path
        self.fsync = fsync
        self._fd: int | None = None

    @property
    def enabled(self) -> bool:
        return self.path is not None

    def replay(self) -> Iterator[Entry]:
        """Entries in the order they were written; a torn last line (crash mid-write) is ignored."""
        if self.path is None or not self.path.exists():
            return
        with self.path.open("rb") as fh:
            for raw in fh:
                if not raw.endswith(b"\n"):
                    break
                entry = json.loads(raw)
                yield entry["k"], entry["v"]

    def append(self, kind: str, **fields: Any) -> None:
        if self.path is None:
            return
        if self._fd is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        os.write(self._fd, _line(kind, fields))
        if self.fsync:
            os.fsync(self._fd)

    def rewrite(self, entries: Iterable[Entry]) -> None:
        """Atomically replace the journal with `entries` (a snapshot of the live state)."""
        if self.path is None:
            return
        self.close()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        with tmp.open("wb") as fh:
            for kind, fields in entries:
                fh.write(_line(kind, fields))
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, self.path)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def _line(kind: str, fields: dict[str, Any]) -> bytes:
    return json.dumps({"k": kind, "v": fields}, separators=(",", ":")).encode() + b"\n"
