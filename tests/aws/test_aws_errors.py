"""AWS failures end every command with one clear line, never a traceback.

Missing endpoints and credentials use the emulator; throttling and access denied come from a
tiny local HTTP server that answers every call with that AWS error (moto cannot be told to).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.aws.emulated import ENDPOINT, EmulatedAws
from tests.conftest import REPO
from tts_bench.cli import main

COMMANDS = [
    ["drift", "--endpoint", ENDPOINT],
    ["thaw", "--endpoint", ENDPOINT],
    ["validate", "--endpoint", ENDPOINT, "--plan", "{plan}"],
]


class _AwsRefusal:
    """A loopback HTTP server that answers every AWS JSON call with one error code."""

    def __init__(self, code: str, status: int) -> None:
        self.calls = 0
        refusal = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                refusal.calls += 1
                body = json.dumps({"__type": code, "message": f"{code} (test server)"}).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/x-amz-json-1.1")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"


@pytest.fixture
def refusing(aws: EmulatedAws, monkeypatch: pytest.MonkeyPatch, request) -> Iterator[_AwsRefusal]:
    code, status = request.param
    refusal = _AwsRefusal(code, status)
    thread = threading.Thread(target=refusal.server.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setenv("AWS_ENDPOINT_URL", refusal.url)
    try:
        yield refusal
    finally:
        refusal.server.shutdown()
        refusal.server.server_close()
        thread.join()


def run(capsys: pytest.CaptureFixture[str], argv: list[str], plan: Path) -> tuple[int, str]:
    code = main([arg.format(plan=plan) for arg in argv])
    out, err = capsys.readouterr()
    assert out == ""
    assert err.count("\n") == 1, err  # one line
    return code, err


@pytest.mark.parametrize("argv", COMMANDS, ids=lambda a: a[0])
def test_a_missing_endpoint(aws: EmulatedAws, capsys, argv: list[str], reference_plan_path: Path):
    code, err = run(capsys, ["nope" if a == ENDPOINT else a for a in argv], reference_plan_path)
    assert code == 2
    assert (
        "sagemaker:DescribeEndpoint on endpoint nope: no such SageMaker endpoint in us-east-1"
        in err
    )
    assert "check --endpoint and AWS_REGION" in err


@pytest.mark.parametrize("argv", COMMANDS, ids=lambda a: a[0])
def test_missing_credentials(
    aws: EmulatedAws, monkeypatch, capsys, argv: list[str], reference_plan_path: Path
) -> None:
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    code, err = run(capsys, argv, reference_plan_path)
    assert code == 2
    assert f"on endpoint {ENDPOINT}: no AWS credentials found; set AWS_PROFILE" in err


def test_no_region(aws: EmulatedAws, monkeypatch, capsys, reference_plan_path: Path) -> None:
    monkeypatch.delenv("AWS_REGION")
    monkeypatch.delenv("AWS_DEFAULT_REGION")
    code, err = run(capsys, COMMANDS[0], reference_plan_path)
    assert code == 2
    assert "no AWS region configured; set AWS_REGION" in err


def test_an_unknown_profile(aws: EmulatedAws, monkeypatch, capsys, reference_plan_path: Path):
    monkeypatch.setenv("AWS_PROFILE", "no-such-profile")
    code, err = run(capsys, COMMANDS[1], reference_plan_path)
    assert code == 2
    assert "AWS profile 'no-such-profile' not found in the AWS config files" in err


def test_nothing_listening(aws: EmulatedAws, monkeypatch, capsys, reference_plan_path: Path):
    with socket.socket() as probe:  # a port that was free a moment ago: connection refused
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{port}")
    code, err = run(capsys, COMMANDS[0], reference_plan_path)
    assert code == 2
    assert f"cannot connect to http://127.0.0.1:{port}/; check the network" in err


@pytest.mark.parametrize("refusing", [("ThrottlingException", 400)], indirect=True)
@pytest.mark.parametrize("argv", COMMANDS, ids=lambda a: a[0])
def test_a_throttled_call(
    refusing: _AwsRefusal, capsys, argv: list[str], reference_plan_path: Path
) -> None:
    code, err = run(capsys, argv, reference_plan_path)
    assert code == 2
    assert "throttled by AWS (ThrottlingException) after 2 attempt(s); wait a minute" in err
    assert refusing.calls == 2  # retried once (AWS_MAX_ATTEMPTS=2), then gave up


@pytest.mark.parametrize("refusing", [("AccessDeniedException", 400)], indirect=True)
def test_access_denied_names_the_permission(
    refusing: _AwsRefusal, capsys, reference_plan_path: Path
) -> None:
    code, err = run(capsys, COMMANDS[0], reference_plan_path)
    assert code == 2
    assert "access denied; grant sagemaker:DescribeEndpoint to the caller's IAM role" in err


@pytest.mark.slow
def test_the_installed_command_prints_no_traceback(aws: EmulatedAws) -> None:
    env = os.environ | {
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])
    }
    env.pop("AWS_ACCESS_KEY_ID")
    done = subprocess.run(
        [sys.executable, "-m", "tts_bench", "drift", "--endpoint", ENDPOINT],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.startswith("tts-bench drift: sagemaker:DescribeEndpoint on endpoint")
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
