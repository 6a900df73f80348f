"""Every relative link in the README, `docs/` and `measurements/` points at a file in the repository.

A clone holds only the repository: a link to a file that is missing, or one that leaves the
repository (`../shared/…`, an absolute path), is broken for every reader. Links with a scheme
(`https:`, `mailto:`) and links to a heading of the same page are not checked here; neither is
text inside code.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

FENCED = re.compile(r"^(```|~~~).*?^\1", re.MULTILINE | re.DOTALL)
INLINE_CODE = re.compile(r"`[^`\n]*`")
# [text](target "title") and ![alt](target); <target> allowed; [label]: target definitions.
INLINE_LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
DEFINITION = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+\S.*)?$", re.MULTILINE)
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def documents(repo: Path) -> list[Path]:
    """The README, `docs/`, and the write-ups under `measurements/` (the lab's index among them)."""
    pages = [*(repo / "docs").rglob("*.md"), *(repo / "measurements").rglob("*.md")]
    return [repo / "README.md", *sorted(pages)]


def links(text: str) -> list[tuple[int, str]]:
    """(line, target) of every link outside code."""
    blank = FENCED.sub(lambda m: "\n" * m.group(0).count("\n"), text)
    blank = INLINE_CODE.sub(lambda m: " " * len(m.group(0)), blank)
    found = [(m.start(), m.group(1)) for m in INLINE_LINK.finditer(blank)]
    found += [(m.start(), m.group(1)) for m in DEFINITION.finditer(blank)]
    return sorted((blank.count("\n", 0, at) + 1, target) for at, target in found)


def broken_links(document: Path, repo: Path) -> list[str]:
    """`file:line: target: why` for each relative link that is missing or leaves `repo`."""
    problems = []
    for line, target in links(document.read_text(encoding="utf-8")):
        if SCHEME.match(target) or target.startswith("#"):
            continue
        where = f"{document.relative_to(repo)}:{line}: {target}"
        path = target.split("#", 1)[0].split("?", 1)[0]
        if path.startswith("/"):
            problems.append(f"{where}: an absolute path; link relative to this file")
            continue
        resolved = (document.parent / path).resolve()
        if resolved != repo and repo not in resolved.parents:
            problems.append(f"{where}: leaves the repository (a clone has no such file)")
        elif not resolved.exists():
            problems.append(f"{where}: no such file in the repository")
    return problems


def test_no_relative_link_in_the_readme_or_docs_is_broken_or_leaves_the_repository() -> None:
    problems = [p for doc in documents(REPO) if doc.is_file() for p in broken_links(doc, REPO)]
    assert problems == []


@pytest.mark.parametrize(
    ("markdown", "expected"),
    [
        ("see [the plan](docs/plan.md)", []),
        ("see [the plan](docs/plan.md#findings) and [a heading](#top)", []),
        ("see [spec](../shared/SPEC.md)", ["leaves the repository"]),
        ("see [gone](docs/nowhere.md)", ["no such file"]),
        ("![plot](measurements/missing.png)", ["no such file"]),
        ("[ref]: docs/missing.md", ["no such file"]),
        ("see [abs](/etc/passwd)", ["an absolute path"]),
        ("[web](https://example.com/x.md) [mail](mailto:a@b.c)", []),
        ("```\n[in code](docs/nowhere.md)\n```\nand `[inline](nowhere.md)`", []),
    ],
)
def test_the_checker_finds_what_a_reader_would_trip_on(
    markdown: str, expected: list[str], tmp_path: Path
) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "plan.md").write_text("# plan\n")
    readme = tmp_path / "README.md"
    readme.write_text(markdown + "\n")
    found = broken_links(readme, tmp_path)
    assert len(found) == len(expected) and all(
        why in problem for why, problem in zip(expected, found, strict=True)
    ), found
