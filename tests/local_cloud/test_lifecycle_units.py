"""The pieces that make a local cloud leave nothing behind, alone: stop signals held through a
start or a stop, and the private folders for its TLS files and env file. No cloud starts."""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import FrameType

import pytest

from tts_bench.local_cloud.errors import LocalCloudError
from tts_bench.local_cloud.orphans import (
    RECORD_NAME,
    ProcessRecord,
    RecordedProcess,
    process_start_ticks,
    running,
    vars_of,
)
from tts_bench.local_cloud.private_files import (
    new_run_folder,
    remove_stale_runs,
    runs_folder,
    unsafe_folder,
)
from tts_bench.local_cloud.signals import signals_held


@pytest.fixture
def recorded() -> Iterator[list[int]]:
    """SIGTERM recorded instead of acted on, for the test's length."""
    seen: list[int] = []

    def record(signum: int, frame: FrameType | None) -> None:
        seen.append(signum)

    previous = signal.signal(signal.SIGTERM, record)
    yield seen
    signal.signal(signal.SIGTERM, previous)


def test_a_signal_inside_the_block_is_delivered_once_the_block_is_done(
    recorded: list[int],
) -> None:
    steps: list[str] = []
    with signals_held():
        os.kill(os.getpid(), signal.SIGTERM)
        os.kill(os.getpid(), signal.SIGTERM)  # the second, as `timeout` sends it
        steps.append("the block ran to its end")
        assert recorded == []
    assert steps == ["the block ran to its end"]
    assert recorded == [signal.SIGTERM]
    assert signal.getsignal(signal.SIGTERM).__name__ == "record"  # handlers put back


def test_without_a_signal_the_block_changes_nothing(recorded: list[int]) -> None:
    with signals_held():
        pass
    assert recorded == []


@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TTS_BENCH_STATE_DIR", str(tmp_path / "state"))
    return tmp_path / "state"


def test_the_runs_folder_is_made_private_and_kept(state: Path) -> None:
    folder = runs_folder()
    assert folder == state / "local-cloud"
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    folder.chmod(0o755)
    assert stat.S_IMODE(runs_folder().stat().st_mode) == 0o700  # tightened again


def test_a_runs_folder_that_is_a_symlink_is_refused(state: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    state.mkdir()
    (state / "local-cloud").symlink_to(elsewhere)
    with pytest.raises(LocalCloudError, match="is not a folder"):
        runs_folder()


def test_a_run_folder_of_a_process_that_is_gone_is_removed(state: Path) -> None:
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    stale = runs_folder() / f"run-{gone.stdout.strip()}-abc"
    stale.mkdir()
    (stale / "server-key.pem").write_text("key")
    live = runs_folder() / f"run-{os.getppid()}-def"
    live.mkdir()
    said: list[str] = []
    assert remove_stale_runs(runs_folder(), said.append) == [stale]
    assert live.exists() and not stale.exists()
    assert said == []  # it recorded no instance: nothing to stop, nothing to say
    fresh = new_run_folder(said.append)
    assert fresh.name.startswith(f"run-{os.getpid()}-")
    assert stat.S_IMODE(fresh.stat().st_mode) == 0o700


@pytest.mark.parametrize(
    ("mode", "unsafe"),
    [(0o700, False), (0o755, False), (0o1777, False), (0o777, True), (0o775, True)],
)
def test_a_folder_others_can_write_is_unsafe_unless_sticky(
    tmp_path: Path, mode: int, unsafe: bool
) -> None:
    folder = tmp_path / "f"
    folder.mkdir()
    folder.chmod(mode)
    inside = folder / "inside"
    inside.mkdir(mode=0o700)
    assert (unsafe_folder(inside) is not None) is unsafe  # a parent counts as much as itself


# A local cloud in miniature: its run folder and record as `LocalCloud.start` makes them, one
# "instance" in a session of its own, recorded as the fleet records it; then it waits to be killed.
KILLED_CLOUD = """
import subprocess, sys, time
from tts_bench.local_cloud.orphans import ProcessRecord
from tts_bench.local_cloud.private_files import new_run_folder
folder = new_run_folder(print)
record = ProcessRecord(folder)
instance = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"],
                            start_new_session=True)
record.add(instance.pid)
print(instance.pid, folder, flush=True)
time.sleep(600)
"""


def sleeper() -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])


