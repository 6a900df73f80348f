"""Plan arithmetic (SPEC §6): measured Q_max and T_total in, every autoscaling number out.

`derive_plan` is pure: artifacts and operator choices in, a `PlanArtifact` out, or a
`RefusalError` when the inputs must not be combined. It runs four named steps — `check_basis`
(refusals and the measured figures), `check_pairing` (one build, one transport),
`derive_thresholds` and `size_fleet` — then `findings.collect_findings` says what to worry
about; any `stop` makes the plan infeasible, and the Pulumi gate then deploys no autoscaling.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from datetime import UTC, datetime

from pydantic import BaseModel, ConfigDict, Field, NonNegativeFloat, PositiveInt

from tts_bench.artifacts.schema import (
    Finding,
    Fingerprint,
    PlanArtifact,
    PlanInputs,
    Provenance,
    QmaxArtifact,
    SourceArtifact,
    TtotalArtifact,
    Verdict,
)
from tts_bench.errors import RefusalError
from tts_bench.planning.birth_death import DEFAULT_SEED, DEFAULT_TRIALS
from tts_bench.planning.curve import Curve, cloudwatch_ratio_curve, throughput_curve
from tts_bench.planning.findings import alarm_threshold, collect_findings, finding
from tts_bench.planning.rounding import ceil9, floor9, round9

MIN_SCALE_OUT_COOLDOWN_S, MAX_SCALE_OUT_COOLDOWN_S = 10, 30
MIN_SCALE_IN_COOLDOWN_S = 300

__all__ = ["PlanRequest", "ceil9", "derive_plan", "floor9", "plan_id", "round9"]


class PlanRequest(BaseModel):
    """The operator's choices that, with the two artifacts, determine a plan."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    peak_rps: NonNegativeFloat
    trough_rps: NonNegativeFloat = 0.0
    slo_ms: float = Field(default=3000.0, gt=0)
    surge_ratio: float = 1.25
    min_floor: PositiveInt = 1
    allow_config_mismatch: bool = False
    surge_trials: PositiveInt = DEFAULT_TRIALS
    surge_seed: int = DEFAULT_SEED


@dataclass(frozen=True)
class Basis:
    """The measured figures the arithmetic starts from, once the inputs are known usable."""

    h: float  # surge_ratio − 1
    q_max: int
    s_mean: float  # uncontended end-to-end latency, mean and p95 (s)
    s_p95: float
    c1_ttfab_p95_ms: float
    t_total_s: float  # planned: measured + lag bound, read from the artifact


@dataclass(frozen=True)
class Thresholds:
    """Where scaling happens, in client concurrency and in CloudWatch units, and its cooldowns."""

    c_scale_max: float
    c_scale_min: float
    w_max_s: float
    cw_ratio: float
    cw_measured: bool
    scaling_target_value: float
    scale_in_threshold: float
    scale_out_cooldown_s: int
    scale_in_cooldown_s: int


@dataclass(frozen=True)
class Fleet:
    """Fleet bounds from measured throughput, and the published formula's figure beside them."""

    throughput_at_trigger_rps: float
    min_instances: int
    max_instances: int
    naive_max_instances: int | None  # None when there is no throughput to size from


def check_basis(qmax: QmaxArtifact, ttotal: TtotalArtifact, request: PlanRequest) -> Basis:
    """Refuse inputs no plan can come from; otherwise the figures the plan is derived from."""
    h = round9(request.surge_ratio - 1)
    if h <= 0 or h >= 0.5:
        raise RefusalError(
            f"surge ratio {request.surge_ratio:g} is out of range: it must be above 1 and below 1.5"
        )
    if not math.isclose(qmax.slo_ms, request.slo_ms):
        raise RefusalError(
            f"Q_max was measured at an SLO of {qmax.slo_ms:g} ms, not {request.slo_ms:g} ms; "
            f"re-run the ladder at --slo-ms {request.slo_ms:g} or plan with --slo-ms {qmax.slo_ms:g}"
        )
    if qmax.q_max is None:
        raise RefusalError(
            "the ladder found no passing rung (even c=1 misses the SLO or is unusable): "
            "there is no capacity to plan from"
        )
    if qmax.uncontended_service_s is None:
        raise RefusalError(
            "the ladder has no c=1 rung (uncontended service time); add rung 1 and re-run"
        )
    c1 = qmax.rung(1)
    if c1 is None or c1.ttfab_p95_ms is None:
        raise RefusalError("the ladder has no c=1 rung with TTFAB samples; add rung 1 and re-run")
    return Basis(
        h=h,
        q_max=qmax.q_max,
        s_mean=qmax.uncontended_service_s.mean,
        s_p95=qmax.uncontended_service_s.p95,
        c1_ttfab_p95_ms=c1.ttfab_p95_ms,
        t_total_s=ttotal.planned_total_s,
    )


def check_pairing(qmax: QmaxArtifact, ttotal: TtotalArtifact, allow: bool) -> Finding:
    """Both artifacts must describe the same build over the same transport."""
    if qmax.fingerprint is None or ttotal.fingerprint is None:
        which = "qmax" if qmax.fingerprint is None else "ttotal"
        problem = f"the {which} artifact has no fingerprint"
    else:
        diffs = qmax.fingerprint.differences(ttotal.fingerprint)
        if not diffs:
            return finding("fingerprint", Verdict.OK, "qmax and ttotal share one fingerprint")
        problem = "qmax and ttotal fingerprints differ (" + "; ".join(diffs) + ")"
    if not allow:
        raise RefusalError(
            f"{problem}; measure both against one build, or pass --allow-config-mismatch"
        )
    return finding("fingerprint", Verdict.WARN, f"{problem}; allowed by --allow-config-mismatch")


