"""The measured-plan gate's selection: may this deployment autoscale, and on which plan?

Scaling is enabled when the operator's bounds leave room to scale (max > min) and exactly one
plan in the measurements folder matches the deployment's model, instance type, endpoint
contract (the stack's; `kokoro` by default), image digest, container performance env and plan
rule (the stack config's; `fleet` by default), and that
plan is feasible. The result names the first condition that failed. An emulated plan (measured
through the local cloud) gates only a local image, or a model package the local cloud holds
(`is_local_package`): nothing measured through the emulator ever scales a real endpoint. Nor
does a plan on a point Q_max (`qmax --q-max-basis point`, issue 38).

`select_plan` is the selection alone. The Pulumi program and the policy pack call
`tts_bench.custody.gate.evaluate`, which then re-derives the selected plan from its sources and
refuses any difference (`GateCondition.NOT_REDERIVED`).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Final, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from tts_bench.artifacts.files import load_artifact
from tts_bench.artifacts.fingerprint import (
    CONTRACT_NAME_PATTERN,
    DIGEST_PATTERN,
    MODEL_PACKAGE_ARN_PATTERN,
    OWN_CONTRACT,
)
from tts_bench.artifacts.plan import PlanArtifact
from tts_bench.deployment import OperatorBounds
from tts_bench.errors import ArtifactError
from tts_bench.telemetry import DEPLOYMENT_ENV

PLAN_GLOB: Final = "plan-*.json"


class GateCondition(StrEnum):
    """Why the gate decided as it did; `ENABLED` when every condition held."""

    ENABLED = "enabled"
    SCALING_DISABLED = "scaling-disabled"  # operator bounds: max == min
    NO_PLAN = "no-plan"  # nothing for this model and instance type
    CONTRACT_MISMATCH = "contract-mismatch"  # plans exist, but measured under another contract
    DIGEST_MISMATCH = "digest-mismatch"  # plans exist, but for other images
    ENV_MISMATCH = "env-mismatch"  # plans for this image, but another performance env
    EMULATED_PLAN = "emulated-plan"  # only emulated plans match, and the image is no local digest
    POINT_Q_MAX = "point-q-max"  # only plans on a point Q_max match, and the image is not local
    RULE_MISMATCH = "rule-mismatch"  # plans for this image, but of another rule
    AMBIGUOUS = "ambiguous"  # two plans match: the gate does not guess
    INPUTS_MISMATCH = "inputs-mismatch"  # the plan was derived for another SLO or surge ratio
    INFEASIBLE = "infeasible"  # the matching plan has a `stop` finding
    NOT_REDERIVED = "not-rederived"  # its sources are missing, or give another plan


class GateQuery(BaseModel):
    """What is being deployed. `slo_ms`/`surge_ratio` are checked only when given."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str
    instance_type: str
    # Exactly one: the image's digest, or the versioned ARN of the model package deployed.
    image_digest: str | None = Field(default=None, pattern=DIGEST_PATTERN)
    model_package: str | None = Field(default=None, pattern=MODEL_PACKAGE_ARN_PATTERN)
    performance_env: dict[str, str] = Field(default_factory=dict)
    bounds: OperatorBounds
    slo_ms: float | None = None
    surge_ratio: float | None = None
    image_is_local: bool = Field(
        default=False,
        description="the image is a local digest, or the package the local cloud's, not a real one",
    )
    rule: Literal["published", "fleet"] = Field(
        default="fleet", description="the plan rule the stack deploys"
    )
    contract: str = Field(
        default=OWN_CONTRACT,
        pattern=CONTRACT_NAME_PATTERN,
        description="the endpoint contract the stack's container speaks",
    )

    @model_validator(mode="after")
    def _one_deployed(self) -> GateQuery:
        if (self.image_digest is None) == (self.model_package is None):
            raise ValueError("a gate query names exactly one of image_digest and model_package")
        return self

    @property
    def deployed(self) -> str:
        """What the stack deploys, as a fingerprint's `deployed` spells it."""
        return self.model_package or self.image_digest or ""


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


def select_plan(folder: str | os.PathLike[str], query: GateQuery) -> GateResult:
    """The gate's selection over the plans in `folder` (pure apart from reading it); custody is
    `tts_bench.custody.gate.evaluate`'s."""
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


