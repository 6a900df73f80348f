"""The pieces that make a local cloud leave nothing behind, alone: stop signals held through a
start or a stop, and the private folders for its TLS files and env file. No cloud starts."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import FrameType

import pytest

from tts_bench.local_cloud.errors import LocalCloudError
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
    assert remove_stale_runs(runs_folder()) == [stale]
    assert live.exists() and not stale.exists()
    fresh = new_run_folder()
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
