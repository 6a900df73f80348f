"""`scripts/clean-clones` on a throwaway repository whose `.ci/run` prints a pytest summary: one
line per clone, each checkout removed, each output kept, a failing run's status passed on."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

CI_RUN = """#!/usr/bin/env bash
test -f ../shared/SPEC.md || { echo "no ../shared"; exit 3; }
echo "bootstrap: done"
echo "======== 2 passed, 1 warning in 0.50s ========"
exit "$(cat .ci/exit-code)"
"""


@pytest.fixture
def throwaway(tmp_path: Path) -> Path:
    """A git repository with the script, a `.ci/run` and a `../shared` beside it."""
    repo = tmp_path / "work" / "main"
    (repo / ".ci").mkdir(parents=True)
    (repo / "scripts").mkdir()
    shutil.copy(REPO / "scripts" / "clean-clones", repo / "scripts" / "clean-clones")
    (repo / ".ci" / "run").write_text(CI_RUN)
    (repo / ".ci" / "exit-code").write_text("0\n")
    (tmp_path / "work" / "shared").mkdir()
    (tmp_path / "work" / "shared" / "SPEC.md").write_text("spec\n")
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t", "PATH": os.environ["PATH"]}  # fmt: skip
    for command in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "x"]):
        subprocess.run(["git", *command], cwd=repo, env=env, check=True)
    return repo


def clean_clones(repo: Path, scratch: Path, *args: str) -> subprocess.CompletedProcess[str]:
    scratch.mkdir(exist_ok=True)
    return subprocess.run(
        [sys.executable, str(repo / "scripts" / "clean-clones"), *args],
        env={**os.environ, "TMPDIR": str(scratch)},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_each_clone_gets_a_line_and_leaves_only_its_output(throwaway: Path, tmp_path: Path):
    scratch, keep = tmp_path / "scratch", tmp_path / "keep"
    run = clean_clones(throwaway, scratch, "--runs", "2", "--keep", str(keep), "--min-free-gb", "0")
    assert run.returncode == 0, run.stderr
    lines = [line for line in run.stdout.splitlines() if line.startswith("clone ")]
    assert len(lines) == 2 and all("rc 0 | 2 passed, 1 warning in 0.50s |" in x for x in lines)
    assert "2 of 2 passed" in run.stdout
    assert sorted(p.name.split("-")[1] for p in keep.iterdir()) == ["1", "2"]
    assert list(scratch.iterdir()) == []  # each checkout removed


def test_a_failing_run_is_reported_and_the_exit_status_says_so(throwaway: Path, tmp_path: Path):
    (throwaway / ".ci" / "exit-code").write_text("1\n")
    subprocess.run(["git", "commit", "-qam", "fail"], cwd=throwaway, check=True,
                   env={**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
                        "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"})  # fmt: skip
    run = clean_clones(throwaway, tmp_path / "scratch", "--keep", str(tmp_path / "keep"),
                       "--min-free-gb", "0")  # fmt: skip
    assert run.returncode == 1 and "rc 1 |" in run.stdout and "0 of 1 passed" in run.stdout


@pytest.mark.parametrize(
    ("args", "expected"),
    [(["--runs", "0"], "--runs 0"), (["--min-free-gb", "1e9"], "below --min-free-gb")],
)
def test_bad_input_or_a_full_disk_is_refused_before_a_run(
    throwaway: Path, tmp_path: Path, args: list[str], expected: str
):
    run = clean_clones(throwaway, tmp_path / "scratch", "--keep", str(tmp_path / "keep"), *args)
    assert run.returncode in (1, 2) and expected in run.stderr
    assert "Traceback" not in run.stderr and not list((tmp_path / "scratch").iterdir())


def test_a_second_series_keeps_the_first_ones_outputs(throwaway: Path, tmp_path: Path):
    keep = tmp_path / "keep"
    for _ in range(2):
        run = clean_clones(throwaway, tmp_path / "scratch", "--keep", str(keep),
                           "--min-free-gb", "0")  # fmt: skip
        assert run.returncode == 0, run.stderr
    assert len(list(keep.glob("clone-1-*.txt"))) == 2


def test_pytest_options_from_the_environment_are_named(throwaway: Path, tmp_path: Path):
    run = subprocess.run(
        [sys.executable, str(throwaway / "scripts" / "clean-clones"), "--keep",
         str(tmp_path / "keep"), "--min-free-gb", "0"],
        env={**os.environ, "TMPDIR": str(tmp_path), "PYTEST_ADDOPTS": "-n 4"},
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert "PYTEST_ADDOPTS='-n 4' passed on to pytest" in run.stdout.splitlines()[0]
