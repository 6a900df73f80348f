"""Where a command may write: checked before the work, so a long run never ends in a traceback
because its `--out` was a file, a folder, missing, or read-only.

`usable_folder` (an artifact directory: created when missing) and `usable_file` (one file:
its folder must exist) return the path or raise `ArtifactError` with one line that names the
flag and the fix. Writability is tested by creating and removing a file, the only test that
holds for every user (root ignores permission bits, not a read-only filesystem).
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

from tts_bench.errors import ArtifactError


def _reason(exc: OSError) -> str:
    return exc.strerror or type(exc).__name__


def _writable(folder: Path, flag: str, shown: Path) -> None:
    try:
        fd, probe = tempfile.mkstemp(prefix=".tts-bench-probe.", dir=folder)
    except OSError as exc:
        raise ArtifactError(
            f"{flag} {shown}: cannot write in {folder} ({_reason(exc)}); pick a writable place"
        ) from None
    os.close(fd)
    with contextlib.suppress(OSError):
        os.unlink(probe)


def usable_folder(path: str | os.PathLike[str], flag: str = "--out") -> Path:
    """A folder that exists (created with its parents when missing) and takes new files."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise ArtifactError(f"{flag} {path}: is a file, not a folder; give a folder")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ArtifactError(
            f"{flag} {path}: cannot create this folder ({_reason(exc)}); pick a writable place"
        ) from None
    _writable(path, flag, path)
    return path


def usable_file(path: str | os.PathLike[str], flag: str = "--out") -> Path:
    """A file path whose folder exists and takes new files (the file itself may exist)."""
    path = Path(path)
    if path.is_dir():
        raise ArtifactError(f"{flag} {path}: is a folder; give a file name inside it")
    if not path.parent.is_dir():
        raise ArtifactError(
            f"{flag} {path}: the folder {path.parent} does not exist; create it or pick another"
        )
    _writable(path.parent, flag, path)
    return path
