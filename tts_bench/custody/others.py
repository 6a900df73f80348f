"""Surge runs, simulations, rehearsals and the GPU summary, each against what it was made from.

- A surge artifact: its ladder (by sha256, in the same folder, checked in turn) and its samples;
  every run is recomputed with `measure.surge.figures.surge_run`, the model's prediction too
  (its seed and trials are recorded). The bound it ran at is the ladder's Q_max.
- A simulation: every input file it names is found by sha256 (in its folder, else at its
  recorded path) and checked in turn, and the plan it names is the plan it read. Its simulated
  figures are not recomputed here: that takes the simulator (the artifact records its command).
- A rehearsal: the same for the plan, ladder and T_total it read; its rehearsed and replayed
  figures are taken as recorded (live traffic is not repeated).
- The GPU summary (`gpu-summary-*.json`) is not an artifact but a table over two ladders: it is
  recomputed from the serial and the batching qmax artifacts beside it
  (`measure.gpu_summary.recompute`), which are checked in turn.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tts_bench.artifacts.files import load_artifact, sha256_file
from tts_bench.artifacts.plan import PlanArtifact
from tts_bench.artifacts.qmax import QmaxArtifact
from tts_bench.artifacts.rehearsal import RehearsalArtifact
from tts_bench.artifacts.simulation import AwsSemanticsRecord, InputFile, SimulationArtifact
from tts_bench.artifacts.surge import SurgeArtifact, surge_filename
from tts_bench.custody.differences import first_difference
from tts_bench.custody.outcome import Checked, CustodyError, Sources, check_name
from tts_bench.engine_modes import (
    BATCHING_ENGINE_MODE,
    ENGINE_MODES,
    MODE_ENV,
    SERIAL_ENGINE_MODE,
)
from tts_bench.errors import ArtifactError, TtsBenchError
from tts_bench.measure.gpu_summary import recompute
from tts_bench.measure.samples import read_samples, samples_path
from tts_bench.measure.surge.figures import surge_run
from tts_bench.planning.aws.semantics import semantics_digest


def check_surge(path: Path, surge: SurgeArtifact, sources: Sources) -> Checked:
    if surge.fingerprint is not None:
        check_name(path, surge_filename(surge.fingerprint, surge.provenance.kind))
    ladder_path = sources.find(surge.qmax_sha256)
    if ladder_path is None:
        raise CustodyError(
            path,
            f"qmax_sha256: its ladder (sha256 {surge.qmax_sha256[:12]}…, recorded as "
            f"{surge.qmax_path}) is not in {sources.folder}",
        )
    _checked_source(path, "qmax_sha256", ladder_path, sources)
    ladder = load_artifact(ladder_path, QmaxArtifact)
    if surge.q_max != ladder.refined_q_max:
        raise CustodyError(
            path, f"q_max is {surge.q_max}, its ladder's Q_max is {ladder.refined_q_max}"
        )
    try:
        samples = read_samples(samples_path(path))
    except ArtifactError as exc:
        raise CustodyError(path, f"its samples: {exc}") from None
    for index, run in enumerate(surge.runs):
        again = surge_run(samples, ladder, run.rate_rps, run.duration_s, run.seed, run.start_epoch)
        found = first_difference(
            run.model_dump(mode="json"), again.model_dump(mode="json"), path=f"runs[{index}]"
        )
        if found is not None:
            raise CustodyError(path, found.describe("recomputed from its samples"))
    how = f"{len(surge.runs)} runs recomputed from {len(samples):,} samples"
    return Checked(path, f"surge {surge.provenance.kind}", how + f" against {ladder_path.name}")


def _semantics_recorded(path: Path, what: str, record: AwsSemanticsRecord | None) -> str:
    """The reading of AWS it ran under must be recorded, and its hash must be its fields'."""
    if record is None:
        raise CustodyError(
            path,
            f"inputs.aws_semantics: the {what} records no AWS semantics (it predates the variant "
            "sets of docs/aws-semantics.md); re-run its command to record one",
        )
    fields = record.model_dump(mode="json", exclude={"sha256"})
    if semantics_digest(fields) != record.sha256:
        raise CustodyError(
            path, "inputs.aws_semantics.sha256 is not the hash of its fields (edited by hand?)"
        )
    return f"under AWS semantics {record.name!r}"


