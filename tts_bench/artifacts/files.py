"""Artifacts as files: where a command may write, the atomic write, loading by kind, one-line
refusals and content hashes.

Every artifact is JSON validated by a pydantic model with ``extra="forbid"``, carries its
provenance and fingerprint, and is named after the fingerprint's slug (see `fingerprint`).
Loading a broken file raises `ArtifactError` with one line naming the file and the field;
writing never overwrites an artifact of another fingerprint, and never leaves half a file
(`write_atomically`: readers see the old content or the new). Where a command may write is
checked before the work (`usable_folder`, `usable_file`), so a long run never ends in a
traceback because its `--out` was a file, a folder, missing, or read-only; writability is tested
by creating and removing a file, the only test that holds for every user (root ignores
permission bits, not a read-only filesystem).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any, TypeVar

from pydantic import (
    BaseModel,
    ValidationError,
)

from tts_bench.artifacts.plan import PlanArtifact
from tts_bench.artifacts.qmax import QmaxArtifact
from tts_bench.artifacts.simulation import SimulationArtifact
from tts_bench.artifacts.ttotal import TtotalArtifact
from tts_bench.errors import ArtifactError
from tts_bench.strict import UnrepresentableNumber, strict_loads

A = TypeVar("A", QmaxArtifact, TtotalArtifact, PlanArtifact, SimulationArtifact)
ARTIFACT_MODELS: dict[str, type[BaseModel]] = {
    "qmax": QmaxArtifact,
    "ttotal": TtotalArtifact,
    "plan": PlanArtifact,
    "simulation": SimulationArtifact,
}


def describe_validation_error(error: ValidationError) -> str:
    """A pydantic error as one line: the first problem's `loc: msg`, and how many more."""
    first = error.errors()[0]
    loc = ".".join(str(p) for p in first["loc"]) or "(top level)"
    msg = first["msg"].removeprefix("Value error, ")
    more = error.error_count() - 1
    return f"{loc}: {msg}" + (f" (and {more} more problem{'s' * (more > 1)})" if more else "")


def parse_artifact_json(raw: str, path: Path) -> Any:
    """JSON text as Python values, or `ArtifactError` of one line: never NaN or Infinity,
    never an integer too long to convert, never a RecursionError from deep nesting."""
    try:
        return strict_loads(raw)
    except json.JSONDecodeError as exc:
        raise ArtifactError(
            f"{path}: not JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})"
        ) from None
    except RecursionError:
        raise ArtifactError(f"{path}: nested too deeply to be an artifact") from None
    except (UnrepresentableNumber, ValueError) as exc:
        raise ArtifactError(f"{path}: {exc}") from None


def load_artifact(path: str | os.PathLike[str], model: type[A]) -> A:
    """Read and validate one artifact; any problem is an `ArtifactError` of one line."""
    path = Path(path)
    try:
        raw = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ArtifactError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ArtifactError(f"{path}: cannot read: {exc}") from None
    data = parse_artifact_json(raw, path)
    kind = model.model_fields["artifact"].default
    if isinstance(data, dict) and data.get("artifact") not in (None, kind):
        raise ArtifactError(
            f"{path}: artifact: this is a {data['artifact']!r} artifact, expected {kind!r}"
        )
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise ArtifactError(f"{path}: {describe_validation_error(exc)}") from None


def load_any(path: str | os.PathLike[str]) -> QmaxArtifact | TtotalArtifact | PlanArtifact:
    """Load an artifact of whichever kind its `artifact` key names."""
    path = Path(path)
    try:
        kind = json.loads(path.read_text(encoding="utf-8")).get("artifact")
    except (OSError, ValueError, AttributeError, RecursionError):
        kind = None
    if kind not in ARTIFACT_MODELS:
        # Let the qmax loader produce the precise one-line complaint.
        kind = kind if kind in ARTIFACT_MODELS else "qmax"
    return load_artifact(path, ARTIFACT_MODELS[kind])  # type: ignore[type-var]


def dump_json(artifact: BaseModel) -> str:
    return artifact.model_dump_json(indent=2) + "\n"


def write_artifact(artifact: A, directory: str | os.PathLike[str], filename: str) -> Path:
    """Atomically write `artifact` as `directory/filename`.

    Overwrites an earlier artifact of the same fingerprint (a re-run); refuses to replace one
    of another fingerprint, or a file it cannot read, so nothing measured is ever lost.
    """
    directory = usable_folder(directory)
    target = directory / filename
    if target.exists():
        try:
            existing = load_artifact(target, type(artifact))
        except ArtifactError as exc:
            raise ArtifactError(
                f"{target}: exists and cannot be read back ({exc}); move it aside, nothing was written"
            ) from None
        if _is_emulated(artifact) != _is_emulated(existing):
            raise ArtifactError(
                f"{target}: holds a {existing.provenance.kind} artifact and this one is "
                f"{artifact.provenance.kind}; they never replace each other, nothing was written"
            )
        if existing.fingerprint != artifact.fingerprint:
            raise ArtifactError(
                f"{target}: holds an artifact of another fingerprint; pass another --out "
                "directory or move it aside, nothing was written"
            )
    try:
        write_atomically(target, dump_json(artifact).encode("utf-8"))
    except OSError as exc:
        raise ArtifactError(
            f"{target}: cannot write ({exc.strerror or exc}); nothing was written"
        ) from None
    return target


def _is_emulated(artifact: QmaxArtifact | TtotalArtifact | PlanArtifact) -> bool:
    return artifact.provenance.kind == "emulated"


def sha256_file(path: str | os.PathLike[str]) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def write_atomically(path: str | os.PathLike[str], data: bytes) -> Path:
    """Write `data` to a temporary file beside `path`, fsync it, then rename it over `path`.

    The temporary file is removed on any failure, so an interrupted write leaves nothing behind.
    """
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    return path


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
