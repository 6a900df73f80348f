"""The plan's findings (SPEC §6, §6a): each `ok` / `warn` / `stop`, worst first.

One builder per finding, each over the figures `plan.derive_plan` has already derived
(`steps.PlanSteps`); none of them computes a threshold. Where the two rules differ, a finding
says how it applies to a fleet plan (docs/plan.md). `collect_findings` orders them as a person
reads them.
"""

from __future__ import annotations

import math
from typing import Final

from tts_bench.artifacts.cloudwatch import CloudWatchUnits
from tts_bench.artifacts.plan import Finding, FleetLevels, StepSpec, Verdict
from tts_bench.artifacts.qmax import QmaxArtifact
from tts_bench.engine_modes import engine_batches
from tts_bench.errors import RefusalError
from tts_bench.planning.birth_death import pooled_stationary, shed_probability
from tts_bench.planning.fleet_rule import FLEET_SCALE_IN_MIN_FLEET
from tts_bench.planning.rounding import ceil9, floor9, round9
from tts_bench.planning.slo_headroom import headroom_covers_a_wait, headroom_feasible
from tts_bench.planning.steps import Alarm, Basis, Fleet, PlanRequest, PlanSteps, Thresholds

SAGEMAKER_CEILING_MS = 60_000  # SageMaker ends any invocation after 60 s
SURGE_WARN_PROBABILITY = 0.1
# The share of a day's requests a plan may shed (`plan --traffic --shed-budget`'s default), and
# what the fleet rule's surge_survival holds a pooled fleet to.
DEFAULT_SHED_BUDGET: Final = 0.0001
POOLED_FLOOR_SEARCH: Final = 64  # fleet sizes the pooled surge floor is looked for among

# Findings of equal severity keep this order, the order a person reads them in.
FINDING_ORDER = (
    "slo_feasibility",
    "cw_ratio",
    "threshold_order",
    "fingerprint",
    "detection_lag",
    "surge_survival",
    "rule_comparison",
    "aws_semantics",
    "ramp_rate",
    "forecast_error",
    "scale_in_safety",
    "fleet_sizing",
    "slo_budget",
    "bracketing",
    "qmax_confidence",
    "stability",
    "alarm",
    "fleet_cost",
)


def finding(name: str, verdict: Verdict, message: str, **figures: object) -> Finding:
    return Finding(name=name, verdict=verdict, message=message, **figures)


def alarm_threshold(qmax: QmaxArtifact, c_scale_max: float, c1_p95_ms: float) -> Alarm:
    """A batching engine's service time grows with the batch, so its alarm comes from the trigger."""
    fp = qmax.fingerprint
    if fp is not None and engine_batches(fp.performance_env):
        at_or_above = [r for r in qmax.rungs if r.concurrency >= round9(c_scale_max)]
        rung = at_or_above[0] if at_or_above else qmax.rungs[-1]
        if rung.server_first_chunk_p95_ms is None:
            raise RefusalError(
                f"the engine batches but rung {rung.concurrency} has no server_first_chunk_p95_ms; "
                "re-run the ladder with server-side FirstChunkLatency recorded"
            )
        return Alarm(
            floor9(rung.server_first_chunk_p95_ms),
            "server-first-chunk-p95-at-trigger",
            f"batching engine: server-side FirstChunkLatency p95 at rung {rung.concurrency} "
            f"(the first rung at or above C_scale_max {c_scale_max:g})",
        )
    return Alarm(floor9(c1_p95_ms), "ttfab-p95-c1", "serial engine: p95 TTFAB at c=1")


