"""Plan arithmetic (SPEC §6, §6a): measured Q_max and T_total in, every autoscaling number out.

`derive_plan` is pure: artifacts and operator choices in, a `PlanArtifact` out, or a
`RefusalError` when the inputs must not be combined. It runs named steps — `check_basis`
(refusals and the measured figures), `check_pairing` (one build, one transport), then the
rule's own: `derive_thresholds` and `size_fleet` for the published rule, `fleet_rule.derive_fleet`
for the fleet rule — and `findings.collect_findings` says what to worry about; any `stop` makes
the plan infeasible, and the Pulumi gate then deploys no autoscaling.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import replace
from datetime import UTC, datetime

from tts_bench.artifacts.cloudwatch import CloudWatchStat, CloudWatchUnits
from tts_bench.artifacts.fingerprint import Fingerprint
from tts_bench.artifacts.plan import (
    DeployShape,
    Finding,
    FleetLevels,
    PlanArtifact,
    PlanInputs,
    SourceArtifact,
    Verdict,
)
from tts_bench.artifacts.provenance import Provenance
from tts_bench.artifacts.qmax import QmaxArtifact
from tts_bench.artifacts.ttotal import TtotalArtifact
from tts_bench.deployment import (
    SCALE_IN_PERIOD_S,
    SCALE_IN_STATISTIC,
    TARGET_TRACKING_PERIOD_S,
    TARGET_TRACKING_STATISTIC,
)
from tts_bench.errors import RefusalError
from tts_bench.planning.curve import Curve, ratio_at, throughput_curve
from tts_bench.planning.deploy import detection_shape, published_shape, tracking_role
from tts_bench.planning.findings import alarm_threshold, collect_findings, finding
from tts_bench.planning.fleet_rule import derive_fleet
from tts_bench.planning.qmax_confidence import PlanAt, qmax_confidence
from tts_bench.planning.rounding import ceil9, floor9, round9
from tts_bench.planning.slo_headroom import queueing_headroom_s
from tts_bench.planning.steps import (
    Basis,
    Fleet,
    PlanRequest,
    PlanSteps,
    Thresholds,
    refuse_beyond_max_capacity,
)

MIN_SCALE_OUT_COOLDOWN_S, MAX_SCALE_OUT_COOLDOWN_S = 10, 30
MIN_SCALE_IN_COOLDOWN_S = 300
# The units each threshold is deployed in: what target tracking's alarms evaluate, and what
# our scale-in alarm evaluates (`tts_bench.deployment`).
TARGET_STAT = CloudWatchStat(statistic=TARGET_TRACKING_STATISTIC, period_s=TARGET_TRACKING_PERIOD_S)  # type: ignore[arg-type]
SCALE_IN_STAT = CloudWatchStat(statistic=SCALE_IN_STATISTIC, period_s=SCALE_IN_PERIOD_S)  # type: ignore[arg-type]

__all__ = ["PlanRequest", "ceil9", "derive_plan", "floor9", "plan_id", "round9"]


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
    if qmax.repeats is not None and qmax.repeats.q_max is None:
        raise RefusalError(
            "the ladder's --repeat Q_max is the lowest repeat's conservative value, and a repeat "
            "has none (no rung passed on its p95 interval): hold rungs longer (--measure-s, "
            "--max-hold-s) and re-run"
        )
    if qmax.q_max is None and qmax.q_max_basis == "conservative" and qmax.coarse_q_max:
        undecided = (
            ", ".join(map(str, qmax.q_max_interval.undecided)) if qmax.q_max_interval else ""
        )
        raise RefusalError(
            f"the ladder's Q_max is the conservative value, and no rung passed on its "
            f"{qmax.ladder.confidence:.0%} p95 interval (undecided: {undecided or 'none'}; the "  # type: ignore[union-attr]
            f"point value is {qmax.coarse_q_max}): hold rungs longer (--measure-s, --max-hold-s) "
            "and re-run; for a run no real endpoint will scale on, --q-max-basis point"
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
    if request.trough_rps > request.peak_rps:
        raise RefusalError(
            f"the trough ({request.trough_rps:g} rps) is above the peak ({request.peak_rps:g} rps); "
            "pass --trough-rps at or below --peak-rps"
        )
    c1 = qmax.rung(1)
    if c1 is None or c1.ttfab_p95_ms is None:
        raise RefusalError("the ladder has no c=1 rung with TTFAB samples; add rung 1 and re-run")
    return Basis(
        h=h,
        q_max=qmax.refined_q_max,
        s_mean=qmax.uncontended_service_s.mean,
        s_p95=qmax.uncontended_service_s.p95,
        c1_ttfab_p95_ms=c1.ttfab_p95_ms,
        t_total_s=ttotal.planned_total_s,
        launch_s=ttotal.measured_total_s,
    )


def check_pairing(
    qmax: QmaxArtifact, ttotal: TtotalArtifact, allow: bool, qmax_sha256: str | None = None
) -> Finding:
    """Both artifacts must describe the same build over the same transport, and the ttotal
    must have judged recovery against this very ladder when it records which (`qmax_sha256`
    is the sha256 of the qmax file given)."""
    problems: list[str] = []
    if qmax.fingerprint is None or ttotal.fingerprint is None:
        which = "qmax" if qmax.fingerprint is None else "ttotal"
        problems.append(f"the {which} artifact has no fingerprint")
    elif diffs := qmax.fingerprint.differences(ttotal.fingerprint):
        problems.append("qmax and ttotal fingerprints differ (" + "; ".join(diffs) + ")")
    if qmax_sha256 and ttotal.qmax_sha256 and ttotal.qmax_sha256 != qmax_sha256:
        problems.append(
            f"the ttotal was measured against another qmax artifact (sha256 "
            f"{ttotal.qmax_sha256[:12]}, this one is {qmax_sha256[:12]})"
        )
    if not problems:
        return finding("fingerprint", Verdict.OK, "qmax and ttotal share one fingerprint")
    problem = "; ".join(problems)
    if not allow:
        raise RefusalError(
            f"{problem}; measure both against one build, or pass --allow-config-mismatch"
        )
    return finding("fingerprint", Verdict.WARN, f"{problem}; allowed by --allow-config-mismatch")


def threshold_units(
    qmax: QmaxArtifact, stat: CloudWatchStat, at: float, role: str, surge_ratio: float
) -> tuple[CloudWatchUnits, str]:
    """The units of the threshold at client concurrency `at`, and where its ratio came from.

    Measured (a verification rung, a rung there, or the conservative bracket) wins. Without a
    measurement a local transport has no CloudWatch, so 1.0 by construction; a SageMaker
    transport's threshold stays in client units, marked `unmeasured` (the cw_ratio finding
    stops the plan).
    """
    reading = ratio_at(qmax, stat, at, role, surge_ratio)
    if reading is not None:
        units = CloudWatchUnits(
            statistic=stat.statistic,
            period_s=stat.period_s,
            cw_ratio=reading.ratio,
            ratio_rule=reading.rule,  # type: ignore[arg-type]
        )
        return units, reading.where
    local = qmax.fingerprint is not None and qmax.fingerprint.transport.is_local
    rule = "local-no-cloudwatch" if local else "unmeasured"
    units = CloudWatchUnits(
        statistic=stat.statistic, period_s=stat.period_s, cw_ratio=1.0, ratio_rule=rule
    )
    return units, "local: no CloudWatch" if local else "nothing measured"


def derive_thresholds(basis: Basis, request: PlanRequest, qmax: QmaxArtifact) -> Thresholds:
    """C_scale_max/min, W_max, the CloudWatch-unit thresholds and both cooldowns."""
    c_scale_max = round9((1 - basis.h) * basis.q_max)
    c_scale_min = round9((1 - 2 * basis.h) * basis.q_max)
    target, target_from = threshold_units(
        qmax, TARGET_STAT, c_scale_max, "scale_out", request.surge_ratio
    )
    scale_in, scale_in_from = threshold_units(
        qmax, SCALE_IN_STAT, c_scale_min, "scale_in", request.surge_ratio
    )
    t_total = basis.t_total_s
    return Thresholds(
        c_scale_max=c_scale_max,
        c_scale_min=c_scale_min,
        w_max_s=queueing_headroom_s(request.slo_ms, basis.s_p95),
        target_units=target,
        scale_in_units=scale_in,
        target_ratio_from=target_from,
        scale_in_ratio_from=scale_in_from,
        scaling_target_value=target.of(c_scale_max),
        scale_in_threshold=scale_in.of(c_scale_min),
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
    refuse_beyond_max_capacity(request, x_trigger)
    min_instances = max(request.min_floor, ceil9(request.trough_rps / x_trigger))
    max_instances = max(min_instances, ceil9(request.peak_rps / x_trigger))
    naive = max(min_instances, ceil9(request.peak_rps * basis.s_mean / thresholds.c_scale_max))
    return Fleet(x_trigger, min_instances, max_instances, naive)


def plan_id(
    inputs: PlanInputs,
    sources: dict[str, SourceArtifact],
    fingerprint: Fingerprint | None,
    rule: str = "published",
    extra: dict[str, object] | None = None,
) -> str:
    """Twelve hex over everything that determines the plan, for tags and policy checks. The
    published rule's payload is what it always was, so its plans keep their ids."""
    payload: dict[str, object] = {
        "inputs": inputs.model_dump(mode="json"),
        "sources": {k: v.sha256 for k, v in sorted(sources.items())},
        "fingerprint": fingerprint.model_dump(mode="json") if fingerprint else None,
    }
    if rule != "published":
        payload["rule"] = rule
    if extra:
        payload["extra"] = extra
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:12]


