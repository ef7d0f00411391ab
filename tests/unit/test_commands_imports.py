"""The modules of mirrorflow.commands import one another without a circle: none imports a module
that imports it back, at module level, inside a function or under TYPE_CHECKING. A circle worked
only while every import in it stayed where it was (replicate.py imported window.py, which imported
replicate.py back from inside a function, "it imports this module")."""

from __future__ import annotations

import ast
from pathlib import Path

import mirrorflow.commands

PACKAGE = "mirrorflow.commands"
ROOT = Path(mirrorflow.commands.__file__).parent


def commands_imported(path: Path) -> set[str]:
    """The modules of the package that `path` imports anywhere in it."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module == PACKAGE:
                found.update(alias.name for alias in node.names)
            elif node.module.startswith(PACKAGE + "."):
                found.add(node.module.removeprefix(PACKAGE + ".").split(".")[0])
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith(PACKAGE + "."):
                    found.add(alias.name.removeprefix(PACKAGE + ".").split(".")[0])
    return found - {path.stem}


def circle(graph: dict[str, set[str]]) -> list[str] | None:
    """A circle of imports in `graph`, as the modules on it, or None."""
    state: dict[str, int] = {}  # 1: on the path being walked, 2: done

    def walk(name: str, path: list[str]) -> list[str] | None:
        state[name] = 1
        for other in sorted(graph.get(name, ())):
            if state.get(other) == 1:
                return [*path[path.index(other) :], other]
            if other not in state and (found := walk(other, [*path, other])):
                return found
        state[name] = 2
        return None

    for start in sorted(graph):
        if start not in state and (found := walk(start, [start])):
            return found
    return None


def test_no_module_of_commands_imports_one_that_imports_it_back() -> None:
    graph = {path.stem: commands_imported(path) for path in sorted(ROOT.glob("*.py"))}
    found = circle(graph)
    assert found is None, "import circle in mirrorflow.commands: " + " -> ".join(found or [])


def test_the_circle_finder_finds_circles_through_function_level_imports(tmp_path) -> None:
    (tmp_path / "a.py").write_text("from mirrorflow.commands.b import x\n")
    (tmp_path / "b.py").write_text("def f():\n    from mirrorflow.commands import a\n")
    graph = {path.stem: commands_imported(path) for path in sorted(tmp_path.glob("*.py"))}
    assert circle(graph) == ["a", "b", "a"]
