"""The plan as a person reads it: inputs with provenance, derived numbers, findings, next step."""

from __future__ import annotations

import math

from tts_bench.artifacts.cloudwatch import CloudWatchUnits
from tts_bench.artifacts.plan import (
    PlanArtifact,
    Schedule,
    StepSpec,
    TargetTrackingSpec,
    Verdict,
)
from tts_bench.artifacts.qmax import QmaxArtifact
from tts_bench.artifacts.ttotal import TtotalArtifact
from tts_bench.planning.deploy import deploy_shape_of
from tts_bench.planning.qmax_confidence import describe_basis

_MARK = {Verdict.OK: "ok  ", Verdict.WARN: "WARN", Verdict.STOP: "STOP"}


def _units(units: CloudWatchUnits) -> str:
    """A threshold's units as the report states them: the statistic and how the ratio was got."""
    if units.ratio_rule == "local-no-cloudwatch":
        return "local: no CloudWatch, client concurrency"
    if units.ratio_rule == "unmeasured":
        return f"{units.statistic} {units.period_s} s, ratio NOT measured"
    return f"{units.statistic} {units.period_s} s, ×{units.cw_ratio:.3f} {units.ratio_rule}"


def _policy(spec: TargetTrackingSpec | StepSpec) -> str:
    """One deployed policy on one line: what it reads, when it acts and what it does."""
    if isinstance(spec, TargetTrackingSpec):
        high = spec.high_alarm
        scale_in = (
            "scale-in disabled"
            if spec.low_alarm is None
            else f"scale-in below {spec.low_alarm.threshold:g} for {spec.low_alarm.datapoints_to_alarm}"
            f" × {spec.low_alarm.period_s} s, cooldown {spec.scale_in_cooldown_s} s"
        )
        return (
            f"target tracking on {spec.predefined_metric} at {spec.target_value:g} "
            f"({high.metric} {high.statistic} {high.period_s} s, {high.datapoints_to_alarm} "
            f"datapoints), scale-out cooldown {spec.scale_out_cooldown_s} s; {scale_in}"
        )
    alarm = spec.alarm
    adjustments = [s.adjustment for s in spec.steps]
    steps = ", ".join(f"{a:+d}" for a in adjustments)
    if len(adjustments) > 6:  # one step per percent: its range, not fifty numbers
        steps = f"{adjustments[0]:+d} … {adjustments[-1]:+d} ({len(adjustments)} steps)"
    math = alarm.after_one_less
    metric = (
        alarm.metric
        if math is None
        else f"{alarm.metric} with one instance fewer (fleets of {math.min_fleet} or more, "
        "metric math)"
    )
    return (
        f"{spec.role} step: {metric} {alarm.statistic} {alarm.period_s} s "
        f"{alarm.comparison} {alarm.threshold:g} for {alarm.datapoints_to_alarm} of "
        f"{alarm.evaluation_periods} → {spec.adjustment_type} {steps}, cooldown {spec.cooldown_s} s"
    )