def published_steps(
    basis: Basis, request: PlanRequest, qmax: QmaxArtifact, x_curve: Curve
) -> tuple[Thresholds, Fleet, DeployShape]:
    """SPEC §6's arithmetic and its deploy shape."""
    thresholds = derive_thresholds(basis, request, qmax)
    fleet = size_fleet(basis, thresholds, request, x_curve)
    shape = published_shape(
        target_value=thresholds.scaling_target_value,
        scale_in_threshold=thresholds.scale_in_threshold,
        scale_in_units=thresholds.scale_in_units,
        scale_out_cooldown_s=thresholds.scale_out_cooldown_s,
        scale_in_cooldown_s=thresholds.scale_in_cooldown_s,
        launch_s=basis.launch_s,
        sizing_rps=round(fleet.throughput_at_trigger_rps, 9),
    )
    return thresholds, fleet, shape


def rule_steps(
    basis: Basis, request: PlanRequest, qmax: QmaxArtifact, x_curve: Curve
) -> tuple[Thresholds, Fleet, DeployShape, FleetLevels | None]:
    """The rule's own steps: thresholds, fleet bounds, the deploy shape (and a fleet's levels)."""
    if request.rule == "fleet":
        derived = derive_fleet(basis, request, qmax, x_curve)
        return derived.thresholds, derived.fleet, derived.shape, derived.levels
    return (*published_steps(basis, request, qmax, x_curve), None)


