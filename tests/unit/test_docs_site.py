"""The documentation site builds with `mkdocs build --strict` (the suite is what CI runs), its
generated references name every key and command the code has, and a broken link fails the build."""

from __future__ import annotations

import dataclasses
import html
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mirrorflow.cli import main
from mirrorflow.config import MIRRORFLOW_KEYS, key_kinds, keys
from mirrorflow.config.flow import FlowConfig
from tests.unit.docs_hooks import DOCS, ROOT, plain, references

# FlowConfig fields that are not one key's value (the flow's identity and the objects built from keys).
NOT_KEYS = {
    "source",
    "target",
    "settings",
    "policy",
    "topic_filter",
    "group_filter",
    "config_property_filter",
}


def build(config_dir: Path, site_dir: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site_dir)],
        cwd=config_dir,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=240,
    )


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    site_dir = tmp_path_factory.mktemp("site")
    result = build(ROOT, site_dir)
    assert result.returncode == 0, f"mkdocs build --strict failed:\n{result.stdout}\n{result.stderr}"
    return site_dir


def text_of(page: Path) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", page.read_text()))


def test_every_key_the_code_has_is_on_the_built_reference_page(site: Path) -> None:
    """Each spec'd key heads a row of its own; each listed key (3.x names, client security keys,
    worker keys without effect) is named in code type."""
    page = html.unescape(
        (site / "configuration" / "reference" / "index.html").read_text().replace("<wbr>", "")
    )
    rows = {spec.name for spec in (*keys.CONNECTOR_KEYS, *keys.OFFSET_STORAGE_KEYS, *keys.FILE_KEYS)}
    rows |= {key.name for key in MIRRORFLOW_KEYS}
    listed = (
        set(keys.DEPRECATED_ALIASES)
        | key_kinds.WORKER_KEYS
        | key_kinds.SSL_CLIENT_KEYS
        | key_kinds.SASL_CLIENT_KEYS
        | key_kinds.LIBRDKAFKA_SECURITY_KEYS
    )
    missing = sorted(name for name in rows if f"<td><code>{name}</code></td>" not in page)
    missing += sorted(name for name in listed if f"<code>{name}</code>" not in page)
    assert not missing, f"keys missing from the configuration reference: {missing}"


def test_every_flow_setting_is_a_documented_key() -> None:
    """A key the code reads becomes a FlowConfig field; each field must come from a documented spec,
    so a key added to the code without one (and so without a row in the reference) fails here."""
    documented = {spec.attribute for spec in (*keys.CONNECTOR_KEYS, *keys.OFFSET_STORAGE_KEYS)}
    documented |= {key.attribute for key in MIRRORFLOW_KEYS if key.scope != "cluster"}
    fields = {field.name for field in dataclasses.fields(FlowConfig)} - NOT_KEYS
    assert sorted(fields - documented) == []


def test_every_key_row_says_what_the_key_means() -> None:
    page = plain(references.expand((DOCS / "configuration" / "reference.md").read_text()))
    rows = [line for line in page.splitlines() if line.startswith("| `")]
    assert len(rows) >= len(keys.CONNECTOR_KEYS) + len(keys.OFFSET_STORAGE_KEYS) + len(keys.FILE_KEYS) + len(
        MIRRORFLOW_KEYS
    )
    for row in rows:
        assert row.rstrip(" |").rsplit(" | ", 1)[-1].strip(), f"a key without a meaning: {row}"


def test_every_command_and_option_is_on_the_built_cli_page(site: Path) -> None:
    page = text_of(site / "reference" / "cli" / "index.html")
    for name, command in main.commands.items():
        assert f"mirrorflow {name}" in page
        for param in command.params:
            for opt in param.opts if param.param_type_name == "option" else ():
                assert opt in page, f"{opt} of mirrorflow {name} is missing from the CLI reference"


def test_an_unknown_or_inline_marker_fails_the_build() -> None:
    with pytest.raises(references.UnknownMarker, match="mm3-keys"):
        references.expand("<!-- mirrorflow:mm3-keys -->\n")
    with pytest.raises(references.UnknownMarker, match="alone on its line"):
        references.expand("keys: <!-- mirrorflow:mm2-keys -->\n")


def test_a_broken_anchor_fails_the_strict_build(tmp_path: Path) -> None:
    (tmp_path / "mkdocs.yml").write_text((ROOT / "mkdocs.yml").read_text())
    shutil.copytree(DOCS, tmp_path / "docs")
    (tmp_path / "include").symlink_to(ROOT / "include")
    page = tmp_path / "docs" / "operations" / "migration.md"
    page.write_text(page.read_text() + "\nSee [the form](../airflow/migrate.md#no-such-section).\n")
    result = build(tmp_path, tmp_path / "site")
    assert result.returncode != 0
    assert "operations/migration.md" in result.stderr and "no-such-section" in result.stderr


def test_the_readme_is_a_front_door_whose_links_resolve() -> None:
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 300
    assert "make demo" in readme and "make test" in readme
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", readme)
    assert links
    broken = [link for link in links if "://" not in link and not (ROOT / link).exists()]
    assert not broken, f"README links to missing files: {broken}"


LIST_ITEM = re.compile(r"^(- |\* |\d+\. )")


def test_every_list_of_the_docs_is_set_off_from_the_paragraph_before_it() -> None:
    """Markdown (Python-Markdown, which the site uses) reads a list right under a paragraph line
    as more of the paragraph: the CLI page's "Output for scripts and CI" list rendered as one run
    of text (issue 36)."""
    glued = []
    for page in sorted(DOCS.rglob("*.md")):
        lines, fenced = page.read_text().splitlines(), False
        for number, (before, line) in enumerate(zip(lines, lines[1:], strict=False), start=2):
            fenced ^= before.startswith("```")
            if fenced or not LIST_ITEM.match(line) or not before.strip():
                continue
            if LIST_ITEM.match(before.lstrip()) or before.startswith(("  ", "|", "#", "<!--")):
                continue
            glued.append(f"{page.relative_to(DOCS)}:{number}: {line[:50]}")
    assert not glued, "a list glued to the paragraph above it (add a blank line):\n" + "\n".join(glued)
