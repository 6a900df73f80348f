"""The files that travel with an artifact: what it names by sha256, and its raw data beside it.

A plan names its qmax and ttotal by sha256; they lie in the plan's folder. A ladder's raw data
(`<artifact>.samples.csv.gz`, `<artifact>.raw.json.gz`) and a surge's samples lie beside it,
named after it. Copying a plan somewhere else (a scratch measurements folder) copies all of them,
so the plan still re-derives there.
"""

from __future__ import annotations

import os
from pathlib import Path

from tts_bench.artifacts.files import sha256_file
from tts_bench.artifacts.plan import PlanArtifact


def json_digests(folder: str | os.PathLike[str]) -> dict[Path, str]:
    """sha256 of every `*.json` directly in `folder`."""
    folder = Path(folder)
    found = sorted(folder.glob("*.json")) if folder.is_dir() else []
    return {path: sha256_file(path) for path in found if path.is_file()}


def beside(path: Path) -> list[Path]:
    """The artifact and the raw data named after it (`<name>.*`)."""
    return [path, *sorted(path.parent.glob(path.name + ".*"))]


def plan_files(plan_path: Path, plan: PlanArtifact) -> list[Path]:
    """The plan, the sources it names found by sha256 in its folder, and their raw data."""
    wanted = {source.sha256 for source in plan.sources.values()}
    found = [path for path, digest in json_digests(plan_path.parent).items() if digest in wanted]
    return [plan_path, *(part for path in found for part in beside(path))]
