"""No function a reader cannot hold at once: none over 80 lines in the code the project ships.

A long function splits along the sections it already has (STYLE 13); this keeps it so. Lines
are counted from `def` to the last line of the body, docstring and comments included.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ROOTS = ("tts_bench", "container", "loadtest", "policies")
MAX_LINES = 80


def functions(tree: ast.AST, prefix: str = "") -> Iterator[tuple[str, int]]:
    """(qualified name, length in lines) of every function, methods and nested ones too."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            name = f"{prefix}{node.name}"
            yield name, (node.end_lineno or node.lineno) - node.lineno + 1
            yield from functions(node, f"{name}.")
        elif isinstance(node, ast.ClassDef):
            yield from functions(node, f"{prefix}{node.name}.")
        else:
            yield from functions(node, prefix)


def long_functions(paths: list[Path]) -> list[str]:
    found = []
    for path in paths:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for name, lines in functions(tree):
            where = f"{path.relative_to(REPO)}::{name}"
            if lines > MAX_LINES:
                found.append(f"{where}: {lines} lines")
    return found


def shipped_files() -> list[Path]:
    return sorted(p for root in ROOTS for p in (REPO / root).rglob("*.py") if "venv" not in p.parts)


def test_no_function_is_longer_than_a_reader_can_hold() -> None:
    assert long_functions(shipped_files()) == []


@pytest.mark.parametrize(("body_lines", "too_long"), [(MAX_LINES - 1, False), (MAX_LINES, True)])
def test_the_count_runs_from_def_to_the_last_line(body_lines: int, too_long: bool) -> None:
    source = "class C:\n    def method(self):\n" + "        x = 1\n" * body_lines
    path = REPO / "tests" / "core" / "_shadow_long.py"
    real_reader = Path.read_text

    def read_text(self: Path, *args: object, **kwargs: object) -> str:
        return source if self == path else real_reader(self, *args, **kwargs)  # type: ignore[arg-type]

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(Path, "read_text", read_text)
        found = long_functions([path])
    assert found == (
        [f"tests/core/_shadow_long.py::C.method: {body_lines + 1} lines"] if too_long else []
    )