def measured_lag(
    ttotal: TtotalArtifact, shape: DeployShape, basis: Basis, levels: FleetLevels | None
) -> tuple[Finding | None, float | None]:
    """An organic ttotal's measured detection lag, and whether this plan may use it: only for a
    deploy shape of the structure it was measured under, and only when the policy that scaled
    out was the target tracking whose lag the plan plans for; otherwise the bound, with a
    finding. A ttotal that bypassed the policy (force-desired, local) has no lag: no finding."""
    detection = ttotal.detection
    if detection is None:
        return None, None
    bound_s = levels.detection_lag_s if levels else round9(basis.t_total_s - basis.launch_s)
    ours, role = detection_shape(shape), tracking_role(shape)
    figures = {
        "measured_lag_s": detection.lag_s, "modelled_lag_s": detection.modelled_s,
        "bound_s": bound_s, "measured_plan_id": detection.plan_id,
    }  # fmt: skip
    if detection.deploy_shape != ours:
        message = (
            f"the organic ttotal measured a {detection.lag_s:g} s detection lag under another "
            f"deploy shape ({detection.deploy_shape}); this plan deploys {ours}: the "
            f"{bound_s:g} s bound applies; measure ttotal --trigger organic with this rule's plan"
        )
        return finding("detection_lag", Verdict.WARN, message, used=False, **figures), None
    if detection.policy_role != role:
        message = (
            f"the organic ttotal's scale-out came from the {detection.policy_role} policy "
            f"({detection.lag_s:g} s), not the {role} target tracking this plan's T_total plans "
            f"for: the {bound_s:g} s bound applies; measure again with a smaller --load-factor"
        )
        return finding("detection_lag", Verdict.WARN, message, used=False, **figures), None
    message = (
        f"planned T_total uses the organic ttotal's measured detection lag, {detection.lag_s:g} s "
        f"({detection.alarm}; modelled {detection.modelled_s:g} s), measured under this deploy "
        f"shape, in place of the {bound_s:g} s bound"
    )
    return finding("detection_lag", Verdict.OK, message, used=True, **figures), detection.lag_s


