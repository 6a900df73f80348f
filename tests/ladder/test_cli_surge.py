"""`tts-bench surge` and `qmax --refine/--underrun-slo`: bad input is one line and exit 2,
before any server is started or reached."""

from __future__ import annotations

import socket
import subprocess

import pytest

from tts_bench.cli import main

from .test_refine import rung


@pytest.fixture
def no_network(monkeypatch):
    def refuse(*_a, **_kw):
        raise AssertionError("a refused command touched the network or started a process")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(subprocess, "Popen", refuse)


@pytest.fixture
def ladder(tmp_path):
    """A valid, unfingerprinted qmax artifact with no Q_max (c=1 failed)."""
    from tts_bench.artifacts.schema import Provenance
    from tts_bench.measure.ladder import LadderSchedule, build_qmax_artifact

    artifact = build_qmax_artifact(
        [rung(1, False)], None, LadderSchedule((1,), 10, 5, 1), 3000.0,
        Provenance.now("measured", "test"),
    )  # fmt: skip
    path = tmp_path / "qmax.json"
    path.write_text(artifact.model_dump_json())
    return path


@pytest.mark.parametrize(
    ("args", "expected_error"),
    [
        (["--rate", "nan"], "--rate nan: requests per second"),
        (["--rate", "-1"], "--rate -1.0: requests per second"),
        (["--rate", "1", "--duration-s", "inf"], "--duration-s inf: seconds"),
        (["--rate", "1", "--qmax", "/nonexistent.json"], "/nonexistent.json: no such file"),
        (["--rate", "1"], "the ladder found no Q_max"),
        (["--rate", "1", "--transport", "response-stream"], "arrive with the live chain"),
    ],
)
def test_surge_refuses_bad_input_in_one_line(no_network, ladder, capsys, args, expected_error):
    if "--qmax" not in args:
        args = [*args, "--qmax", str(ladder)]
    assert main(["surge", *args]) == 2
    err = capsys.readouterr().err.strip()
    assert expected_error in err and len(err.splitlines()) == 1, err


@pytest.mark.parametrize(
    ("args", "expected_error"),
    [
        (["--refine", "0"], "--refine 0.0: the precision is a percentage"),
        (["--refine", "nan"], "--refine nan"),
        (["--underrun-slo", "0"], "--underrun-slo 0.0: a share above 0"),
    ],
)
def test_qmax_refuses_bad_refinement_and_underrun_flags(no_network, capsys, args, expected_error):
    assert main(["qmax", "--dry-run", *args]) == 2
    assert expected_error in capsys.readouterr().err
