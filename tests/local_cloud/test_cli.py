"""`tts-bench local-cloud` as a user runs it: the env file once InService, then Ctrl-C or
SIGTERM stops every process it started and exits 0."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.local_cloud.conftest import READY_TIMEOUT_S
from tts_bench.local_cloud.cloud import ENV_KEYS

REPO = Path(__file__).resolve().parents[2]


def _descendants(pid: int) -> set[int]:
    found: set[int] = set()
    pending = [pid]
    while pending:
        parent = pending.pop()
        for task in Path(f"/proc/{parent}/task").glob("*"):
            try:
                children = (task / "children").read_text().split()
            except OSError:
                continue
            for child in map(int, children):
                if child not in found:
                    found.add(child)
                    pending.append(child)
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.parametrize(
    ("args", "expected_error"),
    [
        (["--instances", "0"], "--instances must be at least 1"),
        (["--provision-delay-s", "-1"], "--provision-delay-s must not be negative"),
        (["--env-file", "/no/such/folder/x.env"], "--env-file: no folder /no/such/folder"),
        (["--program", "/"], "--program: / holds no Pulumi program"),
        (["--stack", "no-such-stack"], "--stack: no Pulumi.no-such-stack.yaml"),
        (["--server-args", "'"], "--server-args: No closing quotation"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    args: list[str], expected_error: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from tts_bench.cli import main

    assert main(["local-cloud", *args]) == 2
    err = capsys.readouterr().err
    assert err.strip() == f"tts-bench local-cloud: {err.split(': ', 1)[1].strip()}"
    assert expected_error in err
    assert len(err.strip().splitlines()) == 1


@pytest.mark.slow
@pytest.mark.parametrize("stop_signal", [signal.SIGINT, signal.SIGTERM])
def test_stop_signal_leaves_no_process_behind(tmp_path: Path, stop_signal: signal.Signals) -> None:
    env_file = tmp_path / "local-cloud.env"
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), str(REPO / "container")])
    process = subprocess.Popen(
        [
            sys.executable, "-m", "tts_bench", "local-cloud",
            "--env-file", str(env_file), "--server-args", "--backend onnx",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=tmp_path,
    )  # fmt: skip
    try:
        deadline = time.time() + READY_TIMEOUT_S
        while not env_file.exists():
            assert process.poll() is None, process.communicate()[1][-2000:]
            assert time.time() < deadline, "no env file"
            time.sleep(0.5)
        written = dict(
            line.split("=", 1) for line in env_file.read_text().splitlines() if line.strip()
        )
        assert list(written) == [k for k in ENV_KEYS if k in written]
        assert written["AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME"].startswith("http://127.0.0.1:")
        children = _descendants(process.pid)
        assert children, "the instance process is a child"
        process.send_signal(stop_signal)
        out, err = process.communicate(timeout=90)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 0, err[-2000:]
    assert "export AWS_ENDPOINT_URL=" in out
    assert "InService" in err
    time.sleep(0.5)
    assert not [pid for pid in children if _alive(pid)]
    assert not env_file.exists()  # it pointed at what is gone
