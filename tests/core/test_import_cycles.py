"""No import cycles: a module never imports, directly or through others, a module that imports it.

Every import counts, at the top of a file or inside a function: a cycle through a function-level
import still ties two modules into one, and is only waiting for someone to hoist the import.
`from package import name` depends on `package.name` when that is a module, else on the package.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# Import name of each scanned tree's root -> its folder. The Locust files import each other by
# bare name (Locust puts their folder on the import path while it loads the locustfile).
ROOTS = {
    "tts_bench": REPO / "tts_bench",
    "tts_server": REPO / "container" / "tts_server",
    "": REPO / "loadtest",
}


def module_files() -> dict[str, Path]:
    """Dotted module name -> file, for every module of the scanned trees."""
    modules: dict[str, Path] = {}
    for name, root in ROOTS.items():
        for path in root.rglob("*.py"):
            parts = [*filter(None, [name]), *path.relative_to(root).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts = parts[:-1]
            modules[".".join(parts)] = path
    return modules


def imports_of(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The scanned modules that module `name` imports, anywhere in its file."""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package[: len(package) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            for alias in node.names:
                child = f"{base}.{alias.name}"
                found.add(child if child in modules else base)
    return {module for module in found if module in modules and module != name}


def cycles(graph: dict[str, set[str]]) -> Iterator[frozenset[str]]:
    """Every strongly connected set of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                members = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    members.add(member)
                    if member == node:
                        break
                if len(members) > 1:
                    yield frozenset(members)


def import_graph() -> dict[str, set[str]]:
    modules = module_files()
    return {name: imports_of(name, path, modules) for name, path in modules.items()}


def test_no_module_imports_itself_through_others() -> None:
    found = set(cycles(import_graph()))
    assert not found, [sorted(cycle) for cycle in found]


@pytest.mark.parametrize(
    ("graph", "expected"),
    [
        ({"a": {"b"}, "b": {"c"}, "c": set()}, []),
        ({"a": {"b"}, "b": {"a"}}, [{"a", "b"}]),
        ({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}, [{"a", "b", "c"}]),
        ({"a": {"b"}, "b": {"a"}, "c": {"d"}, "d": {"c"}}, [{"a", "b"}, {"c", "d"}]),
    ],
)
def test_the_cycle_finder_finds_what_is_there(
    graph: dict[str, set[str]], expected: list[set[str]]
) -> None:
    assert sorted(map(sorted, cycles(graph))) == sorted(map(sorted, expected))


def test_a_function_level_import_counts(tmp_path: Path) -> None:
    library = tmp_path / "library.py"
    library.write_text("def main():\n    from pkg.command import run\n", encoding="utf-8")
    modules = {"pkg.library": library, "pkg.command": tmp_path / "command.py"}
    assert imports_of("pkg.library", library, modules) == {"pkg.command"}
