"""Reference artifacts: accepted only as the pinned files; an edited one is rebuilt from the
published run (kept at `measurements/reference/`, pinned too) to name the field that differs."""

from __future__ import annotations

from pathlib import Path

from tts_bench.artifacts.files import sha256_file
from tts_bench.artifacts.qmax import QmaxArtifact
from tts_bench.artifacts.reference import (
    PINNED_REFERENCE_SHA256,
    PUBLISHED_RUN,
    PUBLISHED_RUN_SHA256,
    build_reference,
)
from tts_bench.artifacts.ttotal import TtotalArtifact
from tts_bench.custody.differences import exempt_paths, first_difference
from tts_bench.custody.outcome import Checked, CustodyError
from tts_bench.errors import TtsBenchError

NOT_PINNED = (
    "provenance.kind is reference, but its sha256 {sha}… is not a pinned reference artifact "
    "(tts_bench/artifacts/reference.py)"
)


def check_reference(path: Path, artifact: QmaxArtifact | TtotalArtifact, sha256: str) -> Checked:
    kind = artifact.artifact
    if sha256 in PINNED_REFERENCE_SHA256:
        how = f"the pinned {PINNED_REFERENCE_SHA256[sha256]} (sha256 {sha256[:12]}…)"
        return Checked(path, f"{kind} reference", how)
    refusal = NOT_PINNED.format(sha=sha256[:12])
    raise CustodyError(path, f"{refusal}: {_what_differs(path, artifact)}")


def _what_differs(path: Path, artifact: QmaxArtifact | TtotalArtifact) -> str:
    """The first field where it differs from the published run's rebuild, when that is here."""
    published = path.parent / PUBLISHED_RUN
    restore = "restore the committed file"
    try:
        if sha256_file(published) != PUBLISHED_RUN_SHA256:
            return f"{published} is not the pinned published run either; {restore}"
        qmax, ttotal = build_reference(published)
    except (OSError, TtsBenchError):
        return f"a reference holds no raw data to check it against; {restore}"
    rebuilt = qmax if artifact.artifact == "qmax" else ttotal
    found = first_difference(
        artifact.model_dump(mode="json"),
        rebuilt.model_dump(mode="json"),
        exempt=exempt_paths([r"provenance\.(created_at|tool)"]),
    )
    if found is None:
        return f"it holds the published figures, but is not the committed file; {restore}"
    return found.describe(f"rebuilt from {PUBLISHED_RUN}") + f"; {restore}"
