"""A plan from artifact files: load both, record their hashes, derive, write the plan.

The one path from files to a written plan, shared by `tts-bench plan` and the main job.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from tts_bench.artifacts.files import load_artifact, sha256_file, write_artifact
from tts_bench.artifacts.fingerprint import plan_filename
from tts_bench.artifacts.plan import PlanArtifact, SourceArtifact
from tts_bench.artifacts.qmax import QmaxArtifact
from tts_bench.artifacts.ttotal import TtotalArtifact
from tts_bench.errors import RefusalError
from tts_bench.planning.plan import derive_plan
from tts_bench.planning.steps import PlanRequest


@dataclass(frozen=True)
class WrittenPlan:
    plan: PlanArtifact
    path: Path
    qmax: QmaxArtifact
    ttotal: TtotalArtifact


# Checks a derived plan before it is written (`plan --traffic`): plan, qmax, ttotal, sources in.
PlanCheck = Callable[
    [PlanArtifact, QmaxArtifact, TtotalArtifact, dict[str, SourceArtifact]], PlanArtifact
]


def plan_from_files(
    qmax_path: Path,
    ttotal_path: Path,
    request: PlanRequest,
    out: Path,
    check: PlanCheck | None = None,
) -> WrittenPlan:
    """Derive the plan over two artifact files, `check` it when given, and write it into `out`
    (atomically)."""
    qmax = load_artifact(qmax_path, QmaxArtifact)
    ttotal = load_artifact(ttotal_path, TtotalArtifact)
    sources = {
        "qmax": SourceArtifact(
            path=str(qmax_path), sha256=sha256_file(qmax_path), provenance=qmax.provenance.kind
        ),
        "ttotal": SourceArtifact(
            path=str(ttotal_path),
            sha256=sha256_file(ttotal_path),
            provenance=ttotal.provenance.kind,
        ),
    }
    plan = derive_plan(qmax, ttotal, request, sources)
    if check is not None:
        plan = check(plan, qmax, ttotal, sources)
    fp = plan.fingerprint or qmax.fingerprint
    filename = (
        plan_filename(fp, plan.provenance.kind, plan.rule)
        if fp
        else f"plan-{plan.rule}-unfingerprinted.json"
    )
    return WrittenPlan(plan, write_artifact(plan, out, filename), qmax, ttotal)


def source_file(
    plan: PlanArtifact, plan_path: Path, name: str, flag: str, roots: Sequence[Path] = ()
) -> Path:
    """The qmax or ttotal file a plan names (`sources`): where it says, under one of `roots`, or
    beside the plan; a one-line refusal naming `flag` otherwise."""
    source = plan.sources.get(name)  # type: ignore[call-overload]
    if source is None:
        raise RefusalError(f"{flag}: the plan names no {name} artifact; pass {flag} FILE")
    recorded = Path(source.path)
    candidates = [recorded, *(root / recorded for root in roots), plan_path.parent / recorded.name]
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    raise RefusalError(
        f"{flag}: the plan's {name} {source.path} is not found (where it says, or beside the "
        f"plan); pass {flag} FILE"
    )