Candidates = list[tuple[Path, PlanArtifact]]


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why no candidate survived a narrowing: what was missing, and the fix to name."""

    condition: GateCondition
    what: str
    fix: str = ""


# One narrowing of the candidates: the survivors, or the refusal when none survive.
Narrowing = Callable[[Candidates, GateQuery, str], Candidates | Refusal]


def _same_target(plans: Candidates, query: GateQuery, folder: str) -> Candidates | Refusal:
    kept = [
        (p, a)
        for p, a in plans
        if a.fingerprint is not None
        and a.fingerprint.model == query.model
        and a.fingerprint.instance_type == query.instance_type
    ]
    return kept or Refusal(
        GateCondition.NO_PLAN,
        f"no plan in {folder} is for model {query.model} on {query.instance_type}",
        "measure it and run `tts-bench plan`",
    )


def _same_contract(plans: Candidates, query: GateQuery, folder: str) -> Candidates | Refusal:
    kept = [(p, a) for p, a in plans if a.fingerprint.contract_name == query.contract]  # type: ignore[union-attr]
    others = sorted({a.fingerprint.contract_name for _, a in plans})  # type: ignore[union-attr]
    return kept or Refusal(
        GateCondition.CONTRACT_MISMATCH,
        f"no plan for this contract: plans in {folder} for model {query.model} on "
        f"{query.instance_type} were measured under contract(s) {', '.join(others)}, not "
        f"{query.contract}",
        "measure it under the stack's contract (--contract), or set contract in the stack config",
    )


def _same_image(plans: Candidates, query: GateQuery, folder: str) -> Candidates | Refusal:
    # A package plan gates only that package version, an image plan only that image: a package's
    # fingerprint also carries its container's digest, which must never stand in for the package.
    kept = [(p, a) for p, a in plans if a.fingerprint.deployed == query.deployed]  # type: ignore[union-attr]
    images = sorted(
        {a.fingerprint.short_digest for _, a in plans if not a.fingerprint.model_package}
    )  # type: ignore[union-attr]
    packages = sorted({a.fingerprint.model_package for _, a in plans} - {None})  # type: ignore[union-attr]
    measured = [f"image(s) {', '.join(images)}"] if images else []
    measured += [f"model package(s) {', '.join(packages)}"] if packages else []  # type: ignore[arg-type]
    what = "model package" if query.model_package else "image"
    return kept or Refusal(
        GateCondition.DIGEST_MISMATCH,
        f"no plan for this {what}: plans in {folder} for model {query.model} on "
        f"{query.instance_type} were measured on {' and '.join(measured)}, not {query.deployed}",
        f"measure this {what}",
    )


def _same_env(plans: Candidates, query: GateQuery, folder: str) -> Candidates | Refusal:
    env = performance_env_of(query.performance_env)
    kept = [(p, a) for p, a in plans if a.fingerprint.performance_env == env]  # type: ignore[union-attr]
    return kept or Refusal(
        GateCondition.ENV_MISMATCH,
        f"no plan for this container env: plans for {query.deployed} were measured "
        f"with another performance env than {env}",
    )


def _for_local_images_only(
    local_only: Callable[[PlanArtifact], bool], condition: GateCondition, what: str, fix: str
) -> Narrowing:
    """A narrowing that, unless the image is local, drops the plans that may scale only a local
    one; its refusal is `what` with `{names}` the plans dropped."""

    def narrow(plans: Candidates, query: GateQuery, folder: str) -> Candidates | Refusal:
        if query.image_is_local:
            return plans
        kept = [(p, a) for p, a in plans if not local_only(a)]
        names = ", ".join(p.name for p, a in plans if local_only(a))
        return kept or Refusal(condition, what.format(names=names), fix)

    return narrow


_not_emulated = _for_local_images_only(
    lambda a: a.provenance.kind == "emulated",
    GateCondition.EMULATED_PLAN,
    "the only plan(s) for this image ({names}) are emulated, measured through the local cloud; "
    "an emulated plan never gates a stack whose image is not a local digest (nor one whose "
    "model package is not the local cloud's)",
    "measure the real endpoint",
)
# Issue 38: a plan on the point Q_max rests on rungs whose p95 interval did not show them within
# the SLO; like an emulated one, it scales only what the local cloud holds.
_not_point_q_max = _for_local_images_only(
    lambda a: a.inputs.q_max_basis == "point",
    GateCondition.POINT_Q_MAX,
    "the only plan(s) for this image ({names}) plan on the ladder's point Q_max (`qmax "
    "--q-max-basis point`), which its rungs' p95 intervals did not show within the SLO; such a "
    "plan never gates a stack whose image is not a local digest",
    "re-measure with the default --q-max-basis conservative, holding rungs long enough to "
    "decide (--measure-s, --max-hold-s)",
)


def _same_rule(plans: Candidates, query: GateQuery, folder: str) -> Candidates | Refusal:
    kept = [(p, a) for p, a in plans if a.rule == query.rule]
    others = ", ".join(f"{p.name} ({a.rule})" for p, a in plans)
    return kept or Refusal(
        GateCondition.RULE_MISMATCH,
        f"no {query.rule} plan for this image (only {others})",
        f"run `tts-bench plan --rule {query.rule}`, or set planRule in the stack config",
    )


def _only_one(plans: Candidates, query: GateQuery, folder: str) -> Candidates | Refusal:
    if len(plans) == 1:
        return plans
    return Refusal(
        GateCondition.AMBIGUOUS,
        f"{len(plans)} {query.rule} plans match this image ({', '.join(p.name for p, _ in plans)})",
        "move all but one out of the plans folder",
    )


NARROWINGS: tuple[Narrowing, ...] = (
    _same_target, _same_contract, _same_image, _same_env, _not_emulated, _not_point_q_max,
    _same_rule, _only_one,
)  # fmt: skip


def _inputs_mismatch(plan: PlanArtifact, name: str, query: GateQuery) -> str | None:
    if query.slo_ms is not None and abs(plan.inputs.slo_ms - query.slo_ms) > 1e-9:
        return (
            f"plan {plan.plan_id} ({name}) was derived for an SLO of {plan.inputs.slo_ms:g} ms, "
            f"the stack asks {query.slo_ms:g} ms; re-run `tts-bench plan` with the stack's SLO"
        )
    if query.surge_ratio is not None and abs(plan.inputs.surge_ratio - query.surge_ratio) > 1e-9:
        return (
            f"plan {plan.plan_id} ({name}) was derived for a surge ratio of "
            f"{plan.inputs.surge_ratio:g}, the stack asks {query.surge_ratio:g}; re-run `tts-bench plan`"
        )
    return None


def skipped(unreadable: list[str]) -> str:
    """What a refusal adds when plan files could not be read: how many, and the first's reason
    (a hand-edited plan that breaks a cross-field rule is one of them)."""
    if not unreadable:
        return ""
    more = f", and {len(unreadable) - 1} more" if len(unreadable) > 1 else ""
    return f" ({len(unreadable)} unreadable plan file(s) skipped: {unreadable[0]}{more})"


def decide(
    plans: list[tuple[Path, PlanArtifact]],
    query: GateQuery,
    *,
    folder: str,
    unreadable: list[str] | None = None,
) -> GateResult:
    """The rule itself over already-loaded plans."""
    unreadable = unreadable or []
    candidates: Candidates = plans
    for narrowing in NARROWINGS:
        narrowed = narrowing(candidates, query, folder)
        if isinstance(narrowed, Refusal):
            reason = narrowed.what + skipped(unreadable)
            return GateResult(
                condition=narrowed.condition,
                reason=f"{reason}; {narrowed.fix}" if narrowed.fix else reason,
                unreadable=unreadable,
            )
        candidates = narrowed
    path, plan = candidates[0]
    common = {"plan": plan, "plan_path": str(path), "unreadable": unreadable}
    if (mismatch := _inputs_mismatch(plan, path.name, query)) is not None:
        return GateResult(condition=GateCondition.INPUTS_MISMATCH, reason=mismatch, **common)
    if not plan.feasible:
        stops = ", ".join(f.name for f in plan.findings if f.verdict == "stop")
        return GateResult(
            condition=GateCondition.INFEASIBLE,
            reason=f"plan {plan.plan_id} ({path.name}) is infeasible (stop: {stops})",
            **common,
        )
    low, high = query.bounds.clamp(plan.min_instances, plan.max_instances)
    return GateResult(
        condition=GateCondition.ENABLED,
        reason=(
            f"plan {plan.plan_id} ({path.name}) matches and is feasible; deploying "
            f"min {low} / max {high} instances"
        ),
        deployed_min=low,
        deployed_max=high,
        peak_unreachable=query.bounds.peak_unreachable(plan.max_instances),
        **common,
    )
