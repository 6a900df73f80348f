"""Where the local cloud keeps what only its user may read or replace: the TLS key and CA
bundle, and the env file of keys it writes for other shells.

A path is private when no other user can put a file at it: every folder from it up to `/` is
owned by this user or by root and is not writable by group or others, unless it is sticky
(as `/tmp` is: others may add their own names there, but not replace or move ours).

The TLS files of a run live in `<state>/local-cloud/run-<pid>-<random>/` (the state folder is
tts-bench's, `$TTS_BENCH_STATE_DIR` or the XDG state home; `local-cloud/` is made 0700 and
kept). The run's folder is removed when the run stops, so no key outlives it; a shell that
sourced the env file then names a bundle that is gone, which fails closed, and since
`local-cloud/` is this user's alone, nobody else can put a bundle there in its place. A run
that was killed before it could clean up leaves its folder; the next start stops the instance
processes the run recorded there (`orphans`) and removes the folders of runs whose process is
gone.
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path

from tts_bench.aws.freeze import state_dir
from tts_bench.local_cloud.errors import LocalCloudError
from tts_bench.local_cloud.orphans import owner_replaced, stop_orphans

RUNS_FOLDER = "local-cloud"
RUN_PREFIX = "run-"


def unsafe_folder(folder: Path) -> str | None:
    """Why another user could put a file in `folder` (or above it), or None if none can."""
    uid = os.geteuid()
    current = folder.resolve()
    for place in (current, *current.parents):
        info = place.lstat()
        if info.st_uid not in (uid, 0):
            return f"{place} belongs to another user (uid {info.st_uid})"
        writable_by_others = info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
        if writable_by_others and not info.st_mode & stat.S_ISVTX:
            return f"{place} is writable by other users ({stat.filemode(info.st_mode)})"
    return None


def check_private_folder(folder: Path, what: str) -> None:
    problem = unsafe_folder(folder)
    if problem is not None:
        raise LocalCloudError(
            f"{what}: {problem}; other users could replace what the local cloud writes there. "
            "Pick a folder only you can write"
        )


def runs_folder() -> Path:
    """`<state>/local-cloud`, made if missing, 0700 and private (else a one-line refusal)."""
    folder = state_dir() / RUNS_FOLDER
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        if folder.is_symlink() or not folder.is_dir():
            raise LocalCloudError(f"{folder} is not a folder; remove it")
        if folder.stat().st_uid == os.geteuid():
            folder.chmod(0o700)
    except OSError as exc:
        raise LocalCloudError(
            f"cannot make the local cloud's state folder {folder}: {exc}"
        ) from None
    check_private_folder(folder, "the local cloud's state folder")
    return folder


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _gone(run: Path) -> bool:
    """Whether the run's process is gone: its pid is free, or taken by another process."""
    pid_text = run.name.removeprefix(RUN_PREFIX).split("-", 1)[0]
    if not pid_text.isdigit() or int(pid_text) == os.getpid():
        return False
    return not _alive(int(pid_text)) or owner_replaced(run)


def remove_stale_runs(folder: Path, say: Callable[[str], None]) -> list[Path]:
    """Remove the run folders of processes that are gone (killed before they cleaned up),
    after stopping the instance processes each one recorded (`orphans`); one line says so."""
    removed, stopped = [], []
    for run in folder.glob(f"{RUN_PREFIX}*"):
        if _gone(run):
            stopped += stop_orphans(run)
            shutil.rmtree(run, ignore_errors=True)
            removed.append(run)
    if stopped:
        say(
            f"stopped {len(stopped)} instance process(es) left by a local cloud that was killed "
            f"before it could stop them (pids {', '.join(map(str, sorted(stopped)))})"
        )
    return removed


def new_run_folder(say: Callable[[str], None]) -> Path:
    """A fresh, 0700 folder for this run's TLS files and instance record, under the private
    runs folder; the runs of killed local clouds are cleaned up first."""
    folder = runs_folder()
    remove_stale_runs(folder, say)
    return Path(tempfile.mkdtemp(prefix=f"{RUN_PREFIX}{os.getpid()}-", dir=folder))