def slo_feasibility(request: PlanRequest, w_max_s: float) -> Finding:
    """The SLO must fit SageMaker's ceiling and leave queueing headroom over one request."""
    if request.slo_ms > SAGEMAKER_CEILING_MS:
        return finding(
            "slo_feasibility",
            Verdict.STOP,
            f"the SLO {request.slo_ms:g} ms is past SageMaker's {SAGEMAKER_CEILING_MS} ms invocation ceiling",
            w_max_s=w_max_s,
        )
    if not headroom_feasible(w_max_s):
        return finding(
            "slo_feasibility",
            Verdict.STOP,
            f"W_max = SLO − S_p95 = {w_max_s:.3f} s: one uncontended request already misses the SLO",
            w_max_s=w_max_s,
        )
    return finding(
        "slo_feasibility",
        Verdict.OK,
        f"W_max = SLO − S_p95 = {w_max_s:.3f} s of queueing headroom",
        w_max_s=w_max_s,
    )


def fleet_sizing(
    request: PlanRequest, thresholds: Thresholds, fleet: Fleet, rule: str = "published"
) -> Finding:
    """Measured fleet size next to the published (uncontended) formula's."""
    if fleet.naive_max_instances is None:
        return finding(
            "fleet_sizing",
            Verdict.STOP,
            f"the ladder measured no throughput at C_scale_max {thresholds.c_scale_max:g}: cannot size a fleet",
            throughput_at_trigger_rps=0.0,
            naive_max_instances=None,
        )
    naive, needed = fleet.naive_max_instances, fleet.max_instances
    each = (
        f"at the measured {fleet.throughput_at_trigger_rps:.3f} rps each"
        if rule == "published"
        else f"at λ_out = {fleet.throughput_at_trigger_rps:.3f} rps each (the surge headroom kept)"
    )
    return finding(
        "fleet_sizing",
        Verdict.OK if naive >= needed else Verdict.WARN,
        f"{request.peak_rps:g} rps at peak needs {needed} instances {each}; the uncontended "
        f"formula ceil(rps·S/{'C_scale_max' if rule == 'published' else '((1 − h)·Q_max)'}) "
        f"would give {naive}" + (" and under-provision" if naive < needed else ""),
        throughput_at_trigger_rps=round(fleet.throughput_at_trigger_rps, 6),
        naive_max_instances=naive,
        min_instances=fleet.min_instances,
        max_instances=needed,
    )


def surge_survival(steps: PlanSteps) -> Finding:
    """Can one instance absorb a surge between the trigger and the new instance serving? For a
    fleet plan: what a fleet held at λ_out sheds under the surge, by its size (`_fleet_surge`)."""
    if steps.levels is not None:
        return _fleet_surge(steps, steps.levels)
    request, basis = steps.request, steps.basis
    c_scale_max = steps.thresholds.c_scale_max
    utilisation = round9(c_scale_max / (1 + c_scale_max))
    surge = shed_probability(
        arrival_rps=request.surge_ratio * steps.fleet.throughput_at_trigger_rps,
        service_rps=steps.x_curve.at,
        start=math.floor(c_scale_max + 0.5),
        limit=basis.q_max,
        horizon_s=basis.t_total_s,
        trials=request.surge_trials,
        seed=request.surge_seed,
    )
    return finding(
        "surge_survival",
        Verdict.WARN if surge.probability > SURGE_WARN_PROBABILITY else Verdict.OK,
        f"a ×{request.surge_ratio:g} surge at C_scale_max {c_scale_max:g} reaches Q_max "
        f"{basis.q_max} before T_total {basis.t_total_s:.1f} s ends in {surge.probability:.1%} "
        f"of {surge.trials} trials; utilisation at the trigger ρ = {utilisation:.1%}",
        utilisation_at_trigger=round(utilisation, 6),
        shed_probability=surge.probability,
        trials=surge.trials,
    )


def pooled_floor(steps: PlanSteps, levels: FleetLevels) -> tuple[int, list[float]]:
    """The smallest fleet held at λ_out whose pooled chain sheds at most `DEFAULT_SHED_BUDGET` of
    a surge of the surge ratio, and the shares for 1..that size (at most `POOLED_FLOOR_SEARCH`
    sizes: a curve that never gets there returns one past it)."""
    arrival = steps.request.surge_ratio * levels.scale_out_rps
    shares: list[float] = []
    for instances in range(1, POOLED_FLOOR_SEARCH + 1):
        pooled = pooled_stationary(instances, arrival, steps.x_curve.at, steps.basis.q_max)
        shares.append(pooled.shed_share)
        if pooled.shed_share <= DEFAULT_SHED_BUDGET:
            return instances, shares
    return POOLED_FLOOR_SEARCH + 1, shares


