"""What this process's copies set up and decided, counted (tests and benchmarks read them)."""

from __future__ import annotations

import threading


class Stats:
    """Client set-ups and recovery decisions this process made for copies."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.source_consumers_created = 0
        self.writers_opened = 0
        self.older_writers_fenced = 0
        self.transactions_swept = 0
        self.transactions_rewound = 0
        self.topic_id_checks = 0

    def add(self, name: str, count: int = 1) -> None:
        with self._lock:
            setattr(self, name, getattr(self, name) + count)


stats = Stats()
