"""Which APIs the broker answers, at which versions, and with which handler.

Handler modules register themselves with `@handles(...)`; the server dispatches on the
api key and builds the ApiVersions answer from this table, so an API is advertised
exactly when something implements it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from typing import Any

Handler = Callable[["RequestContext", Any], Awaitable[Any]]


@dataclasses.dataclass(frozen=True, slots=True)
class ApiHandler:
    api_key: int
    min_version: int
    max_version: int
    func: Handler


HANDLERS: dict[int, ApiHandler] = {}


def handles(api_key: int, min_version: int, max_version: int) -> Callable[[Handler], Handler]:
    """Register `func(ctx, request) -> response dict or entity` for an API version range."""

    def register(func: Handler) -> Handler:
        if api_key in HANDLERS:
            raise RuntimeError(f"api key {api_key} registered twice ({HANDLERS[api_key].func.__name__})")
        HANDLERS[api_key] = ApiHandler(api_key, min_version, max_version, func)
        return func

    return register


@dataclasses.dataclass(slots=True)
class RequestContext:
    """What a handler knows about the request besides its body."""

    broker: Any  # devbroker.broker.Broker
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    client_host: str
    connection_id: int
