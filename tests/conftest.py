"""Shared fixtures: Kafka clusters for integration tests.

By default every cluster is a devbroker process on a free 127.0.0.1 port, stopped when the
test (or session) ends. Set MIRRORFLOW_TEST_BOOTSTRAP_A, _B and _C to run the same tests
against real Kafka clusters instead; tests that need to restart or reach into a broker
(marked `devbroker_only`) are then deselected.
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
import uuid
from collections.abc import Callable, Iterator

import pytest

from devbroker.launcher import DevBroker

# Airflow writes its home (config, SQLite DB, logs) on import; keep it out of the user's ~/airflow.
os.environ.setdefault("AIRFLOW_HOME", tempfile.mkdtemp(prefix="mirrorflow-test-airflow-"))
os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")

ALIASES = ("A", "B", "C", "D")
# Group rebalances wait group.initial.rebalance.delay.ms (Kafka: 3 s) before the first
# assignment; the test brokers use 0 as Kafka's own test and docker setups do.
TEST_BROKER_OVERRIDES = {"group.initial.rebalance.delay.ms": 0}


@dataclasses.dataclass
class Cluster:
    alias: str
    bootstrap: str
    broker: DevBroker | None = None

    def client_config(self, **extra: object) -> dict[str, object]:
        return {"bootstrap.servers": self.bootstrap, **extra}


def real_cluster_bootstraps() -> dict[str, str]:
    return {
        alias: os.environ[f"MIRRORFLOW_TEST_BOOTSTRAP_{alias}"]
        for alias in ALIASES
        if os.environ.get(f"MIRRORFLOW_TEST_BOOTSTRAP_{alias}")
    }


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "devbroker_only: needs devbroker processes (restart, data dir, internals)"
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not real_cluster_bootstraps():
        return
    deselected = [item for item in items if item.get_closest_marker("devbroker_only")]
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = [item for item in items if not item.get_closest_marker("devbroker_only")]


@pytest.fixture
def devbroker_factory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., DevBroker]]:
    """Start devbrokers on demand; every one started is stopped at teardown."""
    started: list[DevBroker] = []

    def start(*, data_dir: bool | str = False, **kwargs: object) -> DevBroker:
        overrides = {**TEST_BROKER_OVERRIDES, **kwargs.pop("overrides", {})}  # type: ignore[dict-item]
        path = None
        if data_dir is True:
            path = tmp_path_factory.mktemp("devbroker-data")
        elif data_dir:
            path = data_dir
        broker = DevBroker(data_dir=path, overrides=overrides, **kwargs)  # type: ignore[arg-type]
        started.append(broker)
        return broker.start()

    yield start
    for broker in started:
        broker.stop()


def _start_clusters(count: int, factory: Callable[..., DevBroker]) -> list[Cluster]:
    real = real_cluster_bootstraps()
    if real:
        missing = [alias for alias in ALIASES[:count] if alias not in real]
        if missing:
            pytest.fail(f"real-cluster mode needs MIRRORFLOW_TEST_BOOTSTRAP_{missing[0]} for this test")
        return [Cluster(alias, real[alias]) for alias in ALIASES[:count]]
    clusters = []
    for alias in ALIASES[:count]:
        broker = factory(cluster_id=f"devbroker-{alias.lower()}")
        clusters.append(Cluster(alias, broker.bootstrap, broker))
    return clusters


@pytest.fixture
def kafka_clusters(devbroker_factory: Callable[..., DevBroker]) -> Callable[[int], list[Cluster]]:
    """`kafka_clusters(2)` -> clusters A and B for this test alone."""
    return lambda count: _start_clusters(count, devbroker_factory)


@pytest.fixture(scope="session")
def shared_clusters(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[Cluster]]:
    """Three clusters shared by tests that only create uniquely named topics and groups."""
    real = real_cluster_bootstraps()
    if real:
        yield [Cluster(alias, bootstrap) for alias, bootstrap in real.items()]
        return
    brokers = [
        DevBroker(cluster_id=f"shared-{alias.lower()}", overrides=TEST_BROKER_OVERRIDES).start()
        for alias in ALIASES[:3]
    ]
    try:
        yield [Cluster(alias, b.bootstrap, b) for alias, b in zip(ALIASES, brokers, strict=False)]
    finally:
        for broker in brokers:
            broker.stop()


@pytest.fixture
def unique() -> Callable[[str], str]:
    """Names that never collide across tests sharing a cluster."""
    return lambda prefix: f"{prefix}-{uuid.uuid4().hex[:10]}"
