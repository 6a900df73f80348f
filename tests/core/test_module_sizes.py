"""Rooms a reader can take in: no folder of `tts_bench` holds more than 15 modules, no module is
over 600 lines (500 in `artifacts`), and the Locust ladder file stays at most 300 lines.

When one of these fails, split along the sections the folder or module already has (a
subpackage per measurement or plane, a module per artifact kind), never raise the bound.
"""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "tts_bench"

MAX_MODULES_PER_FOLDER = 15
MAX_LINES = 600
# A folder (relative to the repository) -> a tighter bound on its modules' lines.
MAX_LINES_IN = {"tts_bench/artifacts": 500}
# One file -> its own bound.
MAX_LINES_OF = {"loadtest/qmax.py": 300}


def lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def module_counts(root: Path, repo: Path = REPO) -> dict[str, int]:
    """Folder (relative to `repo`) -> how many modules it holds, for `root` and below."""
    folders = [root, *(p for p in root.rglob("*") if p.is_dir() and p.name != "__pycache__")]
    return {str(f.relative_to(repo)): len(list(f.glob("*.py"))) for f in folders}


def crowded_folders(root: Path, limit: int, repo: Path = REPO) -> list[str]:
    """Folders under `root` (itself included) holding more than `limit` modules."""
    return sorted(
        f"{folder}: {count} modules"
        for folder, count in module_counts(root, repo).items()
        if count > limit
    )


def long_modules(root: Path, repo: Path = REPO) -> list[str]:
    """Modules under `root` longer than the bound of the folder they are in."""
    found = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(repo)
        bound = next(
            (b for folder, b in MAX_LINES_IN.items() if rel.is_relative_to(folder)), MAX_LINES
        )
        if (count := lines(path)) > bound:
            found.append(f"{rel}: {count} lines (at most {bound})")
    return found


def test_no_folder_holds_more_than_fifteen_modules() -> None:
    assert crowded_folders(PACKAGE, MAX_MODULES_PER_FOLDER) == []


def test_no_module_is_longer_than_its_bound() -> None:
    assert long_modules(PACKAGE) == []


@pytest.mark.parametrize(("name", "bound"), sorted(MAX_LINES_OF.items()))
def test_a_bounded_file_stays_within_its_bound(name: str, bound: int) -> None:
    assert lines(REPO / name) <= bound, f"{name} has grown past {bound} lines; see STYLE 13"


def test_the_checks_find_what_is_there(tmp_path: Path) -> None:
    crowded = tmp_path / "tts_bench" / "crowded"
    crowded.mkdir(parents=True)
    for i in range(16):
        (crowded / f"m{i}.py").write_text("x = 1\n", encoding="utf-8")
    (crowded / "long.py").write_text("x = 1\n" * 601, encoding="utf-8")
    root = tmp_path / "tts_bench"
    assert crowded_folders(root, 15, tmp_path) == ["tts_bench/crowded: 17 modules"]
    assert long_modules(root, tmp_path) == ["tts_bench/crowded/long.py: 601 lines (at most 600)"]
