"""A plan re-derived from the qmax and ttotal it names, and compared: the gate's, the policy
pack's and `tts-bench verify`'s one rule for a plan.

1. Each source is found by its sha256 in the plan's folder, its recorded provenance must be its
   own, and it is checked in turn against its raw data (`ladders`, `scale_outs`, or a pin).
2. The plan is derived again (`planning.plan.derive_plan`) from those two artifacts with the
   plan's recorded operator inputs (peak and trough, SLO, surge ratio, floor, mismatch
   allowance) and rule; a `plan --traffic` check is applied again from the figures it recorded
   (`traffic_check.with_check`), which never moves a deployed number; a `--schedule`'s steps
   are derived again from the per-minute rates the plan records (`planning.schedule`), so a
   hand-edited step, or rates that no longer match their sha256, is a difference. One
   derivation, no simulation: the fleet rule's tuned constants are fixed in code.
3. `compare_plans` walks both, field by field: every deployed number and its units, the deploy
   shape, `feasible`, every finding's verdict and figures, `plan_id`, `provenance.kind`. Not
   compared (`PLAN_EXEMPT`): when and by what the plan was written, where its sources lay, a
   finding's prose. A version 1 plan has no deploy shape: it deploys the one its compared fields
   describe.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

from tts_bench.artifacts.files import load_artifact
from tts_bench.artifacts.plan import PlanArtifact, SourceArtifact
from tts_bench.artifacts.qmax import QmaxArtifact
from tts_bench.artifacts.ttotal import TtotalArtifact
from tts_bench.custody.differences import Difference, exempt_paths, first_difference
from tts_bench.custody.outcome import Checked, CustodyError, Sources
from tts_bench.errors import TtsBenchError
from tts_bench.planning.plan import derive_plan
from tts_bench.planning.schedule.attach import with_schedule
from tts_bench.planning.steps import request_of
from tts_bench.planning.traffic_check import with_check

PLAN_EXEMPT: Final = (
    r"provenance\.(created_at|source|tool|command|notes)",
    r"sources\.[a-z]+\.path",
    r"findings\[[^\]]+\]\.message",
)
# A version 1 plan records no deploy shape; it deploys the published shape of its fields.
VERSION_1_EXEMPT: Final = (r"schema_version", r"deploy")


def compare_plans(recorded: PlanArtifact, derived: PlanArtifact) -> Difference | None:
    """The first field where a plan differs from the one its sources give."""
    patterns = PLAN_EXEMPT + (VERSION_1_EXEMPT if recorded.schema_version == 1 else ())
    return first_difference(
        recorded.model_dump(mode="json"),
        derived.model_dump(mode="json"),
        exempt=exempt_paths(patterns),
    )


def rederive(plan: PlanArtifact, qmax: QmaxArtifact, ttotal: TtotalArtifact) -> PlanArtifact:
    """The plan its sources and recorded inputs give (a `RefusalError` when they give none)."""
    request = request_of(plan.inputs, plan.rule)
    derived = derive_plan(
        qmax, ttotal, request, dict(plan.sources), created_at=plan.provenance.created_at
    )
    if (schedule := plan.schedule) is not None:
        derived = with_schedule(
            derived, schedule.traffic, schedule.minute_rps, schedule.trace_sha256,
            schedule.period_s,
        )  # fmt: skip
    check = plan.traffic_check
    if check is None:
        return derived
    return with_check(
        derived, check.traffic, check.seeds, check.shed_budget, check.duration_s,
        check.trace_sha256, check.forecast_errors,
    )  # fmt: skip


def check_plan(path: Path, plan: PlanArtifact, sources: Sources) -> Checked:
    """The plan against its sources (each checked too); a `CustodyError` naming the first
    differing field and both values, or the source that is missing or fails."""
    qmax_path, qmax = _source(path, plan, "qmax", sources, QmaxArtifact)
    ttotal_path, ttotal = _source(path, plan, "ttotal", sources, TtotalArtifact)
    try:
        derived = rederive(plan, qmax, ttotal)  # type: ignore[arg-type]
    except TtsBenchError as exc:
        raise CustodyError(path, f"inputs: with them its sources give no plan: {exc}") from None
    found = compare_plans(plan, derived)
    if found is not None:
        why = found.describe(f"re-derived from {qmax_path.name} and {ttotal_path.name}")
        if found.path == "plan_id":
            why += " (plan_id hashes the inputs, sources, fingerprint and rule: one was edited)"
        raise CustodyError(path, why)
    how = f"re-derived from {qmax_path.name} and {ttotal_path.name}, every field equal"
    notes = ()
    if plan.traffic_check is not None:
        notes = ("its plan --traffic figures are taken as recorded (they need the simulator)",)
    return Checked(path, f"plan {plan.rule} {plan.provenance.kind}", how, notes)


def _source(
    path: Path,
    plan: PlanArtifact,
    key: str,
    sources: Sources,
    model: type[QmaxArtifact] | type[TtotalArtifact],
) -> tuple[Path, QmaxArtifact | TtotalArtifact]:
    named: SourceArtifact | None = plan.sources.get(key)  # type: ignore[call-overload]
    if named is None:
        raise CustodyError(path, f"sources.{key}: the plan names no {key} artifact")
    found = sources.find(named.sha256)
    if found is None:
        raise CustodyError(
            path,
            f"sources.{key}.sha256: no file in {sources.folder} has sha256 {named.sha256[:12]}… "
            f"(recorded as {named.path}); restore it, or plan again from what is there",
        )
    try:
        artifact = load_artifact(found, model)
    except TtsBenchError as exc:
        raise CustodyError(path, f"sources.{key}: {exc}") from None
    if artifact.provenance.kind != named.provenance:
        raise CustodyError(
            path,
            f"sources.{key}.provenance is {named.provenance}, but {found.name} is "
            f"{artifact.provenance.kind}",
        )
    try:
        sources.check(found)
    except TtsBenchError as exc:
        raise CustodyError(path, f"sources.{key}: {exc}") from None
    return found, artifact
