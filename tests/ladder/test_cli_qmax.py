"""`tts-bench qmax`: the dry run (no network, no child process) and the refusals."""

from __future__ import annotations

import json
import socket
import subprocess

import pytest

from tts_bench.artifacts.fingerprint import Transport
from tts_bench.cli import main
from tts_bench.errors import RefusalError
from tts_bench.serving.server_ping import PingError, parse_ping


@pytest.fixture
def no_network(monkeypatch):
    """Any socket connection, name lookup or child process fails the test."""

    def refuse(*_a, **_kw):
        raise AssertionError("the dry run touched the network or started a process")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(subprocess, "Popen", refuse)


@pytest.mark.parametrize(
    ("args", "expected", "expected_error"),
    [
        ([], ["8 rungs, hold 240 s", "     8     60", "at most 36 min 00 s"], None),
        (["--transport", "response-stream", "--endpoint", "speech-kokoro-82m"], ["36 min"], None),
        (["--rungs", "1,2,4", "--hold-s", "10", "--measure-s", "5", "--idle-s", "2"], ["3 rungs", "at most 39 s"], None),
        (["--rungs", "4,2"], None, "strictly ascending"),
        (["--hold-s", "30", "--measure-s", "60"], None, "--measure-s 60 exceeds --hold-s 30"),
        (["--corpus", "/nonexistent/corpus.txt"], None, "--corpus /nonexistent/corpus.txt: no such file"),
    ],
)  # fmt: skip
def test_dry_run_prints_the_schedule_without_network(
    no_network, capsys, args, expected, expected_error
):
    code = main(["qmax", "--dry-run", *args])
    out, err = capsys.readouterr()
    if expected_error:
        assert code == 2 and expected_error in err and "Traceback" not in err
    else:
        assert code == 0
        for text in expected:
            assert text in out


@pytest.mark.parametrize(
    ("args", "expected_error"),
    [
        (["--transport", "response-stream"], "measures a SageMaker endpoint: pass --endpoint"),
        (["--transport", "bidi-stream"], "measures a SageMaker endpoint: pass --endpoint"),
        (["--endpoint", "speech", "--transport", "local-http"], "not an endpoint"),
        (["--endpoint", "speech", "--transport", "response-stream", "--host", "x"], "not both"),
        ([], "needs --host"),
        # Only a SageMaker ladder holds verification rungs: the flag would mean nothing.
        (["--host", "http://127.0.0.1:1", "--no-fleet-level"], "--no-fleet-level leaves out"),
        (["--no-fleet-level", "--dry-run"], "only a SageMaker ladder (--endpoint) holds"),
    ],
)
def test_live_runs_without_a_local_target_are_refused(no_network, capsys, args, expected_error):
    assert main(["qmax", *args]) == 2
    assert expected_error in capsys.readouterr().err


def test_the_dry_run_says_no_fleet_level_is_held_and_counts_no_hold_for_it(
    no_network, capsys
) -> None:
    args = ["qmax", "--dry-run", "--transport", "response-stream", "--endpoint", "e"]
    args += ["--rungs", "1,2", "--hold-s", "10", "--measure-s", "5", "--idle-s", "2"]
    assert main(args) == 0
    held = capsys.readouterr().out
    assert "whole minutes of InvocationsPerInstance" in held and "at most 3 min 26 s more" in held
    assert main([*args, "--no-fleet-level"]) == 0
    skipped = capsys.readouterr().out
    assert "none at the fleet rule's level (--no-fleet-level)" in skipped
    assert "InvocationsPerInstance" not in skipped and "at most 24 s more" in skipped


def test_unreachable_server_is_a_one_line_error(capsys, unused_port):
    assert main(["qmax", "--host", f"http://127.0.0.1:{unused_port}"]) == 2
    err = capsys.readouterr().err
    assert "cannot reach the server" in err and len(err.strip().splitlines()) == 1


def ping_body(queue_max_depth: int | None, ready: bool = True) -> str:
    return json.dumps(
        {
            "status": "ready" if ready else "loading",
            "ready": ready,
            "queue_max_depth": queue_max_depth,
            "in_flight": 0,
            "fingerprint": {
                "model": "kokoro-82m",
                "instance_type": "local-test",
                "image_digest": "sha256:" + "a" * 64,
                "performance_env": {"ENGINE_MODE": "concurrent"},
            },
        }
    )


def test_a_bounded_server_is_refused():
    with pytest.raises(
        RefusalError, match=r"bounded \(queue_max_depth=4\).*without MAX_QUEUE_DEPTH"
    ):
        parse_ping(ping_body(4)).refuse_bounded()
    parse_ping(ping_body(None)).refuse_bounded()  # unbounded: measured


def test_the_fingerprint_comes_from_ping_plus_the_transport():
    fp = parse_ping(ping_body(None)).fingerprint(Transport.LOCAL_WS)
    assert fp.transport is Transport.LOCAL_WS and fp.instance_type == "local-test"


@pytest.mark.parametrize("body", ["not json", "{}", '{"status": "ready"}'])
def test_a_ping_body_off_contract_is_a_clear_error(body):
    with pytest.raises(PingError, match="not the contract's JSON"):
        parse_ping(body)


BELOW_HOLD = "must be at least --hold-s 240"


@pytest.mark.parametrize(
    ("flag", "expected_error"),
    [
        ("100", f"--max-hold-s 100: {BELOW_HOLD}"),
        ("-5", f"--max-hold-s -5: {BELOW_HOLD}"),
        ("1e9", f"--max-hold-s 1e+09: {BELOW_HOLD} (an unstable rung's hold only grows) and at most 86400 s"),
        ("nan", "--max-hold-s nan: not a finite number"),
    ],
)  # fmt: skip
def test_a_bad_max_hold_is_a_one_line_error(no_network, capsys, flag, expected_error):
    assert main(["qmax", "--dry-run", "--max-hold-s", flag]) == 2
    err = capsys.readouterr().err.strip()
    assert expected_error in err and len(err.splitlines()) == 1


def test_the_dry_run_with_max_hold_prints_the_worst_case(no_network, capsys):
    assert main(["qmax", "--dry-run", "--rungs", "1,5", "--max-hold-s", "360"]) == 0
    out = capsys.readouterr().out
    assert "up to 360 s" in out and "at most 13 min 00 s" in out