def _fleet_surge(steps: PlanSteps, levels: FleetLevels) -> Finding:
    """A fleet of N under least-outstanding routing pools a surge: the birth–death chain of its
    total occupancy (`birth_death.pooled_stationary`) at the surge's load per instance. Its
    stationary shed share is what a surge held long enough sheds from a fleet at λ_out; a
    shorter one sheds less (the chain starts below its stationary state and climbs towards it).
    The fleet model's routing agrees within sampling (`tests/simulate/test_theory.py`)."""
    request, smallest = steps.request, steps.fleet.min_instances
    floor, shares = pooled_floor(steps, levels)
    burst = steps.shape.policy("burst")
    # A burst from one instance adds at least its MinAdjustmentMagnitude.
    reach = 1 + (burst.min_adjustment_magnitude or 1) if isinstance(burst, StepSpec) else smallest
    shown = ", ".join(f"{n}: {100 * b:.2g} %" for n, b in enumerate(shares[:5], start=1))
    covered = max(smallest, reach) >= floor
    how = (
        f"min_instances is {smallest}"
        if smallest >= floor or not isinstance(burst, StepSpec)
        else f"the burst step takes a smaller fleet to at least {reach}"
    )
    beyond = floor > POOLED_FLOOR_SEARCH
    return finding(
        "surge_survival",
        Verdict.OK if covered else Verdict.WARN,
        f"a ×{request.surge_ratio:g} surge on a fleet held at λ_out {levels.scale_out_rps:.3f} rps "
        f"({request.surge_ratio * levels.scale_out_rps / levels.x_q_max_rps:.0%} of X(Q_max) in "
        f"the surge) sheds, by instances, {shown} (pooled birth–death chain, stationary: a "
        "surge held long enough; a shorter one sheds less); "
        + (
            f"no fleet of up to {POOLED_FLOOR_SEARCH} stays within"
            if beyond
            else f"{floor} or more stay within"
        )
        + f" the {100 * DEFAULT_SHED_BUDGET:g} % budget; {how}",
        utilisation_at_trigger=round(levels.scale_out_rps / levels.x_q_max_rps, 6),
        shed_share_one_instance=round(shares[0], 9),
        pooled_floor=None if beyond else floor,
    )


def scale_in_safety(steps: PlanSteps) -> Finding:
    """Removing one of N instances multiplies the survivors' load by N/(N−1)."""
    thresholds, fleet = steps.thresholds, steps.fleet
    if steps.levels is not None:
        return finding(
            "scale_in_safety",
            Verdict.OK,
            "a fleet of "
            f"{FLEET_SCALE_IN_MIN_FLEET} or more scales in where one instance fewer would read "
            "k % below the target, removing k %; a smaller one by target tracking's own "
            f"scale-in, to ceil(N × value / target) only below {steps.levels.low_alarm_ratio:.0%} "
            "of the target: no removal lands the survivors above λ_out "
            f"{steps.levels.scale_out_rps:.3f} rps, at any N",
            safe_floor=1,
        )
    r = thresholds.c_scale_max / thresholds.c_scale_min  # h < 0.5, so C_scale_min > 0
    safe_floor = ceil9(r / (r - 1))
    unsafe = fleet.min_instances < safe_floor
    return finding(
        "scale_in_safety",
        Verdict.WARN if unsafe else Verdict.OK,
        f"removing one of N instances is safe only for N ≥ {safe_floor} (r = {r:.3f}); "
        f"min_instances is {fleet.min_instances}"
        + (
            ", so scale-in below that can push survivors past the scale-out trigger"
            if unsafe
            else ""
        ),
        safe_floor=safe_floor,
    )


