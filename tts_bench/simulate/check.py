"""`plan --traffic`: a plan and its published-rule twin simulated over the same days.

Each seed's day is the one `tts-bench simulate --seed S --policy plan` replays for that plan:
one generator seeded S draws the arrivals, then a child of it the fleet's randomness; both
rules see the same arrivals (the surge is held for the ttotal's planned total either way).
Every day is simulated under both variant sets of AWS's open points (`documented` and
`pessimistic`, docs/aws-semantics.md). Nothing here changes a plan:
`planning.traffic_check.with_check` records the figures.
"""

from __future__ import annotations

import dataclasses
import math
import re
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from tts_bench.artifacts.files import sha256_file
from tts_bench.artifacts.plan import (
    ForecastError,
    PlanArtifact,
    RuleFigures,
    SeedCheck,
    SourceArtifact,
)
from tts_bench.artifacts.qmax import QmaxArtifact
from tts_bench.artifacts.ttotal import TtotalArtifact
from tts_bench.errors import TtsBenchError
from tts_bench.planning.aws.semantics import DOCUMENTED, PESSIMISTIC, AwsSemantics
from tts_bench.planning.plan import derive_plan
from tts_bench.planning.schedule.attach import with_schedule
from tts_bench.planning.steps import PlanRequest
from tts_bench.planning.traffic_check import with_check
from tts_bench.simulate.deploy_shape import scaling_shape
from tts_bench.simulate.oracle import minute_rates, oracle_fleet
from tts_bench.simulate.policies import parse_policy
from tts_bench.simulate.replay import run_fleet_model
from tts_bench.simulate.service import service_curves
from tts_bench.simulate.traffic import (
    SyntheticShape,
    Traffic,
    load_trace,
    parse_synthetic,
    synthetic_traffic,
)

SECONDS_PER_HOUR = 3600.0
MINUTE_S = 60
DAY_S = 86_400.0
WEEK_S = 7 * DAY_S
_SURGE = re.compile(r"\+surge:[^+]*")  # the surprise, left out of the forecast's description
CHECK_SEMANTICS: tuple[AwsSemantics, ...] = (DOCUMENTED, PESSIMISTIC)


# The forecast's errors a schedule is judged under (issue 37): (shift s, load scale).
FORECAST_ERRORS: tuple[tuple[float, float], ...] = (
    (-1800.0, 1.0),
    (1800.0, 1.0),
    (0.0, 0.8),
    (0.0, 1.2),
)


@dataclass(frozen=True)
class MissedShape(SyntheticShape):
    """A synthetic day that comes `shift_s` later (earlier when negative) with its load × `scale`."""

    shift_s: float = 0.0
    scale: float = 1.0

    def rate_rps(self, t_s: np.ndarray, surge_hold_s: float) -> np.ndarray:
        return super().rate_rps(t_s - self.shift_s, surge_hold_s) * self.scale


@dataclass(frozen=True)
class CheckTraffic:
    """A synthetic spec or a trace file, and how long to simulate (None: its default); a
    forecast error moves it by `shift_s` and scales its load by `scale`."""

    spec: str | None = None
    trace: Path | None = None
    duration_s: float | None = None
    shift_s: float = 0.0
    scale: float = 1.0

    def describe(self) -> str:
        return self.spec if self.spec is not None else f"trace {self.trace}"

    def build(self, plan: PlanArtifact, rng: np.random.Generator) -> Traffic:
        hold_s = plan.inputs.planned_total_s
        if self.trace is not None:
            traffic = load_trace(self.trace, self.duration_s)
            planned = plan.fleet.planned_total_s if plan.fleet else hold_s
            if traffic.duration_s < 2 * planned:
                raise TtsBenchError(
                    f"--traffic-trace {self.trace}: {traffic.duration_s:g} s is shorter than twice "
                    f"the planned T_total ({2 * planned:g} s); give a longer trace"
                )
            return self._missed(traffic, rng)
        shape = parse_synthetic(self.spec or "")
        duration = self.duration_s or shape.default_duration_s(hold_s)
        if self.shift_s or self.scale != 1.0:
            fields = {f.name: getattr(shape, f.name) for f in dataclasses.fields(shape)}
            shape = MissedShape(**fields, shift_s=self.shift_s, scale=self.scale)
        return synthetic_traffic(shape, duration, hold_s, rng)

    def _missed(self, traffic: Traffic, rng: np.random.Generator) -> Traffic:
        """A trace moved in time (the day wraps around) and its counts scaled (Poisson)."""
        if not self.shift_s and self.scale == 1.0:
            return traffic
        counts = np.roll(traffic.counts, round(self.shift_s / traffic.tick_s))
        if self.scale != 1.0:
            counts = rng.poisson(counts * self.scale).astype(np.int64)
        return Traffic(traffic.tick_s, counts, f"{traffic.description}, missed")

    def forecast(self, plan: PlanArtifact) -> tuple[str, list[float], str | None, float]:
        """What a schedule is made from: a description, each minute's expected rate, the
        trace's sha256, and how often the day repeats. A synthetic day's expected rate without
        its `+surge` (the surprise the headroom is for, not part of the forecast), one period
        of a diurnal shorter than a day, a week for one with `+weekend`; a trace's per-minute
        counts, as one day."""
        if self.trace is not None:
            rates, _ = minute_rates(self.build(plan, np.random.default_rng(0)))
            return f"trace {self.trace.name}", rates.tolist(), sha256_file(self.trace), DAY_S
        shape = parse_synthetic(self.spec or "")
        period = shape.period_s if shape.kind == "diurnal" and shape.period_s != DAY_S else DAY_S
        if shape.weekend_scale is not None:
            if period != DAY_S and DAY_S % period:
                raise TtsBenchError(
                    f"--schedule: {self.spec} has a weekend but its days differ (a period of "
                    f"{period:g} s does not divide a day); give a period dividing 86400"
                )
            period = WEEK_S
        base = replace(shape, surge_ratio=1.0, surge_at_s=math.inf)
        duration = self.duration_s or shape.default_duration_s(plan.inputs.planned_total_s)
        if period != DAY_S:
            duration = period
        seconds = np.arange(math.ceil(duration)) + 0.5
        per_second = base.rate_rps(seconds, 0.0)
        minutes = math.ceil(len(per_second) / MINUTE_S)
        padded = np.pad(per_second, (0, minutes * MINUTE_S - len(per_second)))
        counts = padded.reshape(minutes, MINUTE_S).sum(axis=1)
        lengths = np.minimum(MINUTE_S, len(per_second) - MINUTE_S * np.arange(minutes))
        spec = _SURGE.sub("", self.spec) if self.spec else ""
        return spec, (counts / lengths).tolist(), None, period


