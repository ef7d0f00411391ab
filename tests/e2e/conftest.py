from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from mirrorflow.airflow.local import AirflowHome

from .builds import EXECUTOR_ENV_NAME, Built, build_executor_env, build_wheel
from .spark_standalone import SparkStandalone, start_standalone


@pytest.fixture(scope="session")
def airflow_home(tmp_path_factory: pytest.TempPathFactory) -> AirflowHome:
    home = AirflowHome(tmp_path_factory.mktemp("airflow-home"))
    home.migrate()
    return home


@pytest.fixture(scope="session")
def spark_standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkStandalone]:
    """A Spark standalone cluster started on first use and shared by this worker's tests."""
    cluster = start_standalone(tmp_path_factory.mktemp("spark"))
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def mirrorflow_wheel(tmp_path_factory: pytest.TempPathFactory) -> Built:
    """The wheel as `make dist` builds it, once for this worker's tests that need it."""
    return build_wheel(tmp_path_factory.mktemp("dist"))


@pytest.fixture(scope="session")
def executor_env(mirrorflow_wheel: Built, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The executors' packed environment as `make executor-env` builds it, from that wheel."""
    built = build_executor_env(mirrorflow_wheel, tmp_path_factory.mktemp("executor-env") / EXECUTOR_ENV_NAME)
    print(f"{built.name}: {built.stat().st_size:,} bytes; seconds {mirrorflow_wheel.seconds}")
    return built


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "/e2e/" in str(item.fspath):
            item.add_marker(pytest.mark.e2e)
