"""The measured-plan gate: may this deployment autoscale, and on which plan?

One rule, used by the Pulumi program (to decide whether autoscaling and observability exist)
and by the policy pack (to refuse scaling resources that the rule would not allow):
scaling is enabled when the operator's bounds leave room to scale (max > min) and a plan in the
measurements folder matches the deployment's model, instance type, image digest and container
performance env, and that plan is feasible. The result names the first condition that failed.
An emulated plan (measured through the local cloud) gates only a local image: nothing measured
through the emulator ever scales a real endpoint.
"""

from __future__ import annotations

import os
from enum import StrEnum
from pathlib import Path
from typing import Final

from pydantic import BaseModel, ConfigDict, Field

from tts_bench.artifacts.fingerprint import DIGEST_PATTERN
from tts_bench.artifacts.schema import PlanArtifact, load_artifact
from tts_bench.deployment import OperatorBounds
from tts_bench.errors import ArtifactError
from tts_bench.telemetry import DEPLOYMENT_ENV

PLAN_GLOB: Final = "plan-*.json"


class GateCondition(StrEnum):
    """Why the gate decided as it did; `ENABLED` when every condition held."""

    ENABLED = "enabled"
    SCALING_DISABLED = "scaling-disabled"  # operator bounds: max == min
    NO_PLAN = "no-plan"  # nothing for this model and instance type
    DIGEST_MISMATCH = "digest-mismatch"  # plans exist, but for other images
    ENV_MISMATCH = "env-mismatch"  # plans for this image, but another performance env
    EMULATED_PLAN = "emulated-plan"  # only emulated plans match, and the image is no local digest
    INPUTS_MISMATCH = "inputs-mismatch"  # the plan was derived for another SLO or surge ratio
    INFEASIBLE = "infeasible"  # the matching plan has a `stop` finding


class GateQuery(BaseModel):
    """What is being deployed. `slo_ms`/`surge_ratio` are checked only when given."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str
    instance_type: str
    image_digest: str = Field(pattern=DIGEST_PATTERN)
    performance_env: dict[str, str] = Field(default_factory=dict)
    bounds: OperatorBounds
    slo_ms: float | None = None
    surge_ratio: float | None = None
    image_is_local: bool = Field(
        default=False, description="the image is a local digest (the local cloud), not a registry's"
    )


class GateResult(BaseModel):
    """The decision. `plan` and `plan_path` are set whenever a plan matched the image."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    condition: GateCondition
    reason: str
    plan: PlanArtifact | None = None
    plan_path: str | None = None
    deployed_min: int | None = None
    deployed_max: int | None = None
    peak_unreachable: bool = False
    unreadable: list[str] = Field(
        default_factory=list, description="plan files that failed to load"
    )

    @property
    def enabled(self) -> bool:
        return self.condition is GateCondition.ENABLED


def performance_env_of(container_env: dict[str, str]) -> dict[str, str]:
    """The fingerprint's performance env from a deployed container env: all but deployment config."""
    return {k: v for k, v in sorted(container_env.items()) if k not in DEPLOYMENT_ENV}


def load_plans(folder: str | os.PathLike[str]) -> tuple[list[tuple[Path, PlanArtifact]], list[str]]:
    """Every readable plan in `folder` (sorted by name) and a one-line complaint per broken one."""
    plans: list[tuple[Path, PlanArtifact]] = []
    unreadable: list[str] = []
    for path in sorted(Path(folder).glob(PLAN_GLOB)):
        try:
            plans.append((path, load_artifact(path, PlanArtifact)))
        except ArtifactError as exc:
            unreadable.append(str(exc))
    return plans, unreadable


def evaluate(folder: str | os.PathLike[str], query: GateQuery) -> GateResult:
    """Apply the gate to the plans in `folder`. Pure apart from reading that folder."""
    if not query.bounds.scaling_enabled:
        return GateResult(
            condition=GateCondition.SCALING_DISABLED,
            reason=(
                f"scaling is disabled: maxInstances ({query.bounds.max_instances}) equals "
                f"minInstances ({query.bounds.min_instances}); raise maxInstances to enable it"
            ),
        )
    if not Path(folder).is_dir():
        return GateResult(
            condition=GateCondition.NO_PLAN,
            reason=f"no plan in {folder}: the folder does not exist",
        )
    plans, unreadable = load_plans(folder)
    return decide(plans, query, folder=str(folder), unreadable=unreadable)


