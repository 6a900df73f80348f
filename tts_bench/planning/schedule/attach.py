"""A schedule derived into a plan: the `Schedule` with its inputs, the `ramp_rate` finding, and
the plan's id over both. `plan --schedule` calls it with the day it was told; `custody` calls it
again with the rates the plan recorded, so a hand-edited step is a difference.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from tts_bench.artifacts.plan import PlanArtifact, Schedule, ScheduledStep
from tts_bench.errors import RefusalError
from tts_bench.planning.aws.scheduled import DAY_S, WEEK_S, period_problem
from tts_bench.planning.findings import FINDING_ORDER
from tts_bench.planning.schedule.day import MINUTE_S, rates_sha256, rounded_rates
from tts_bench.planning.schedule.ramp import clock, ramp_rate
from tts_bench.planning.schedule.steps import (
    FORECAST_HOLD_S,
    FORECAST_LOAD_SCALE,
    DayFleet,
    schedule_steps,
)
from tts_bench.planning.traffic_check import identified

DAY_MINUTES = 24 * 60


def day_fleet(plan: PlanArtifact) -> DayFleet:
    if plan.fleet is None:
        raise RefusalError(
            "--schedule needs the fleet rule's load level λ_out; plan with --rule fleet"
        )
    return DayFleet(
        per_instance_rps=plan.fleet.scale_out_rps,
        surge_ratio=plan.fleet.surge_ratio,
        lead_s=plan.fleet.planned_total_s,
        min_instances=plan.min_instances,
        max_instances=plan.max_instances,
        hold_s=FORECAST_HOLD_S,
        load_scale=FORECAST_LOAD_SCALE,
    )


def derive_schedule(
    plan: PlanArtifact,
    traffic: str,
    minute_rps: Sequence[float],
    trace_sha256: str | None = None,
    period_s: float = DAY_S,
) -> Schedule:
    """The schedule of a day that repeats every `period_s` (a day; a shorter period dividing it,
    or a week from Monday 00:00: `minute_rps` is then exactly one period, and each step recurs
    every period)."""
    if (problem := period_problem(period_s)) is not None:
        raise RefusalError(
            f"--schedule: {traffic} repeats every {period_s:g} s; {problem} (give a period of "
            "whole hours dividing 24 h, or one dividing an hour, or a day, or a week)"
        )
    if period_s != DAY_S and len(minute_rps) != period_s // MINUTE_S:
        raise RefusalError(
            f"--schedule: the day repeats every {period_s // MINUTE_S} minutes but "
            f"{len(minute_rps)} were given; give exactly one period"
        )
    if period_s != WEEK_S and not 0 < len(minute_rps) <= DAY_MINUTES:
        raise RefusalError(
            f"--schedule: the day has {len(minute_rps)} minutes; a daily schedule takes 1 to "
            f"{DAY_MINUTES} (give a day of traffic, or --traffic with a period of at most 86400)"
        )
    fleet = day_fleet(plan)
    rates = rounded_rates(minute_rps)
    steps = schedule_steps(np.asarray(rates, dtype=float), fleet, cyclic=period_s != DAY_S)
    ends = [s.start_minute for s in steps[1:]] + [len(rates)]
    return Schedule(
        traffic=traffic,
        trace_sha256=trace_sha256,
        minute_rps=rates,
        minute_rps_sha256=rates_sha256(rates),
        period_s=int(period_s),
        per_instance_rps=fleet.per_instance_rps,
        lead_s=fleet.lead_s,
        hold_s=fleet.hold_s,
        load_scale=fleet.load_scale,
        steps=[
            ScheduledStep(
                at_s=s.start_minute * MINUTE_S,
                at_utc=clock(s.start_minute, weekly=period_s == WEEK_S),
                min_capacity=s.min_capacity,
            )
            for s in steps
        ],
        instance_minutes=sum(
            s.min_capacity * (end - s.start_minute) for s, end in zip(steps, ends, strict=True)
        ),
    )


def with_schedule(
    plan: PlanArtifact,
    traffic: str,
    minute_rps: Sequence[float],
    trace_sha256: str | None = None,
    period_s: float = DAY_S,
) -> PlanArtifact:
    """The plan with the schedule its day gives, `ramp_rate`, and its id over both."""
    derived = derive_schedule(plan, traffic, minute_rps, trace_sha256, period_s)
    rates = np.asarray(derived.minute_rps, dtype=float)
    findings = [f for f in plan.findings if f.name != "ramp_rate"]
    weekly = derived.period_s == WEEK_S
    findings.append(ramp_rate(rates, day_fleet(plan), scheduled=True, weekly=weekly))
    findings.sort(key=lambda f: (-f.verdict.severity, FINDING_ORDER.index(f.name)))
    return identified(plan.model_copy(update={"schedule": derived, "findings": findings}))
