from __future__ import annotations

from collections.abc import Iterator

import pytest

from mirrorflow.airflow.local import AirflowHome

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


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "/e2e/" in str(item.fspath):
            item.add_marker(pytest.mark.e2e)
