from __future__ import annotations

import pytest

from mirrorflow.airflow.local import AirflowHome


@pytest.fixture(scope="session")
def airflow_home(tmp_path_factory: pytest.TempPathFactory) -> AirflowHome:
    home = AirflowHome(tmp_path_factory.mktemp("airflow-home"))
    home.migrate()
    return home


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "/e2e/" in str(item.fspath):
            item.add_marker(pytest.mark.e2e)
