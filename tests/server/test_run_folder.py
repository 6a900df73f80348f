"""Nothing left in TMPDIR by server starts (issue 40): what the libraries write there during a
run (phonemizer's copy of libespeak-ng, onnxruntime's `.ses`) lives in the run's own folder,
removed when the server exits, and a killed run's folder is removed by the next start.

Cost: 20 + 3 child processes that each import phonemizer and build one espeak wrapper (the
piece that copies the library: what a server start leaves), well under a second each, and one
real server start (a few seconds) for the wiring in `python -m tts_server`.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tts_server.engine.offline_weights import CACHE_ENV, cache_dir
from tts_server.engine.run_folder import RUN_PREFIX

from tests.servers import REPO, ServerProcess

ESPEAK_COPY = "libespeak-ng.so"

# One "start": the server's own exit path (`run_in_own_folder`) around the G2P's espeak wrapper,
# which copies the library into TMPDIR. It prints where its files went before it leaves.
START = """
import json, os, sys, tempfile, time
from tts_server.engine.run_folder import run_in_own_folder

def main() -> int:
    import espeakng_loader
    from phonemizer.backend.espeak.wrapper import EspeakWrapper
    EspeakWrapper.set_library(espeakng_loader.get_library_path())
    EspeakWrapper.set_data_path(espeakng_loader.get_data_path())
    wrapper = EspeakWrapper()
    here = tempfile.gettempdir()
    print(json.dumps({"run": here, "files": [
        os.path.relpath(os.path.join(d, f), here) for d, _, fs in os.walk(here) for f in fs
    ]}), flush=True)
    if "--hang" in sys.argv:
        time.sleep(600)
    return 0

run_in_own_folder(main)
"""


def child_env(tmpdir: Path) -> dict[str, str]:
    return {
        **os.environ,
        "TMPDIR": str(tmpdir),
        "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "container")]),
    }


def start_once(tmpdir: Path) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-c", START], env=child_env(tmpdir), capture_output=True, text=True,
        timeout=120, check=True,
    )  # fmt: skip
    return json.loads(done.stdout.splitlines()[-1])


def entries(tmpdir: Path) -> list[str]:
    return sorted(p.name for p in tmpdir.iterdir())


def test_twenty_starts_leave_no_more_in_tmpdir_than_one(tmp_path: Path) -> None:
    seen = start_once(tmp_path)
    # The copy was made, and in the run's folder under TMPDIR, not in TMPDIR itself.
    assert Path(seen["run"]).parent == tmp_path
    assert Path(seen["run"]).name.startswith(RUN_PREFIX)
    assert any(Path(f).name == ESPEAK_COPY for f in seen["files"]), seen
    after_one = entries(tmp_path)
    runs = {seen["run"]}
    for _ in range(19):
        runs.add(start_once(tmp_path)["run"])
    assert len(runs) == 20  # each start had a folder of its own
    assert entries(tmp_path) == after_one == []


def test_a_killed_starts_folder_is_removed_by_the_next_start(tmp_path: Path) -> None:
    hung = subprocess.Popen(
        [sys.executable, "-c", START, "--hang"], env=child_env(tmp_path),
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert hung.stdout is not None
        killed_run = Path(json.loads(hung.stdout.readline())["run"])
    finally:
        hung.send_signal(signal.SIGKILL)
        hung.wait()
    assert entries(tmp_path) == [killed_run.name]  # SIGKILL skips every clean-up
    start_once(tmp_path)
    assert entries(tmp_path) == []


def test_a_folder_of_a_live_run_or_not_a_run_is_kept(tmp_path: Path) -> None:
    live = tmp_path / f"{RUN_PREFIX}{os.getppid()}-live"  # the parent of pytest is running
    other = tmp_path / "someone-elses"
    live.mkdir()
    other.mkdir()
    start_once(tmp_path)
    assert entries(tmp_path) == sorted([live.name, other.name])


def test_a_real_server_leaves_tmpdir_as_it_found_it(
    tmp_path: Path, start_server: Callable[..., ServerProcess]
) -> None:
    """`python -m tts_server` runs in its own folder and removes it when stopped (SIGTERM).
    The weights' cache is shared across runs (`TTS_ENGINE_CACHE` here: the one other tests use)."""
    server = start_server({"TMPDIR": str(tmp_path), CACHE_ENV: str(cache_dir())})
    server.wait_ready()
    (run,) = tmp_path.iterdir()
    assert run.name.startswith(f"{RUN_PREFIX}{server.proc.pid}-")
    assert any(p.name == ESPEAK_COPY for p in run.rglob("*"))  # the G2P's copy, made here
    server.stop()
    assert server.proc.returncode == 0
    assert entries(tmp_path) == []
