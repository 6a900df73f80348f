"""`tts-bench verify` on a rehearsal (the main job writes one beside its artifacts): the plan,
ladder and T_total it read are found by sha256 and checked; a rehearsal naming another plan is
refused, naming the field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tts_bench.cli import main
from tts_bench.custody.folder import verify_file
from tts_bench.custody.outcome import CustodyError


def rehearsal_in(folder: Path) -> Path:
    (path,) = folder.glob("rehearsal-*.json")
    return path


def test_a_rehearsal_checks_against_the_files_it_read(run_folder: Path, capsys) -> None:
    checked = verify_file(rehearsal_in(run_folder))
    assert checked.line().startswith(f"ok {rehearsal_in(run_folder)}: rehearsal emulated")
    assert main(["verify", str(rehearsal_in(run_folder))]) == 0
    assert "taken as recorded" in capsys.readouterr().out


def test_a_rehearsal_of_another_plan_is_refused_naming_the_field(
    run_folder: Path, tmp_path: Path
) -> None:
    data = json.loads(rehearsal_in(run_folder).read_text())
    data["inputs"]["files"]["plan"]["sha256"] = "0" * 64
    edited = tmp_path / rehearsal_in(run_folder).name
    edited.write_text(json.dumps(data))
    with pytest.raises(CustodyError, match=r"inputs\.files\.plan\.sha256: no file"):
        verify_file(edited)