def decide(
    plans: list[tuple[Path, PlanArtifact]],
    query: GateQuery,
    *,
    folder: str,
    unreadable: list[str] | None = None,
) -> GateResult:
    """The rule itself over already-loaded plans."""
    unreadable = unreadable or []
    broken = f" ({len(unreadable)} unreadable plan file(s) skipped)" if unreadable else ""
    what = f"model {query.model} on {query.instance_type}"
    same_target = [
        (p, a)
        for p, a in plans
        if a.fingerprint is not None
        and a.fingerprint.model == query.model
        and a.fingerprint.instance_type == query.instance_type
    ]
    if not same_target:
        return GateResult(
            condition=GateCondition.NO_PLAN,
            reason=f"no plan in {folder} is for {what}{broken}; measure it and run `tts-bench plan`",
            unreadable=unreadable,
        )
    same_image = [
        (p, a) for p, a in same_target if a.fingerprint.image_digest == query.image_digest
    ]  # type: ignore[union-attr]
    if not same_image:
        others = sorted({a.fingerprint.short_digest for _, a in same_target})  # type: ignore[union-attr]
        return GateResult(
            condition=GateCondition.DIGEST_MISMATCH,
            reason=(
                f"no plan for this image: plans in {folder} for {what} were measured on image(s) "
                f"{', '.join(others)}, not {query.image_digest}{broken}; measure this image"
            ),
            unreadable=unreadable,
        )
    env = performance_env_of(query.performance_env)
    same_env = [(p, a) for p, a in same_image if a.fingerprint.performance_env == env]  # type: ignore[union-attr]
    if not same_env:
        return GateResult(
            condition=GateCondition.ENV_MISMATCH,
            reason=(
                f"no plan for this container env: plans for image {query.image_digest} were measured "
                f"with another performance env than {env}{broken}"
            ),
            unreadable=unreadable,
        )
    if not query.image_is_local:
        emulated = [p.name for p, a in same_env if a.provenance.kind == "emulated"]
        same_env = [(p, a) for p, a in same_env if a.provenance.kind != "emulated"]
        if not same_env:
            return GateResult(
                condition=GateCondition.EMULATED_PLAN,
                reason=(
                    f"the only plan(s) for this image ({', '.join(emulated)}) are emulated, measured "
                    "through the local cloud; an emulated plan never gates a stack whose image is "
                    f"not a local digest{broken}; measure the real endpoint"
                ),
                unreadable=unreadable,
            )
    path, plan = same_env[-1]
    common = {"plan": plan, "plan_path": str(path), "unreadable": unreadable}
    if query.slo_ms is not None and abs(plan.inputs.slo_ms - query.slo_ms) > 1e-9:
        return GateResult(
            condition=GateCondition.INPUTS_MISMATCH,
            reason=(
                f"plan {plan.plan_id} ({path.name}) was derived for an SLO of {plan.inputs.slo_ms:g} ms, "
                f"the stack asks {query.slo_ms:g} ms; re-run `tts-bench plan` with the stack's SLO"
            ),
            **common,
        )
    if query.surge_ratio is not None and abs(plan.inputs.surge_ratio - query.surge_ratio) > 1e-9:
        return GateResult(
            condition=GateCondition.INPUTS_MISMATCH,
            reason=(
                f"plan {plan.plan_id} ({path.name}) was derived for a surge ratio of "
                f"{plan.inputs.surge_ratio:g}, the stack asks {query.surge_ratio:g}; re-run `tts-bench plan`"
            ),
            **common,
        )
    if not plan.feasible:
        stops = ", ".join(f.name for f in plan.findings if f.verdict == "stop")
        return GateResult(
            condition=GateCondition.INFEASIBLE,
            reason=f"plan {plan.plan_id} ({path.name}) is infeasible (stop: {stops})",
            **common,
        )
    low, high = query.bounds.clamp(plan.min_instances, plan.max_instances)
    unreachable = query.bounds.peak_unreachable(plan.max_instances)
    return GateResult(
        condition=GateCondition.ENABLED,
        reason=(
            f"plan {plan.plan_id} ({path.name}) matches and is feasible; deploying "
            f"min {low} / max {high} instances"
        ),
        deployed_min=low,
        deployed_max=high,
        peak_unreachable=unreachable,
        **common,
    )