def derive_thresholds(basis: Basis, request: PlanRequest, cw_curve: Curve | None) -> Thresholds:
    """C_scale_max/min, W_max, the CloudWatch-unit thresholds and both cooldowns."""
    c_scale_max = round9((1 - basis.h) * basis.q_max)
    c_scale_min = round9((1 - 2 * basis.h) * basis.q_max)
    cw_ratio = cw_curve(c_scale_max) if cw_curve else 1.0
    t_total = basis.t_total_s
    return Thresholds(
        c_scale_max=c_scale_max,
        c_scale_min=c_scale_min,
        w_max_s=round9(request.slo_ms / 1000 - basis.s_p95),
        cw_ratio=cw_ratio,
        cw_measured=cw_curve is not None,
        scaling_target_value=round9(c_scale_max * cw_ratio),
        scale_in_threshold=round9(c_scale_min * cw_ratio),
        scale_out_cooldown_s=floor9(
            min(max(t_total / 2, MIN_SCALE_OUT_COOLDOWN_S), MAX_SCALE_OUT_COOLDOWN_S)
        ),
        scale_in_cooldown_s=max(MIN_SCALE_IN_COOLDOWN_S, floor9(3 * t_total)),
    )


def size_fleet(basis: Basis, thresholds: Thresholds, request: PlanRequest, x_curve: Curve) -> Fleet:
    """An instance held at C_scale_max serves X(C_scale_max) requests/s: size from that."""
    x_trigger = x_curve(thresholds.c_scale_max)
    if x_trigger <= 0:
        return Fleet(0.0, request.min_floor, request.min_floor, None)
    min_instances = max(request.min_floor, ceil9(request.trough_rps / x_trigger))
    max_instances = max(min_instances, ceil9(request.peak_rps / x_trigger))
    naive = max(min_instances, ceil9(request.peak_rps * basis.s_mean / thresholds.c_scale_max))
    return Fleet(x_trigger, min_instances, max_instances, naive)


def plan_id(
    inputs: PlanInputs, sources: dict[str, SourceArtifact], fingerprint: Fingerprint | None
) -> str:
    """Twelve hex over everything that determines the plan, for tags and policy checks."""
    payload = {
        "inputs": inputs.model_dump(mode="json"),
        "sources": {k: v.sha256 for k, v in sorted(sources.items())},
        "fingerprint": fingerprint.model_dump(mode="json") if fingerprint else None,
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:12]


def derive_plan(
    qmax: QmaxArtifact,
    ttotal: TtotalArtifact,
    request: PlanRequest,
    sources: dict[str, SourceArtifact],
    *,
    created_at: datetime | None = None,
) -> PlanArtifact:
    """All of SPEC §6 over one ladder and one scale-out measurement."""
    basis = check_basis(qmax, ttotal, request)
    pairing = check_pairing(qmax, ttotal, request.allow_config_mismatch)
    x_curve = throughput_curve(qmax.rungs)
    thresholds = derive_thresholds(basis, request, cloudwatch_ratio_curve(qmax.rungs))
    fleet = size_fleet(basis, thresholds, request, x_curve)
    alarm = alarm_threshold(qmax, thresholds.c_scale_max, basis.c1_ttfab_p95_ms)
    findings = collect_findings(pairing, qmax, request, basis, thresholds, fleet, alarm, x_curve)
    inputs = PlanInputs(
        slo_ms=request.slo_ms,
        surge_ratio=request.surge_ratio,
        peak_rps=request.peak_rps,
        trough_rps=request.trough_rps,
        min_floor=request.min_floor,
        allow_config_mismatch=request.allow_config_mismatch,
        q_max=basis.q_max,
        service_mean_s=basis.s_mean,
        service_p95_s=basis.s_p95,
        ttfab_p95_c1_ms=basis.c1_ttfab_p95_ms,
        planned_total_s=basis.t_total_s,
    )
    return PlanArtifact(
        plan_id=plan_id(inputs, sources, qmax.fingerprint),
        feasible=not any(f.verdict is Verdict.STOP for f in findings),
        fingerprint=qmax.fingerprint,
        c_scale_max=thresholds.c_scale_max,
        c_scale_min=thresholds.c_scale_min,
        scaling_target_value=thresholds.scaling_target_value,
        scale_in_threshold=thresholds.scale_in_threshold,
        w_max_s=thresholds.w_max_s,
        scale_out_cooldown_s=thresholds.scale_out_cooldown_s,
        scale_in_cooldown_s=thresholds.scale_in_cooldown_s,
        queue_max_depth=basis.q_max,
        first_chunk_alarm_ms=alarm.threshold_ms,
        alarm_rule=alarm.rule,  # type: ignore[arg-type]
        min_instances=fleet.min_instances,
        max_instances=fleet.max_instances,
        findings=findings,
        inputs=inputs,
        sources=sources,  # type: ignore[arg-type]
        provenance=_provenance(sources, created_at),
    )


def _provenance(sources: dict[str, SourceArtifact], created_at: datetime | None) -> Provenance:
    # A plan is only as real as its least real source; an emulated source marks it first, so
    # the gate can always tell a plan that went through the local cloud.
    kinds = {s.provenance for s in sources.values()}
    kind = next((k for k in ("emulated", "simulated", "reference") if k in kinds), "measured")
    return Provenance(
        kind=kind,  # type: ignore[arg-type]
        created_at=created_at or datetime.now(UTC).replace(microsecond=0),
        source=", ".join(f"{k}: {v.path}" for k, v in sorted(sources.items())),
        notes="derived by tts-bench plan from the sources listed",
    )