def fleet_cost(steps: PlanSteps) -> Finding:
    levels = steps.levels
    if levels is not None:
        cost = levels.x_q_max_rps / levels.scale_out_rps
        return finding(
            "fleet_cost",
            Verdict.OK,
            f"holding λ_out = {levels.scale_out_rps:.3f} rps per instance against X(Q_max) "
            f"{levels.x_q_max_rps:.3f} pays ×{cost:.3f} the instances a saturated fleet would",
            headroom_cost_factor=round(cost, 6),
        )
    cost = 1 / (1 - steps.basis.h)
    return finding(
        "fleet_cost",
        Verdict.OK,
        f"scaling out at {1 - steps.basis.h:.0%} of Q_max reserves headroom costing up to ×{cost:.3f} instances",
        headroom_cost_factor=round(cost, 6),
    )


def _units(units: CloudWatchUnits) -> str:
    return f"{units.metric} {units.statistic} ({units.period_s} s)"


def cw_ratio(steps: PlanSteps) -> Finding:
    """Which rule converted each threshold into CloudWatch units; unmeasured on SageMaker stops."""
    if steps.levels is not None:
        return _fleet_cw_ratio(steps, steps.levels)
    qmax, thresholds = steps.qmax, steps.thresholds
    target, scale_in = thresholds.target_units, thresholds.scale_in_units
    figures = {
        "cw_ratio": round(target.cw_ratio, 6),
        "target_ratio_rule": target.ratio_rule,
        "scale_in_cw_ratio": round(scale_in.cw_ratio, 6),
        "scale_in_ratio_rule": scale_in.ratio_rule,
    }
    unmeasured = [
        name
        for name, units in (("target", target), ("scale-in threshold", scale_in))
        if units.ratio_rule == "unmeasured"
    ]
    if unmeasured:
        transport = qmax.fingerprint.transport.value if qmax.fingerprint else "unknown"
        return finding(
            "cw_ratio",
            Verdict.STOP,
            f"transport {transport}: no rung measured CloudWatch's {_units(target)} against the "
            f"client's concurrency, so the {' and the '.join(unmeasured)} would deploy in the "
            "wrong units; re-run the ladder with the CloudWatch join so each rung and the two "
            "verification rungs (at C_scale_max and C_scale_min) record the ratio",
            **figures,
        )
    if target.ratio_rule == scale_in.ratio_rule == "local-no-cloudwatch":
        return finding(
            "cw_ratio",
            Verdict.OK,
            "local: no CloudWatch; the thresholds are in client concurrency (ratio 1.0 by construction)",
            **figures,
        )
    return finding(
        "cw_ratio",
        Verdict.OK,
        f"target in {_units(target)}: ×{target.cw_ratio:.3f} at C_scale_max "
        f"{thresholds.c_scale_max:g} ({target.ratio_rule}: {thresholds.target_ratio_from}); "
        f"scale-in in {_units(scale_in)}: ×{scale_in.cw_ratio:.3f} at C_scale_min "
        f"{thresholds.c_scale_min:g} ({scale_in.ratio_rule}: {thresholds.scale_in_ratio_from})",
        **figures,
    )


def threshold_order(steps: PlanSteps) -> Finding:
    """In CloudWatch units the scale-in threshold must sit below the target by the surge ratio.

    A load resting at the scale-in threshold that grows by `surge_ratio` must not reach the
    target, or one surge swings the fleet from removing an instance to adding one (flapping).
    In client units the margin is (1 − h)/(1 − 2h) ≥ surge ratio; a ratio that differs between
    the two points can eat it, or put the scale-in threshold above the target.
    """
    if steps.levels is not None:
        return _fleet_threshold_order(steps, steps.levels)
    request, thresholds = steps.request, steps.thresholds
    target, scale_in = thresholds.scaling_target_value, thresholds.scale_in_threshold
    margin = round9(target / scale_in) if scale_in > 0 else math.inf
    figures = {"margin": round(margin, 6) if math.isfinite(margin) else None}
    if round9(scale_in * request.surge_ratio) >= target:
        crosses = scale_in >= target
        return finding(
            "threshold_order",
            Verdict.STOP,
            f"in CloudWatch units the scale-in threshold {scale_in:.3f} is "
            + ("not below" if crosses else "too close to")
            + f" the target {target:.3f} (×{margin:.3f}, needs more than the surge ratio "
            f"×{request.surge_ratio:g}): the fleet would flap between scale-in and scale-out; "
            "measure the ratio at both thresholds (verification rungs) or choose another surge ratio",
            **figures,
        )
    return finding(
        "threshold_order",
        Verdict.OK,
        f"in CloudWatch units the scale-in threshold {scale_in:.3f} sits ×{margin:.3f} below the "
        f"target {target:.3f} (more than the surge ratio ×{request.surge_ratio:g})",
        **figures,
    )