def confidence_finding(
    basis: Basis,
    request: PlanRequest,
    qmax: QmaxArtifact,
    x_curve: Curve,
    derived: tuple[Thresholds, Fleet],
) -> Finding | None:
    """`qmax_confidence`, with the same rule's plan derived again at each end of Q_max's
    interval that differs from the plan's own Q_max; None for a ladder without an interval."""
    interval = qmax.q_max_interval
    if interval is None:
        return None

    def at(q_max: int | None) -> PlanAt | None:
        if q_max is None or q_max == basis.q_max:
            return None
        try:
            thresholds, fleet, _shape, _levels = rule_steps(
                replace(basis, q_max=q_max), request, qmax, x_curve
            )
        except RefusalError:  # no plan at that end: the finding leaves it out, never the plan
            return None
        return PlanAt(q_max, thresholds.scaling_target_value, fleet.max_instances)

    here = PlanAt(basis.q_max, derived[0].scaling_target_value, derived[1].max_instances)
    return qmax_confidence(interval, here, at(interval.low), at(interval.high), qmax.q_max_basis)


def derive_plan(
    qmax: QmaxArtifact,
    ttotal: TtotalArtifact,
    request: PlanRequest,
    sources: dict[str, SourceArtifact],
    *,
    created_at: datetime | None = None,
) -> PlanArtifact:
    """All of SPEC §6 (or §6a's fleet rule) over one ladder and one scale-out measurement."""
    basis = check_basis(qmax, ttotal, request)
    qmax_source = sources.get("qmax")
    pairing = check_pairing(
        qmax, ttotal, request.allow_config_mismatch, qmax_source.sha256 if qmax_source else None
    )
    x_curve = throughput_curve(qmax.curve_rungs)  # refinement probes are points of X(N) too
    thresholds, fleet, shape, levels = rule_steps(basis, request, qmax, x_curve)
    detection, lag_s = measured_lag(ttotal, shape, basis, levels)
    if lag_s is not None:  # the same structure again, timed by the measured lag
        basis = replace(basis, t_total_s=round9(basis.launch_s + lag_s), measured_lag_s=lag_s)
        thresholds, fleet, shape, levels = rule_steps(basis, request, qmax, x_curve)
    alarm = alarm_threshold(qmax, thresholds.c_scale_max, basis.c1_ttfab_p95_ms)
    confidence = confidence_finding(basis, request, qmax, x_curve, (thresholds, fleet))
    steps = PlanSteps(
        request, qmax, pairing, basis, thresholds, fleet, alarm, x_curve, shape, levels, detection,
        confidence,
    )  # fmt: skip
    findings = collect_findings(steps)
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
        q_max_basis=qmax.q_max_basis,
    )
    return PlanArtifact(
        plan_id=plan_id(inputs, sources, qmax.fingerprint, request.rule),
        rule=request.rule,
        feasible=not any(f.verdict is Verdict.STOP for f in findings),
        fingerprint=qmax.fingerprint,
        c_scale_max=thresholds.c_scale_max,
        c_scale_min=thresholds.c_scale_min,
        scaling_target_value=thresholds.scaling_target_value,
        scale_in_threshold=thresholds.scale_in_threshold,
        target_units=thresholds.target_units,
        scale_in_units=thresholds.scale_in_units,
        w_max_s=thresholds.w_max_s,
        scale_out_cooldown_s=thresholds.scale_out_cooldown_s,
        scale_in_cooldown_s=thresholds.scale_in_cooldown_s,
        queue_max_depth=basis.q_max,
        first_chunk_alarm_ms=alarm.threshold_ms,
        alarm_rule=alarm.rule,  # type: ignore[arg-type]
        min_instances=fleet.min_instances,
        max_instances=fleet.max_instances,
        deploy=shape,
        fleet=levels,
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
