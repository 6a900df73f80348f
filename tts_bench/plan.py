"""Plan arithmetic (SPEC §6): measured Q_max and T_total in, every autoscaling number out.

`derive_plan` is pure: artifacts and operator choices in, a `PlanArtifact` out, or a
`RefusalError` when the inputs must not be combined. Findings say what to worry about; any
`stop` makes the plan infeasible, and the Pulumi gate then deploys no autoscaling at all.
"""

from __future__ import annotations

import hashlib
import json
import math
from datetime import UTC, datetime

from pydantic import BaseModel, ConfigDict, Field, NonNegativeFloat, PositiveInt

from tts_bench.artifacts import (
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
from tts_bench.curve import cloudwatch_ratio_curve, throughput_curve
from tts_bench.engine_modes import engine_batches
from tts_bench.errors import RefusalError
from tts_bench.surge import DEFAULT_SEED, DEFAULT_TRIALS, shed_probability

SAGEMAKER_CEILING_MS = 60_000  # SageMaker ends any invocation after 60 s
SURGE_WARN_PROBABILITY = 0.1
MIN_SCALE_OUT_COOLDOWN_S, MAX_SCALE_OUT_COOLDOWN_S = 10, 30
MIN_SCALE_IN_COOLDOWN_S = 300

# Findings of equal severity keep this order, the order a person reads them in.
FINDING_ORDER = (
    "slo_feasibility",
    "fingerprint",
    "surge_survival",
    "scale_in_safety",
    "fleet_sizing",
    "cw_ratio",
    "bracketing",
    "alarm",
    "fleet_cost",
)


def round9(x: float) -> float:
    """Round away float noise before any ceil/floor (1.2 − 1 = 0.19999999999999996)."""
    return round(x, 9)


def ceil9(x: float) -> int:
    return math.ceil(round9(x))


def floor9(x: float) -> int:
    return math.floor(round9(x))


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


def _finding(name: str, verdict: Verdict, message: str, **figures: object) -> Finding:
    return Finding(name=name, verdict=verdict, message=message, **figures)


def _check_pairing(qmax: QmaxArtifact, ttotal: TtotalArtifact, allow: bool) -> Finding:
    """Both artifacts must describe the same build over the same transport."""
    if qmax.fingerprint is None or ttotal.fingerprint is None:
        which = "qmax" if qmax.fingerprint is None else "ttotal"
        problem = f"the {which} artifact has no fingerprint"
    else:
        diffs = qmax.fingerprint.differences(ttotal.fingerprint)
        if not diffs:
            return _finding("fingerprint", Verdict.OK, "qmax and ttotal share one fingerprint")
        problem = "qmax and ttotal fingerprints differ (" + "; ".join(diffs) + ")"
    if not allow:
        raise RefusalError(
            f"{problem}; measure both against one build, or pass --allow-config-mismatch"
        )
    return _finding("fingerprint", Verdict.WARN, f"{problem}; allowed by --allow-config-mismatch")


def _alarm(qmax: QmaxArtifact, c_scale_max: float, c1_p95: float) -> tuple[int, str, str]:
    """(threshold ms, rule, explanation): a batching engine's service time grows with the batch."""
    fp = qmax.fingerprint
    batched = fp is not None and engine_batches(fp.performance_env)
    if batched:
        at_or_above = [r for r in qmax.rungs if r.concurrency >= round9(c_scale_max)]
        rung = at_or_above[0] if at_or_above else qmax.rungs[-1]
        if rung.server_first_chunk_p95_ms is None:
            raise RefusalError(
                f"the engine batches but rung {rung.concurrency} has no server_first_chunk_p95_ms; "
                "re-run the ladder with server-side FirstChunkLatency recorded"
            )
        return (
            floor9(rung.server_first_chunk_p95_ms),
            "server-first-chunk-p95-at-trigger",
            f"batching engine: server-side FirstChunkLatency p95 at rung {rung.concurrency} "
            f"(the first rung at or above C_scale_max {c_scale_max:g})",
        )
    return floor9(c1_p95), "ttfab-p95-c1", "serial engine: p95 TTFAB at c=1"


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
    c1_ttfab_p95 = c1.ttfab_p95_ms
    pairing = _check_pairing(qmax, ttotal, request.allow_config_mismatch)

    q_max = qmax.q_max
    s_mean = qmax.uncontended_service_s.mean
    s_p95 = qmax.uncontended_service_s.p95
    t_total = ttotal.planned_total_s  # read, never re-added from stages
    slo_s = request.slo_ms / 1000

    c_scale_max = round9((1 - h) * q_max)
    c_scale_min = round9((1 - 2 * h) * q_max)
    w_max_s = round9(slo_s - s_p95)

    x_curve = throughput_curve(qmax.rungs)
    cw_curve = cloudwatch_ratio_curve(qmax.rungs)
    cw_ratio = cw_curve(c_scale_max) if cw_curve else 1.0
    x_trigger = x_curve(c_scale_max)

    scaling_target_value = round9(c_scale_max * cw_ratio)
    scale_in_threshold = round9(c_scale_min * cw_ratio)
    scale_out_cooldown_s = floor9(
        min(max(t_total / 2, MIN_SCALE_OUT_COOLDOWN_S), MAX_SCALE_OUT_COOLDOWN_S)
    )
    scale_in_cooldown_s = max(MIN_SCALE_IN_COOLDOWN_S, floor9(3 * t_total))
    alarm_ms, alarm_rule, alarm_why = _alarm(qmax, c_scale_max, c1_ttfab_p95)

    findings = [pairing]

    # SLO and the 60 s ceiling.
    if request.slo_ms > SAGEMAKER_CEILING_MS:
        findings.append(
            _finding(
                "slo_feasibility",
                Verdict.STOP,
                f"the SLO {request.slo_ms:g} ms is past SageMaker's {SAGEMAKER_CEILING_MS} ms invocation ceiling",
                w_max_s=w_max_s,
            )
        )
    elif w_max_s <= 0:
        findings.append(
            _finding(
                "slo_feasibility",
                Verdict.STOP,
                f"W_max = SLO − S_p95 = {w_max_s:.3f} s: one uncontended request already misses the SLO",
                w_max_s=w_max_s,
            )
        )
    else:
        findings.append(
            _finding(
                "slo_feasibility",
                Verdict.OK,
                f"W_max = SLO − S_p95 = {w_max_s:.3f} s of queueing headroom",
                w_max_s=w_max_s,
            )
        )

    # Fleet size from measured throughput, next to the published (uncontended) formula.
    if x_trigger <= 0:
        min_instances = max_instances = request.min_floor
        findings.append(
            _finding(
                "fleet_sizing",
                Verdict.STOP,
                f"the ladder measured no throughput at C_scale_max {c_scale_max:g}: cannot size a fleet",
                throughput_at_trigger_rps=0.0,
                naive_max_instances=None,
            )
        )
    else:
        min_instances = max(request.min_floor, ceil9(request.trough_rps / x_trigger))
        max_instances = max(min_instances, ceil9(request.peak_rps / x_trigger))
        naive = max(min_instances, ceil9(request.peak_rps * s_mean / c_scale_max))
        findings.append(
            _finding(
                "fleet_sizing",
                Verdict.OK if naive >= max_instances else Verdict.WARN,
                f"{request.peak_rps:g} rps at peak needs {max_instances} instances at the measured "
                f"{x_trigger:.3f} rps each; the uncontended formula ceil(rps·S/C_scale_max) would give "
                f"{naive}" + (" and under-provision" if naive < max_instances else ""),
                throughput_at_trigger_rps=round(x_trigger, 6),
                naive_max_instances=naive,
                min_instances=min_instances,
                max_instances=max_instances,
            )
        )

    # Surge between the trigger and the new instance serving.
    utilisation = round9(c_scale_max / (1 + c_scale_max))
    surge = shed_probability(
        arrival_rps=request.surge_ratio * x_trigger,
        service_rps=x_curve.at,
        start=math.floor(c_scale_max + 0.5),
        limit=q_max,
        horizon_s=t_total,
        trials=request.surge_trials,
        seed=request.surge_seed,
    )
    findings.append(
        _finding(
            "surge_survival",
            Verdict.WARN if surge.probability > SURGE_WARN_PROBABILITY else Verdict.OK,
            f"a ×{request.surge_ratio:g} surge at C_scale_max {c_scale_max:g} reaches Q_max {q_max} "
            f"before T_total {t_total:.1f} s ends in {surge.probability:.1%} of {surge.trials} trials; "
            f"utilisation at the trigger ρ = {utilisation:.1%}",
            utilisation_at_trigger=round(utilisation, 6),
            shed_probability=surge.probability,
            trials=surge.trials,
        )
    )

    # Scale-in: removing one of N instances multiplies the survivors' load by N/(N−1).
    r = c_scale_max / c_scale_min  # h < 0.5, so C_scale_min > 0
    safe_floor = ceil9(r / (r - 1))
    findings.append(
        _finding(
            "scale_in_safety",
            Verdict.WARN if min_instances < safe_floor else Verdict.OK,
            f"removing one of N instances is safe only for N ≥ {safe_floor} (r = {r:.3f}); "
            f"min_instances is {min_instances}"
            + (
                ", so scale-in below that can push survivors past the scale-out trigger"
                if min_instances < safe_floor
                else ""
            ),
            safe_floor=safe_floor,
        )
    )

    cost = 1 / (1 - h)
    findings.append(
        _finding(
            "fleet_cost",
            Verdict.OK,
            f"scaling out at {1 - h:.0%} of Q_max reserves headroom costing up to ×{cost:.3f} instances",
            headroom_cost_factor=round(cost, 6),
        )
    )
    if cw_curve is None:
        findings.append(
            _finding(
                "cw_ratio",
                Verdict.WARN,
                "the ladder did not measure CloudWatch's concurrency against the client's; assumed 1.0",
                cw_ratio=1.0,
            )
        )
    else:
        findings.append(
            _finding(
                "cw_ratio",
                Verdict.OK,
                f"CloudWatch ConcurrentRequestsPerModel reads ×{cw_ratio:.3f} the client's concurrency at the trigger",
                cw_ratio=round(cw_ratio, 6),
            )
        )
    findings.append(
        _finding("bracketing", Verdict.OK, f"Q_max {q_max} is bracketed by a failing rung above it")
        if qmax.bracketed
        else _finding(
            "bracketing",
            Verdict.WARN,
            f"no rung above {q_max} failed: Q_max is a lower bound; extend the ladder to bracket it",
        )
    )
    findings.append(
        _finding(
            "alarm",
            Verdict.OK,
            f"FirstChunkLatency p95 alarm at {alarm_ms} ms ({alarm_why})",
            rule=alarm_rule,
        )
    )

    findings.sort(key=lambda f: (-f.verdict.severity, FINDING_ORDER.index(f.name)))
    inputs = PlanInputs(
        slo_ms=request.slo_ms,
        surge_ratio=request.surge_ratio,
        peak_rps=request.peak_rps,
        trough_rps=request.trough_rps,
        min_floor=request.min_floor,
        allow_config_mismatch=request.allow_config_mismatch,
        q_max=q_max,
        service_mean_s=s_mean,
        service_p95_s=s_p95,
        ttfab_p95_c1_ms=c1_ttfab_p95,
        planned_total_s=t_total,
    )
    # A plan is only as real as its least real source.
    kinds = {s.provenance for s in sources.values()}
    kind = next((k for k in ("simulated", "reference") if k in kinds), "measured")
    return PlanArtifact(
        plan_id=plan_id(inputs, sources, qmax.fingerprint),
        feasible=not any(f.verdict is Verdict.STOP for f in findings),
        fingerprint=qmax.fingerprint,
        c_scale_max=c_scale_max,
        c_scale_min=c_scale_min,
        scaling_target_value=scaling_target_value,
        scale_in_threshold=scale_in_threshold,
        w_max_s=w_max_s,
        scale_out_cooldown_s=scale_out_cooldown_s,
        scale_in_cooldown_s=scale_in_cooldown_s,
        queue_max_depth=q_max,
        first_chunk_alarm_ms=alarm_ms,
        alarm_rule=alarm_rule,  # type: ignore[arg-type]
        min_instances=min_instances,
        max_instances=max_instances,
        findings=findings,
        inputs=inputs,
        sources=sources,  # type: ignore[arg-type]
        provenance=Provenance(
            kind=kind,  # type: ignore[arg-type]
            created_at=created_at or datetime.now(UTC).replace(microsecond=0),
            source=", ".join(f"{k}: {v.path}" for k, v in sorted(sources.items())),
            notes="derived by tts-bench plan from the sources listed",
        ),
    )