def slo_budget(basis: Basis, w_max_s: float) -> Finding:
    """W_max is the queueing budget: less than one service time means no request may queue."""
    if not headroom_covers_a_wait(w_max_s, basis.s_p95):
        return finding(
            "slo_budget",
            Verdict.WARN,
            f"W_max {w_max_s:.3f} s is less than one uncontended request's p95 S_p95 "
            f"{basis.s_p95:.3f} s: a request that waits behind another can miss the SLO",
            w_max_s=w_max_s,
            service_p95_s=basis.s_p95,
        )
    return finding(
        "slo_budget",
        Verdict.OK,
        f"W_max {w_max_s:.3f} s covers {w_max_s / basis.s_p95:.1f} uncontended p95 service times",
        w_max_s=w_max_s,
        service_p95_s=basis.s_p95,
    )


def bracketing(qmax: QmaxArtifact, q_max: int) -> Finding:
    if qmax.bracketed:
        return finding(
            "bracketing", Verdict.OK, f"Q_max {q_max} is bracketed by a failing rung above it"
        )
    return finding(
        "bracketing",
        Verdict.WARN,
        f"no rung above {q_max} failed: Q_max is a lower bound; extend the ladder to bracket it",
    )


def stability(qmax: QmaxArtifact) -> Finding | None:
    """Q_max resting on a rung whose window thirds disagree is a reading of a moving system.
    None for a ladder that did not judge stability (older or reference artifacts)."""
    rung = qmax.q_max_rung()
    if rung is None or rung.stable is None:
        return None
    spread = rung.sub_window_ttfab_p95_ms or []
    shown = ", ".join("-" if v is None else f"{v:.0f}" for v in spread)
    if rung.stable:
        return finding(
            "stability",
            Verdict.OK,
            f"Q_max {rung.concurrency} rests on a stable rung (window thirds' p95 TTFAB {shown} ms)",
        )
    return finding(
        "stability",
        Verdict.WARN,
        f"Q_max {rung.concurrency} rests on an unstable rung: its window thirds' p95 TTFAB "
        f"({shown} ms) disagree beyond the stability tolerance; hold longer (--max-hold-s) and re-run",
        stable=False,
    )


def alarm(chosen: Alarm) -> Finding:
    return finding(
        "alarm",
        Verdict.OK,
        f"FirstChunkLatency p95 alarm at {chosen.threshold_ms} ms ({chosen.why})",
        rule=chosen.rule,
    )