def check_simulation(path: Path, simulation: SimulationArtifact, sources: Sources) -> Checked:
    names = _inputs_found(
        path, "simulation", simulation.inputs.files, simulation.inputs.plan_id, sources
    )
    under = _semantics_recorded(path, "simulation", simulation.inputs.aws_semantics)
    return Checked(
        path,
        "simulation",
        f"its inputs found by sha256 and checked ({names}), {under}",
        ("the simulated figures are taken as recorded: re-run its command to reproduce them",),
    )


def check_rehearsal(path: Path, rehearsal: RehearsalArtifact, sources: Sources) -> Checked:
    names = _inputs_found(
        path, "rehearsal", rehearsal.inputs.files, rehearsal.inputs.plan_id, sources
    )
    under = _semantics_recorded(path, "rehearsal", rehearsal.inputs.aws_semantics)
    return Checked(
        path,
        f"rehearsal {rehearsal.provenance.kind}",
        f"its inputs found by sha256 and checked ({names}), {under}",
        (
            "the rehearsed and replayed figures are taken as recorded: live traffic is not "
            "repeated, and its command gives another draw",
        ),
    )


def _inputs_found(
    path: Path, what: str, files: dict[str, InputFile], plan_id: str, sources: Sources
) -> str:
    """Every file a simulation or rehearsal read, found by sha256 (in its folder, else at its
    recorded path) and checked in turn; the plan the one its id names."""
    found: dict[str, Path] = {}
    for key, named in files.items():
        where = sources.find(named.sha256) or _at_recorded_path(named.path, named.sha256)
        if where is None:
            raise CustodyError(
                path,
                f"inputs.files.{key}.sha256: no file in {sources.folder} (nor {named.path}) has "
                f"sha256 {named.sha256[:12]}…; the {what} read another {key} than is here",
            )
        if where.parent.resolve() == sources.folder.resolve():
            _checked_source(path, f"inputs.files.{key}", where, sources)
        found[key] = where
    if "plan" in found:
        plan = load_artifact(found["plan"], PlanArtifact)
        if plan.plan_id != plan_id:
            raise CustodyError(
                path, f"inputs.plan_id is {plan_id}, the plan it read is {plan.plan_id}"
            )
    return ", ".join(p.name for p in found.values())


def check_summary(path: Path, summary: dict[str, Any], sources: Sources) -> Checked:
    ladders = _summary_ladders(path, summary, sources)
    try:
        again = recompute(summary, ladders[SERIAL_ENGINE_MODE][1], ladders[BATCHING_ENGINE_MODE][1])
    except (TtsBenchError, KeyError, TypeError, ValueError) as exc:
        raise CustodyError(path, f"cannot be recomputed from its ladders: {exc}") from None
    found = first_difference(summary, _json(again))
    if found is not None:
        raise CustodyError(path, found.describe("recomputed from its two ladders"))
    names = " and ".join(p.name for p, _ in ladders.values())
    return Checked(path, "gpu summary (not an artifact)", f"recomputed from {names}")


def _summary_ladders(
    path: Path, summary: dict[str, Any], sources: Sources
) -> dict[str, tuple[Path, QmaxArtifact]]:
    """The serial and the batching ladder of the summary's instance type, beside it."""
    found: dict[str, list[tuple[Path, QmaxArtifact]]] = {mode: [] for mode in ENGINE_MODES}
    for candidate in sorted(sources.folder.glob("qmax-*.json")):
        try:
            ladder = load_artifact(candidate, QmaxArtifact)
        except ArtifactError:
            continue
        fp = ladder.fingerprint
        if fp is None or fp.instance_type != summary.get("instance_type"):
            continue
        mode = fp.performance_env.get(MODE_ENV)
        if mode in found:
            found[mode].append((candidate, ladder))
    for key, ladders in found.items():
        if len(ladders) != 1:
            raise CustodyError(
                path,
                f"instance_type: a GPU summary is recomputed from one serial and one batching "
                f"ladder of {summary.get('instance_type')} beside it; {len(ladders)} {key} found",
            )
        _checked_source(path, f"its {key} ladder", ladders[0][0], sources)
    return {key: ladders[0] for key, ladders in found.items()}


def _checked_source(path: Path, what: str, source: Path, sources: Sources) -> None:
    try:
        sources.check(source)
    except TtsBenchError as exc:
        raise CustodyError(path, f"{what}: {exc}") from None


def _at_recorded_path(recorded: str, sha256: str) -> Path | None:
    candidate = Path(recorded)
    try:
        return candidate if candidate.is_file() and sha256_file(candidate) == sha256 else None
    except OSError:
        return None


def _json(value: Any) -> Any:
    """The summary as JSON would hold it (integer keys become strings)."""
    return json.loads(json.dumps(value))