def render_plan(plan: PlanArtifact, qmax: QmaxArtifact, ttotal: TtotalArtifact) -> str:
    fp = plan.fingerprint
    inp = plan.inputs
    who = (
        f"{fp.model} on {fp.instance_type} ({fp.image_digest[:15]}…), transport {fp.transport}"
        if fp
        else "(no fingerprint)"
    )
    engine = ", ".join(f"{k}={v}" for k, v in fp.performance_env.items()) if fp else ""
    lines = [
        f"Plan {plan.plan_id} ({plan.rule} rule) for {who}"
        + (f"\n  engine {engine}" if engine else ""),
        "",
    ]

    lines.append("Inputs")
    for name, artifact in (("qmax", qmax), ("ttotal", ttotal)):
        src = plan.sources[name]
        prov = artifact.provenance
        lines.append(
            f"  {name:<7} {src.path}\n"
            f"          {prov.kind}, {prov.created_at:%Y-%m-%d %H:%M}Z, {prov.source} (sha256 {src.sha256[:12]})"
        )
    lines += [
        f"  Q_max {inp.q_max} at SLO {inp.slo_ms:g} ms ({'bracketed' if qmax.bracketed else 'NOT bracketed'})"
        f";  S {inp.service_mean_s * 1000:.1f} ms mean, {inp.service_p95_s * 1000:.1f} ms p95",
        f"  {_q_max_interval(qmax)}",
        f"  T_total {ttotal.measured_total_s:.1f} s measured + {_lag(inp.planned_total_s, ttotal)}"
        f" = {inp.planned_total_s:.1f} s planned",
        f"  surge ratio {inp.surge_ratio:g};  peak {inp.peak_rps:g} rps;  trough {inp.trough_rps:g} rps;"
        f"  floor {inp.min_floor}",
        "",
        "Derived",
        f"  scale out at        C_scale_max {plan.c_scale_max:g} → target value {plan.scaling_target_value:.3f}"
        f" ({_units(plan.target_units)})",
        f"  scale in at         C_scale_min {plan.c_scale_min:g} → threshold {plan.scale_in_threshold:.3f}"
        f" ({_units(plan.scale_in_units)})",
        f"  W_max               {plan.w_max_s:.3f} s",
        f"  cooldowns           scale-out {plan.scale_out_cooldown_s} s, scale-in {plan.scale_in_cooldown_s} s",
        f"  queue_max_depth     {plan.queue_max_depth}",
        f"  first-chunk alarm   {plan.first_chunk_alarm_ms} ms ({plan.alarm_rule})",
        f"  instances           min {plan.min_instances}, max {plan.max_instances}",
    ]
    if plan.fleet is not None:
        levels = plan.fleet
        lines += [
            f"  load levels         λ_out {levels.scale_out_rps:.3f} rps = X(Q_max) "
            f"{levels.x_q_max_rps:.3f} × (1 − {levels.margin:.3f}) / {levels.surge_ratio:g}; "
            f"λ_in {levels.scale_in_rps:.3f} rps",
            f"  planned T_total     {levels.launch_s:.1f} s measured + {levels.detection_lag_s:.0f} s "
            f"detection = {levels.planned_total_s:.1f} s",
        ]
    lines += ["", "Deploy shape"]
    lines += [f"  {_policy(spec)}" for spec in deploy_shape_of(plan).policies]
    if plan.schedule is not None:
        lines += ["", *_schedule(plan.schedule)]
    lines += ["", "Findings (worst first)"]
    lines += [f"  {_MARK[f.verdict]} {f.name:<16} {f.message}" for f in plan.findings]
    lines += ["", f"Feasible: {'yes' if plan.feasible else 'NO (a finding is stop)'}"]
    return "\n".join(lines)


def _schedule(schedule: Schedule) -> list[str]:
    """The scheduled actions, one line each, times in UTC (a cron again every period)."""
    period = schedule.period_s
    every = {86_400: "daily", 604_800: "weekly"}.get(period, f"every {period // 60} min")
    lines = [
        f"Schedule ({len(schedule.steps)} scheduled actions, {every}, UTC {schedule.utc_offset}; "
        f"from {schedule.traffic}, {len(schedule.minute_rps)} minutes, sha256 "
        f"{schedule.minute_rps_sha256[:12]}; {schedule.lead_s:g} s ahead, held "
        f"±{schedule.hold_s:g} s, for ×{schedule.load_scale:g} the load, at "
        f"{schedule.per_instance_rps:.3f} rps per instance)"
    ]
    lines += [f"  {s.at_utc} UTC  MinCapacity {s.min_capacity}" for s in schedule.steps]
    return lines


def _q_max_interval(qmax: QmaxArtifact) -> str:
    interval = qmax.q_max_interval
    if interval is None:
        return "Q_max interval unknown: the ladder predates the p95 intervals (issue 38)"
    low = "-" if interval.low is None else interval.low
    high = "-" if interval.high is None else interval.high
    above = "" if interval.failing_above is None else f", {interval.failing_above} failed"
    return (
        f"Q_max interval [{low}, {high}] at {interval.level:.0%}{above}; the plan's Q_max is "
        f"{describe_basis(qmax.q_max_basis)}"
    )


def next_step(plan: PlanArtifact, path: str) -> str:
    if not plan.feasible:
        return "next: fix the stop findings above and re-measure; Pulumi deploys no autoscaling for an infeasible plan"
    return f"next: tts-bench preview --stack dev (the Pulumi gate deploys {path} when its digest matches the image)"


def _lag(planned_total_s: float, ttotal: TtotalArtifact) -> str:
    """The lag the planned T_total adds: the ttotal's bound, or an organic ttotal's measured lag
    when the plan used it (the detection_lag finding says why)."""
    lag = planned_total_s - ttotal.measured_total_s
    if math.isclose(lag, ttotal.policy_lag_bound_s, abs_tol=1e-6):
        return f"{lag:.1f} s policy lag"
    return f"{lag:.1f} s measured detection lag"