def _fleet_cw_ratio(steps: PlanSteps, levels: FleetLevels) -> Finding:
    """The target's InvocationsPerInstance units and the burst's concurrency units."""
    units = levels.invocations_units
    burst = levels.burst
    figures: dict[str, object] = {
        "cw_ratio": round(units.cw_ratio, 6),
        "target_ratio_rule": units.ratio_rule,
        "burst_cw_ratio": round(burst.units.cw_ratio, 6) if burst else None,
        "burst_ratio_rule": burst.units.ratio_rule if burst else None,
    }
    if figures["burst_ratio_rule"] == "unmeasured":
        return finding(
            "cw_ratio",
            Verdict.STOP,
            "no rung measured CloudWatch's ConcurrentRequestsPerModel against the client's "
            "concurrency, so the burst threshold would deploy in the wrong units; re-run the "
            "ladder with the CloudWatch join",
            **figures,  # type: ignore[arg-type]
        )
    if units.ratio_rule == "unmeasured":
        # A count per request, unlike a concurrency Maximum: 1.0 by AWS's definition (each
        # request adds 1/N) is the expected reading, the join only checks it.
        why = (
            "the ladder was run with --no-fleet-level and no rung held two whole minutes"
            if steps.qmax.fleet_level_skipped
            else "no rung held two whole minutes"
        )
        return finding(
            "cw_ratio",
            Verdict.WARN,
            f"{why} of {_units(units)}, so its ratio to the client's requests was not measured; "
            "the target assumes 1.0 by AWS's definition; let the verification hold the fleet "
            "rule's level (three minutes; qmax without --no-fleet-level) to measure it",
            **figures,  # type: ignore[arg-type]
        )
    burst_text = (
        f"; burst in {_units(burst.units)}: ×{burst.units.cw_ratio:.3f} at occupancy "
        f"{burst.occupancy:g} ({burst.units.ratio_rule})"
        if burst
        else ""
    )
    return finding(
        "cw_ratio",
        Verdict.OK,
        f"target in {_units(units)}: ×{units.cw_ratio:.3f} ({units.ratio_rule}: "
        f"{steps.thresholds.target_ratio_from}){burst_text}",
        **figures,  # type: ignore[arg-type]
    )


def _fleet_threshold_order(steps: PlanSteps, levels: FleetLevels) -> Finding:
    """Scale-in reads the load with one instance fewer and lands at or under the target, so it
    cannot flap with it; the burst must lie above what a pooled fleet (two instances and more)
    reads at λ_out, or every fleet would add capacity in normal operation."""
    thresholds = steps.thresholds
    burst = levels.burst
    pair = pooled_stationary(2, levels.scale_out_rps, steps.x_curve.at, steps.basis.q_max)
    reads = round9(pair.mean_occupancy * (burst.units.cw_ratio if burst else 1.0))
    figures = {"margin": round(1 / levels.low_alarm_ratio, 6)}
    if burst is not None and burst.threshold <= reads:
        return finding(
            "threshold_order",
            Verdict.STOP,
            f"the burst threshold {burst.threshold:.3f} is not above the {reads:.3f} a fleet of "
            "two reads at λ_out: it would add capacity in normal operation",
            **figures,
        )
    above = (
        f"; the burst fires at {burst.threshold:.3f}, above the {reads:.3f} a fleet of two "
        "reads at λ_out"
        if burst
        else ""
    )
    return finding(
        "threshold_order",
        Verdict.OK,
        f"scale-in acts when one instance fewer would read below {thresholds.scale_in_threshold:.3f}"
        f" (the target; from {FLEET_SCALE_IN_MIN_FLEET} instances) or, on a smaller fleet, below "
        f"×{levels.low_alarm_ratio:g} the target for 15 minutes (target tracking's own), "
        f"and lands at or below the target{above}",
        **figures,
    )


def collect_findings(steps: PlanSteps) -> list[Finding]:
    """Every finding, worst first; equal severities in `FINDING_ORDER`."""
    request, thresholds, qmax = steps.request, steps.thresholds, steps.qmax
    found = [
        steps.pairing,
        slo_feasibility(request, thresholds.w_max_s),
        fleet_sizing(request, thresholds, steps.fleet, request.rule),
        surge_survival(steps),
        scale_in_safety(steps),
        fleet_cost(steps),
        cw_ratio(steps),
        threshold_order(steps),
        slo_budget(steps.basis, thresholds.w_max_s),
        bracketing(qmax, steps.basis.q_max),
        alarm(steps.alarm),
    ]
    found += [f for f in (stability(qmax), steps.detection, steps.confidence) if f is not None]
    found.sort(key=lambda f: (-f.verdict.severity, FINDING_ORDER.index(f.name)))
    return found
