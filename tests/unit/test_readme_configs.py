"""The configs the README shows are exactly the files in include/config/examples (which
test_config_examples loads and checks)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_readme_config_blocks_equal_the_example_files() -> None:
    readme = (ROOT / "README.md").read_text()
    blocks = re.findall(
        r"<code>include/config/(\S+?)</code></summary>\n\n```properties\n(.*?)\n```", readme, re.S
    )
    assert len(blocks) == 4
    for name, text in blocks:
        path = ROOT / "include" / "config" / name
        assert path.read_text().rstrip() == text, f"README's copy of {name} is out of date"
