"""What the Airflow plugin mounts: the status app wired to the api-server's config, login and
connections. The config is read on each status refresh, so edits show up without a restart."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI

from mirrorflow.airflow.settings import config_path
from mirrorflow.airflow.status_app import create_app
from mirrorflow.config import MirrorConfig, load_config


def _load() -> MirrorConfig:
    return load_config(str(config_path()))


def _connection_extra(conn_id: str) -> dict[str, Any]:
    # The api-server has the metadata DB and the secrets backends, but no task context.
    from airflow.models.connection import Connection

    return Connection.get_connection_from_secrets(conn_id).extra_dejson


def status_fastapi_app() -> FastAPI:
    from airflow.api_fastapi.core_api.security import requires_authenticated

    return create_app(_load, connection_extra=_connection_extra, login_required=requires_authenticated())
