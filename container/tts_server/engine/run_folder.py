"""One folder per server run for whatever the libraries put in TMPDIR, removed when it exits.

phonemizer's espeak wrapper copies libespeak-ng (660 KB) into a fresh `mkdtemp` each time one
is built (the English G2P builds two) and removes the copy only from a finaliser, which never
runs: the server leaves by `os._exit` (`tts_server.__main__.run` says why). onnxruntime writes
its telemetry `.ses` file there too. So the server runs with TMPDIR (and `tempfile`) pointing
at `<TMPDIR>/tts-server-<pid>-<random>/`, which its engine child inherits, and removes that
folder on the way out. A run killed before it could (SIGKILL) leaves its folder; the next
start removes the folders, owned by this user, of runs whose process is gone.

What is meant to outlive a run (the reassembled weights, `offline_weights.cache_dir`) stays
in the TMPDIR the server was started with: `shared_temp_dir()`.

    run_in_own_folder(serve)   # serve() -> exit code; never returns
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

RUN_PREFIX = "tts-server-"
# The TMPDIR the server was started with, for its engine child (whose TMPDIR is the run's).
SHARED_TEMP_ENV = "TTS_SERVER_SHARED_TMPDIR"


def shared_temp_dir() -> Path:
    """The temp folder shared across runs: the one this server (or its parent) started with."""
    return Path(os.environ.get(SHARED_TEMP_ENV) or tempfile.gettempdir())


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: alive
        return True
    return True


def remove_stale_run_folders(shared: Path) -> list[Path]:
    """Remove this user's run folders in `shared` whose process is gone (killed runs)."""
    removed = []
    for folder in shared.glob(f"{RUN_PREFIX}*"):
        pid_text = folder.name.removeprefix(RUN_PREFIX).split("-", 1)[0]
        if not pid_text.isdigit() or int(pid_text) == os.getpid() or _alive(int(pid_text)):
            continue
        try:
            info = folder.lstat()
        except OSError:
            continue
        if folder.is_dir() and not folder.is_symlink() and info.st_uid == os.geteuid():
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
    return removed


def enter_run_folder() -> Path:
    """Make this run's folder and point TMPDIR and `tempfile` at it (this process and every
    child started after); the shared folder is kept in SHARED_TEMP_ENV."""
    shared = shared_temp_dir()
    remove_stale_run_folders(shared)
    folder = Path(tempfile.mkdtemp(prefix=f"{RUN_PREFIX}{os.getpid()}-", dir=shared))
    os.environ[SHARED_TEMP_ENV] = str(shared)
    os.environ["TMPDIR"] = str(folder)
    tempfile.tempdir = str(folder)  # gettempdir() caches its first answer
    return folder


def leave_run_folder(folder: Path) -> None:
    """Remove the run's folder and point TMPDIR and `tempfile` back at the shared one."""
    shutil.rmtree(folder, ignore_errors=True)
    shared = os.environ.pop(SHARED_TEMP_ENV, None)
    if shared is not None:
        os.environ["TMPDIR"] = shared
        tempfile.tempdir = shared


def run_in_own_folder(main: Callable[[], int]) -> NoReturn:
    """Run `main` in a run folder, remove the folder, and leave at once with `main`'s code."""
    folder = enter_run_folder()
    try:
        code = main()
    finally:
        leave_run_folder(folder)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
