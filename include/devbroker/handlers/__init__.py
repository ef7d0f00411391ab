"""Request handlers, one module per API family.

Each module registers its handlers with `devbroker.registry.handles` when imported; the
server calls `load_all()` once so that every module in this package is imported and what
ApiVersions advertises is exactly what the package implements.
"""

from __future__ import annotations

import importlib
import pkgutil


def load_all() -> list[str]:
    """Import every handler module of this package; returns their names."""
    names = sorted(info.name for info in pkgutil.iter_modules(__path__))
    for name in names:
        importlib.import_module(f"{__name__}.{name}")
    return names
