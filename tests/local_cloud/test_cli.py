"""`tts-bench local-cloud` as a user runs it: the env file once InService, then Ctrl-C or
SIGTERM stops every process it started and exits 0."""

from __future__ import annotations

import os
import signal
import stat
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
        (["--instances", "0"], "--instances 0: give 1 to 64"),
        (["--instances", "-1"], "--instances -1: give 1 to 64"),
        (["--instances", "1000000000000"], "--instances 1000000000000: give 1 to 64"),
        (["--provision-delay-s", "-1"], "--provision-delay-s -1: give 0 to 3600 s"),
        (["--provision-delay-s", "1e300"], "--provision-delay-s 1e+300: give 0 to 3600 s"),
        (["--provision-delay-s", "inf"], "--provision-delay-s inf: not a finite number"),
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


class CliRun:
    """`tts-bench local-cloud` as a child process, with its own state and temp folders."""

    def __init__(self, folder: Path) -> None:
        self.env_file = folder / "local-cloud.env"
        self.state = folder / "state"
        self.tmp = folder / "tmp"
        self.tmp.mkdir()
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([str(REPO), str(REPO / "container")])
        env["TTS_BENCH_STATE_DIR"] = str(self.state)
        env["TMPDIR"] = str(self.tmp)
        self.process = subprocess.Popen(
            [
                sys.executable, "-m", "tts_bench", "local-cloud",
                "--env-file", str(self.env_file), "--server-args", "--backend onnx",
            ],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=folder,
        )  # fmt: skip
        self.children: set[int] = set()

    def wait_for(self, condition: object, what: str) -> None:
        deadline = time.time() + READY_TIMEOUT_S
        while not condition():  # type: ignore[operator]
            assert self.process.poll() is None, self.process.communicate()[1][-2000:]
            assert time.time() < deadline, f"no {what}"
            self.children |= _descendants(self.process.pid)
            time.sleep(0.05)
        self.children |= _descendants(self.process.pid)

    def signal(self, *delays_s: float, stop_signal: int = signal.SIGTERM) -> tuple[str, str]:
        """Send the signal once per delay (seconds after the first), then wait for the exit."""
        started = time.time()
        for delay_s in delays_s:
            time.sleep(max(0.0, started + delay_s - time.time()))
            self.process.send_signal(stop_signal)
        return self.process.communicate(timeout=90)

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.communicate()

    def left_behind(self) -> list[str]:
        """Processes, files and folders the run left: none, once it has stopped. (The instance
        processes' own temporary files, the container's, are not the local cloud's.)"""
        time.sleep(0.5)
        left = [f"process {pid}" for pid in self.children if _alive(pid)]
        left += [f"scratch {path}" for path in self.tmp.glob("tts-bench-*")]
        left += [f"run folder {path}" for path in (self.state / "local-cloud").glob("*")]
        if self.env_file.exists():
            left.append(f"env file {self.env_file}")
        return left


@pytest.mark.slow
@pytest.mark.parametrize(
    ("stop_signal", "delays_s"),
    [(signal.SIGINT, (0.0,)), (signal.SIGTERM, (0.0, 0.005, 0.5))],
    ids=["SIGINT", "SIGTERM-three-times-as-timeout-sends-it"],
)
def test_stop_signals_leave_nothing_behind(
    tmp_path: Path, stop_signal: int, delays_s: tuple[float, ...]
) -> None:
    """Once InService: the env file is private (0600) and its CA bundle in the private state
    folder; stop signals (more arriving while it stops) end it with exit 0, and nothing of it
    is left: no process, no env file, no TLS folder or key, no scratch folder."""
    run = CliRun(tmp_path)
    try:
        run.wait_for(run.env_file.exists, "env file")
        assert stat.S_IMODE(run.env_file.stat().st_mode) == 0o600
        written = dict(
            line.split("=", 1) for line in run.env_file.read_text().splitlines() if line.strip()
        )
        assert list(written) == [k for k in ENV_KEYS if k in written]
        assert written["AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME"].startswith("http://127.0.0.1:")
        bundle = Path(written["SSL_CERT_FILE"])
        assert bundle.parent.parent == run.state / "local-cloud"
        assert stat.S_IMODE(bundle.parent.parent.stat().st_mode) == 0o700
        assert run.children, "the instance process is a child"
        out, err = run.signal(*delays_s, stop_signal=stop_signal)
    finally:
        run.kill()
    assert run.process.returncode == 0, err[-2000:]
    assert "export AWS_ENDPOINT_URL=" in out
    assert "InService" in err
    assert run.left_behind() == []
    assert not bundle.exists()  # and only this user could put a file at its path now


@pytest.mark.slow
def test_a_signal_during_start_up_leaves_nothing_behind(tmp_path: Path) -> None:
    """SIGTERM twice while the first instance is still starting (not yet InService)."""
    run = CliRun(tmp_path)
    try:
        run.wait_for(lambda: bool(run.children), "instance process")
        out, err = run.signal(0.0, 0.005)
    finally:
        run.kill()
    assert run.process.returncode == 0, err[-2000:]
    assert "InService" not in err and "export" not in out
    assert run.left_behind() == []


@pytest.mark.slow
def test_a_killed_local_clouds_instances_are_stopped_by_the_next_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SIGKILL once InService orphans the instance process (its own session); the next start's
    first step, the run folder (`LocalCloud.start` makes it before anything else), stops it by
    the pid its run recorded, says so in one line, and removes the killed run's folder."""
    from tts_bench.local_cloud.private_files import new_run_folder

    run = CliRun(tmp_path)
    try:
        run.wait_for(run.env_file.exists, "env file")
        run.process.kill()
        run.process.communicate()
    finally:
        run.kill()
    orphans = {pid for pid in run.children if _alive(pid)}
    assert orphans, "nothing stops an instance when its local cloud is killed"
    monkeypatch.setenv("TTS_BENCH_STATE_DIR", str(run.state))
    said: list[str] = []
    fresh = new_run_folder(said.append)
    assert [pid for pid in orphans if _alive(pid)] == []
    assert len(said) == 1 and said[0].startswith("stopped 1 instance process(es)"), said
    assert list((run.state / "local-cloud").glob("*")) == [fresh]


def test_an_env_file_in_a_folder_others_can_write_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tts_bench.cli import main

    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)  # not sticky: anyone could replace the file a shell will source
    assert main(["local-cloud", "--env-file", str(shared / "x.env")]) == 2
    err = capsys.readouterr().err
    assert "is writable by other users" in err and len(err.strip().splitlines()) == 1
    sticky = tmp_path / "sticky"
    sticky.mkdir()
    sticky.chmod(0o1777)  # as /tmp: others cannot replace or move this user's files
    from tts_bench.local_cloud.private_files import unsafe_folder

    assert unsafe_folder(sticky) is None
