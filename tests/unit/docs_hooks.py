"""The site's reference hook, loaded for tests: docs/hooks/references.py is a file MkDocs loads by
path (mkdocs.yml `hooks:`), not a module of the package."""

from __future__ import annotations

import html
import importlib.util
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "mirrorflow_docs_references", DOCS / "hooks" / "references.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


references = _load()


def plain(markdown: str) -> str:
    """Generated tables back in plain Markdown: the hook writes their code spans as <code> with
    line-break opportunities (<wbr>) and entities, which read the same on the page."""
    return html.unescape(markdown.replace("<wbr>", "").replace("<code>", "`").replace("</code>", "`"))