def recorded_process(pid: int) -> RecordedProcess:
    ticks = process_start_ticks(pid)
    assert ticks is not None
    return RecordedProcess(pid, ticks)


def test_a_killed_clouds_recorded_instances_are_stopped_and_said_so(state: Path) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    cloud = subprocess.Popen([sys.executable, "-c", KILLED_CLOUD], env=env,
                             stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert cloud.stdout is not None
        pid_text, folder = cloud.stdout.readline().split()
    finally:
        cloud.kill()
        cloud.wait()
    instance = recorded_process(int(pid_text))
    assert running(instance)  # SIGKILL stopped nothing: an orphan
    said: list[str] = []
    assert remove_stale_runs(runs_folder(), said.append) == [Path(folder)]
    assert not running(instance)
    assert len(said) == 1 and f"pids {instance.pid})" in said[0], said
    assert "stopped 1 instance process(es)" in said[0]


def write_record(run: Path, owner: RecordedProcess, instances: list[RecordedProcess]) -> None:
    run.mkdir()
    body = {"owner": vars_of(owner), "instances": [vars_of(p) for p in instances]}
    (run / RECORD_NAME).write_text(json.dumps(body))


def test_a_pid_taken_by_another_process_is_never_signalled(state: Path) -> None:
    other = sleeper()
    try:
        now = recorded_process(other.pid)
        earlier = RecordedProcess(other.pid, now.start_ticks - 1)  # the pid's former holder
        gone_owner = RecordedProcess(2**22 + 1, 1)  # above pid_max: no such process
        write_record(runs_folder() / f"run-{gone_owner.pid}-abc", gone_owner, [earlier])
        said: list[str] = []
        assert len(remove_stale_runs(runs_folder(), said.append)) == 1
        time.sleep(0.2)  # a signal, had one been sent, has been delivered by now
        assert other.poll() is None and said == []
    finally:
        other.kill()
        other.wait()


def test_a_run_is_gone_when_its_pid_now_belongs_to_another_process(state: Path) -> None:
    parent = recorded_process(os.getppid())  # alive for the whole test
    replaced = runs_folder() / f"run-{parent.pid}-old"
    write_record(replaced, RecordedProcess(parent.pid, parent.start_ticks - 1), [])
    live = runs_folder() / f"run-{parent.pid}-live"
    write_record(live, parent, [])
    assert remove_stale_runs(runs_folder(), lambda _: None) == [replaced]
    assert live.exists()


def test_the_record_holds_what_runs_and_drops_what_exited(tmp_path: Path) -> None:
    record = ProcessRecord(tmp_path)
    a, b = sleeper(), sleeper()
    try:
        record.add(a.pid)
        record.add(b.pid)
        record.remove(a.pid)
        body = json.loads(record.path.read_text())
        assert body["owner"] == {
            "pid": os.getpid(),
            "start_ticks": process_start_ticks(os.getpid()),
        }
        assert body["instances"] == [{"pid": b.pid, "start_ticks": process_start_ticks(b.pid)}]
    finally:
        for p in (a, b):
            p.kill()
            p.wait()


def test_an_instance_that_exits_after_its_run_folder_is_gone_is_no_error(tmp_path: Path) -> None:
    """A drain that outlives the cloud's stop (its folder removed first) changes nothing."""
    run = tmp_path / "run"
    run.mkdir()
    record = ProcessRecord(run)
    record.add(os.getpid())
    shutil.rmtree(run)
    record.remove(os.getpid())
    assert not run.exists()
