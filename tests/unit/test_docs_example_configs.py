"""Every config under include/config is shown on the example-configs page, included from the file
itself at build time (test_config_examples loads and checks each one)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "configuration" / "examples.md"


def test_the_examples_page_includes_every_config_file() -> None:
    included = re.findall(r'^--8<-- "include/config/(\S+?)"$', PAGE.read_text(), re.M)
    files = sorted(
        str(path.relative_to(ROOT / "include" / "config"))
        for path in (ROOT / "include" / "config").rglob("*.properties")
    )
    assert sorted(included) == files, (
        "docs/configuration/examples.md must include each file under include/config once"
    )