def day_figures(
    plan: PlanArtifact,
    qmax: QmaxArtifact,
    traffic: CheckTraffic,
    seed: int,
    semantics: AwsSemantics = DOCUMENTED,
) -> RuleFigures:
    """One plan (policy `plan`) over one seed's day, as `tts-bench simulate` would run it."""
    shape = scaling_shape(plan, semantics)
    curves = service_curves(qmax, shape.queue_max_depth)
    rng = np.random.default_rng(seed)
    day = traffic.build(plan, rng)
    policy = parse_policy("plan", plan, shape, curves)
    run = run_fleet_model(curves, shape, policy, day, shape.sizing_rps, rng.spawn(1)[0])
    return RuleFigures(
        rule=plan.rule,
        requests=run.requests,
        shed=run.shed,
        shed_share=round(run.shed / run.requests, 9) if run.requests else 0.0,
        instance_hours=round(run.instance_seconds / SECONDS_PER_HOUR, 3),
        peak_instances=run.peak_instances,
        aws_semantics=semantics.name,
    )


def check_seeds(
    plans: Sequence[PlanArtifact], qmax: QmaxArtifact, traffic: CheckTraffic, seeds: Sequence[int]
) -> list[SeedCheck]:
    """Every plan over every seed's day under each variant set (the same arrivals for each
    plan and set of a seed), and the clairvoyant fleet on that day at the fleet plan's levels."""
    fleet_plan = next((p for p in plans if p.fleet is not None), plans[0])
    checks = []
    for seed in seeds:
        oracle = oracle_hours(fleet_plan, traffic, seed)
        rules = [
            day_figures(plan, qmax, traffic, seed, semantics)
            for semantics in CHECK_SEMANTICS
            for plan in plans
        ]
        checks.append(SeedCheck(seed=seed, rules=rules, oracle_instance_hours=oracle))
    return checks


def oracle_hours(plan: PlanArtifact, traffic: CheckTraffic, seed: int) -> float | None:
    """The clairvoyant fleet on seed's day, at the plan's fleet levels (none: a published plan)."""
    if plan.fleet is None:
        return None
    day = traffic.build(plan, np.random.default_rng(seed))
    fleet = oracle_fleet(day, plan.fleet.scale_out_rps, plan.fleet.planned_total_s)
    return round(fleet.instance_hours, 3)


def forecast_errors(
    plan: PlanArtifact, qmax: QmaxArtifact, traffic: CheckTraffic, seeds: Sequence[int]
) -> list[ForecastError]:
    """The plan, schedule and all, on the day it was told but shifted or scaled
    (`FORECAST_ERRORS`), under each variant set: what the reactive rule must make up."""
    found = []
    for shift_s, scale in FORECAST_ERRORS:
        wrong = replace(traffic, shift_s=shift_s, scale=scale)
        oracle = statistics.mean(oracle_hours(plan, wrong, seed) or 0.0 for seed in seeds)
        for semantics in CHECK_SEMANTICS:
            rows = [day_figures(plan, qmax, wrong, seed, semantics) for seed in seeds]
            found.append(
                ForecastError(
                    shift_s=shift_s,
                    scale=scale,
                    aws_semantics=semantics.name,
                    shed_share=round(statistics.mean(r.shed_share for r in rows), 9),
                    instance_hours=round(statistics.mean(r.instance_hours for r in rows), 3),
                    oracle_instance_hours=round(oracle, 3),
                )
            )
    return found


def checked_plan(
    plan: PlanArtifact,
    qmax: QmaxArtifact,
    ttotal: TtotalArtifact,
    request: PlanRequest,
    sources: dict[str, SourceArtifact],
    traffic: CheckTraffic,
    seeds: int,
    budget: float,
    schedule: bool = False,
    forecast: bool = False,
) -> PlanArtifact:
    """`plan` checked on `seeds` simulated days beside its other rule's twin (same inputs);
    with `schedule`, the plan first gets the schedule the day gives (the twin none)."""
    if seeds < 1:
        raise TtsBenchError(f"--seeds {seeds} must be at least 1")
    if schedule:
        plan = with_schedule(plan, *traffic.forecast(plan))
    other = "published" if plan.rule == "fleet" else "fleet"
    twin = derive_plan(qmax, ttotal, request.model_copy(update={"rule": other}), sources)
    days = check_seeds([plan, twin], qmax, traffic, range(1, seeds + 1))
    duration = traffic.build(plan, np.random.default_rng(0)).duration_s
    trace = sha256_file(traffic.trace) if traffic.trace is not None else None
    missed = forecast_errors(plan, qmax, traffic, range(1, seeds + 1)) if forecast else None
    return with_check(plan, traffic.describe(), days, budget, duration, trace, missed)
