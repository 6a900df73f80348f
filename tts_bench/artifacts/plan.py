"""The plan artifact: every deployed number, its inputs and sources, findings and rule figures,
and the deploy shape (every scaling policy and alarm it deploys, as AWS takes them).

A plan whose thresholds disagree with their recorded units, or whose shape deploys other numbers
than the plan's, does not load.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any, Final, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    NonNegativeFloat,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
    SerializerFunctionWrapHandler,
    model_serializer,
    model_validator,
)

from tts_bench.artifacts.alarm import AfterOneLess as AfterOneLess
from tts_bench.artifacts.alarm import AlarmSpec as AlarmSpec
from tts_bench.artifacts.alarm import Comparison as Comparison
from tts_bench.artifacts.cloudwatch import CloudWatchUnits
from tts_bench.artifacts.fingerprint import Fingerprint
from tts_bench.artifacts.provenance import Provenance, ProvenanceKind, Text
from tts_bench.artifacts.qmax import QmaxBasis
from tts_bench.strict import StrictModel as _Strict


class Verdict(StrEnum):
    OK = "ok"
    WARN = "warn"
    STOP = "stop"

    @property
    def severity(self) -> int:
        return {"ok": 0, "warn": 1, "stop": 2}[self.value]


FigureValue = float | int | bool | str | None


class Finding(BaseModel):
    """A named check with a verdict; its figures sit beside `message` as extra keys."""

    model_config = ConfigDict(extra="allow")

    name: str
    verdict: Verdict
    message: str

    @model_validator(mode="after")
    def _figures_are_scalars(self) -> Finding:
        for key, value in (self.model_extra or {}).items():
            if not isinstance(value, FigureValue):  # type: ignore[arg-type]
                raise ValueError(f"figure {key!r} must be a number, bool, string or null")
        return self

    def figure(self, key: str) -> Any:
        return (self.model_extra or {})[key]


class SourceArtifact(_Strict):
    path: Text
    sha256: Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]
    provenance: ProvenanceKind


class PlanInputs(_Strict):
    slo_ms: PositiveFloat
    surge_ratio: float
    peak_rps: NonNegativeFloat
    trough_rps: NonNegativeFloat
    min_floor: PositiveInt
    allow_config_mismatch: bool
    q_max: PositiveInt
    service_mean_s: PositiveFloat
    service_p95_s: PositiveFloat
    ttfab_p95_c1_ms: NonNegativeFloat
    planned_total_s: PositiveFloat
    q_max_basis: QmaxBasis | None = Field(
        default=None,
        description="the ladder's q_max_basis (issue 38); absent: its ladder predates the "
        "choice. A point plan gates only a local image",
    )

    @model_serializer(mode="wrap")
    def _without_absent_basis(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # A plan whose ladder predates the basis rebuilds byte for byte, and keeps its id.
        data = handler(self)
        if self.q_max_basis is None:
            data.pop("q_max_basis", None)
        return data


# --------------------------------------------------------------------------- deploy shape

PLAN_SCHEMA_VERSION: Final = 2
PlanRule = Literal["published", "fleet"]


class TargetTrackingSpec(_Strict):
    """A target-tracking policy on a predefined metric. Its alarms are Application Auto
    Scaling's own; the plan records them as `aws_scaling.tracking_alarms` says AWS builds them."""

    kind: Literal["target-tracking"] = "target-tracking"
    role: Literal["concurrency-target", "invocations-target"]
    predefined_metric: Literal[
        "SageMakerVariantConcurrentRequestsPerModelHighResolution",
        "SageMakerVariantInvocationsPerInstance",
    ]
    target_value: PositiveFloat
    disable_scale_in: bool
    scale_out_cooldown_s: NonNegativeInt
    scale_in_cooldown_s: NonNegativeInt | None = Field(
        default=None, description="null: not set (only with scale-in disabled)"
    )
    high_alarm: AlarmSpec
    low_alarm: AlarmSpec | None

    @model_validator(mode="after")
    def _scale_in(self) -> TargetTrackingSpec:
        if self.disable_scale_in != (self.low_alarm is None):
            raise ValueError("a low alarm exists exactly when scale-in is enabled")
        if not self.disable_scale_in and self.scale_in_cooldown_s is None:
            raise ValueError("a policy that scales in needs scale_in_cooldown_s")
        return self


class StepAdjustment(_Strict):
    """One step: bounds on (metric − threshold), and the adjustment there."""

    lower: float | None
    upper: float | None
    adjustment: int


class StepSpec(_Strict):
    """A step policy and the alarm that drives it."""

    kind: Literal["step"] = "step"
    role: Literal["scale-in", "burst"]
    adjustment_type: Literal["ChangeInCapacity", "PercentChangeInCapacity", "ExactCapacity"]
    steps: list[StepAdjustment] = Field(min_length=1)
    cooldown_s: NonNegativeInt
    metric_aggregation_type: Literal["Average", "Minimum", "Maximum"]
    min_adjustment_magnitude: PositiveInt | None = None
    alarm: AlarmSpec


ScalingPolicySpec = Annotated[TargetTrackingSpec | StepSpec, Field(discriminator="kind")]


class DeployShape(_Strict):
    """Every scaling construct the plan deploys, and what a simulation of it needs besides."""

    policies: list[ScalingPolicySpec] = Field(min_length=1)
    launch_s: PositiveFloat = Field(
        description="desired count set → instance serving: the ttotal's measured total"
    )
    sizing_rps: NonNegativeFloat = Field(
        description="requests/s per instance the plan sizes the fleet at (min/max instances)"
    )

    def policy(self, role: str) -> TargetTrackingSpec | StepSpec | None:
        return next((p for p in self.policies if p.role == role), None)


class BurstLevels(_Strict):
    """The fleet rule's burst step on the high-resolution concurrency metric."""

    occupancy: PositiveFloat = Field(description="client concurrency per instance where it fires")
    threshold: PositiveFloat = Field(description="the same in CloudWatch units")
    units: CloudWatchUnits
    percent: PositiveInt = Field(description="PercentChangeInCapacity when it fires")
    cooldown_s: PositiveInt


class FleetLevels(_Strict):
    """The fleet rule's load levels, each derivation with its inputs (docs/plan.md)."""

    x_q_max_rps: PositiveFloat = Field(description="X(Q_max): the most one instance serves")
    surge_ratio: float = Field(gt=1, lt=1.5)
    margin: float = Field(ge=0, lt=1, description="the diurnal's growth in one planned T_total")
    scale_out_rps: PositiveFloat = Field(description="λ_out = X(Q_max) · (1 − margin) / surge")
    low_alarm_ratio: float = Field(gt=0, lt=1, description="AWS's scale-in alarm: this × target")
    scale_in_rps: PositiveFloat = Field(description="λ_in = low_alarm_ratio · λ_out")
    invocations_units: CloudWatchUnits
    target_invocations_per_minute: PositiveFloat = Field(description="60 · λ_out · cw_ratio")
    detection_lag_s: PositiveFloat = Field(
        description="period × datapoints + publication delay, or an organic ttotal's measured "
        "lag (the detection_lag finding says so)"
    )
    launch_s: PositiveFloat = Field(description="the ttotal's measured total")
    planned_total_s: PositiveFloat = Field(description="launch_s + detection_lag_s")
    burst: BurstLevels | None = None


class RuleFigures(_Strict):
    """One rule's plan simulated over one seed's day (or the mean over seeds)."""

    rule: PlanRule
    requests: NonNegativeFloat
    shed: NonNegativeFloat
    shed_share: NonNegativeFloat
    instance_hours: NonNegativeFloat
    peak_instances: NonNegativeFloat
    aws_semantics: str | None = Field(
        default=None, description="the variant set it was simulated under (none: before them)"
    )


def _absent(value: object) -> bool:
    return value is None


class SeedCheck(_Strict):
    seed: int
    rules: list[RuleFigures] = Field(min_length=1)
    oracle_instance_hours: NonNegativeFloat | None = Field(
        default=None, exclude_if=_absent, description="the clairvoyant fleet on this seed's day"
    )


class ForecastError(_Strict):
    """`plan --schedule --forecast-errors`: the scheduled plan on the day it was told, shifted
    or scaled, mean over the check's seeds under one variant set of AWS."""

    shift_s: float = Field(description="the day comes this much later (negative: earlier)")
    scale: PositiveFloat = Field(description="its load times this")
    aws_semantics: str
    shed_share: NonNegativeFloat
    instance_hours: NonNegativeFloat
    oracle_instance_hours: NonNegativeFloat


class TrafficCheck(_Strict):
    """`plan --traffic`: both rules' plans simulated over the same days. Never changes a
    deployed number; a mean shed share above the budget makes the plan `stop`."""

    traffic: str
    trace_sha256: Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")] | None = None
    duration_s: PositiveFloat
    shed_budget: float = Field(gt=0, lt=1)
    seeds: list[SeedCheck] = Field(min_length=1)
    mean: list[RuleFigures] = Field(min_length=1)
    oracle_instance_hours: NonNegativeFloat | None = Field(
        default=None, exclude_if=_absent, description="the clairvoyant fleet, mean over seeds"
    )
    forecast_errors: list[ForecastError] | None = Field(default=None, exclude_if=_absent)

    def mean_of(self, rule: str, semantics: str = "documented") -> RuleFigures | None:
        """A rule's mean under a variant set (a check from before the sets: its only one)."""
        return next(
            (r for r in self.mean if r.rule == rule and r.aws_semantics in (semantics, None)),
            None,
        )

    @property
    def semantics(self) -> list[str]:
        """The variant sets it was simulated under, in order (`documented` first)."""
        return list(dict.fromkeys(r.aws_semantics or "documented" for r in self.mean))


# Application Auto Scaling holds at most 200 scheduled actions per scalable target (its quotas
# page: "Scheduled actions per scalable target 200", not adjustable).
MAX_SCHEDULED_ACTIONS: Final = 200
_SHA256 = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]


class ScheduledStep(_Strict):
    """One scheduled action: MinCapacity from `at_s` on (a cron at `at_utc`, again every
    `Schedule.period_s`)."""

    at_s: NonNegativeInt = Field(description="seconds from the period's start, a whole minute")
    at_utc: str = Field(
        pattern=r"^((Mon|Tue|Wed|Thu|Fri|Sat|Sun) )?\d{2}:\d{2}$",
        description="HH:MM, UTC (+00:00); a weekly schedule's after its day, `Sat 07:30`",
    )
    min_capacity: PositiveInt


class Schedule(_Strict):
    """`plan --schedule`: MinCapacity steps ahead of the ramps the reactive rule cannot follow,
    with the inputs they are re-derived from (planning/schedule, docs/simulation.md)."""

    traffic: str = Field(description="the spec or trace the day was read from")
    trace_sha256: _SHA256 | None = None
    minute_rps: list[NonNegativeFloat] = Field(
        min_length=1, description="each minute's expected offered rate, the schedule's input"
    )
    period_s: PositiveInt = Field(
        default=86_400,
        description="how often the day repeats, so its steps recur: a day, a shorter period "
        "dividing it, or a week from Monday (minute_rps is one period)",
    )
    minute_rps_sha256: _SHA256 = Field(description="sha256 of minute_rps as canonical JSON")
    utc_offset: Literal["+00:00"] = Field(
        default="+00:00", description="the day starts at 00:00 UTC; times are UTC"
    )
    per_instance_rps: PositiveFloat = Field(description="λ_out: the load each instance holds")
    lead_s: PositiveFloat = Field(description="how long before a needed minute its step acts")
    hold_s: NonNegativeFloat = Field(
        default=0.0, description="how long either side of a needed minute its step holds"
    )
    load_scale: float = Field(
        default=1.0,
        ge=1.0,
        description="a needed minute's step holds the need of its rate × this: the load a "
        "forecast may be short by",
    )
    steps: list[ScheduledStep] = Field(min_length=1, max_length=MAX_SCHEDULED_ACTIONS)
    instance_minutes: NonNegativeInt = Field(
        description="the floor the steps hold, summed over the day's minutes"
    )


class PlanArtifact(_Strict):
    artifact: Literal["plan"] = "plan"
    schema_version: Literal[1, 2] = PLAN_SCHEMA_VERSION
    plan_id: str = Field(pattern=r"^[0-9a-f]{12}$", description="hash of inputs and sources")
    rule: PlanRule = Field(default="published", description="a plan without one is published")
    feasible: bool
    fingerprint: Fingerprint | None
    c_scale_max: PositiveFloat
    c_scale_min: NonNegativeFloat
    scaling_target_value: PositiveFloat
    scale_in_threshold: NonNegativeFloat
    target_units: CloudWatchUnits = Field(description="what target tracking evaluates")
    scale_in_units: CloudWatchUnits = Field(description="what the scale-in alarm evaluates")
    w_max_s: float
    scale_out_cooldown_s: PositiveInt
    scale_in_cooldown_s: PositiveInt
    queue_max_depth: PositiveInt
    first_chunk_alarm_ms: NonNegativeInt
    alarm_rule: Literal["ttfab-p95-c1", "server-first-chunk-p95-at-trigger"]
    min_instances: PositiveInt
    max_instances: PositiveInt
    deploy: DeployShape | None = Field(
        default=None, description="every scaling construct deployed; null only in version 1"
    )
    fleet: FleetLevels | None = Field(default=None, description="the fleet rule's levels")
    traffic_check: TrafficCheck | None = None
    # Omitted when absent, so a plan without a schedule serializes as it did before it.
    schedule: Schedule | None = Field(default=None, exclude_if=_absent)
    findings: list[Finding]
    inputs: PlanInputs
    sources: dict[Literal["qmax", "ttotal"], SourceArtifact]
    provenance: Provenance

    @model_validator(mode="after")
    def _consistent(self) -> PlanArtifact:
        worst = [f.verdict.severity for f in self.findings]
        if worst != sorted(worst, reverse=True):
            raise ValueError("findings must be ordered worst first")
        if self.feasible == any(f.verdict is Verdict.STOP for f in self.findings):
            raise ValueError("feasible must be true exactly when no finding is 'stop'")
        if self.max_instances < self.min_instances:
            raise ValueError("max_instances is below min_instances")
        if self.schema_version >= 2 and self.deploy is None:
            raise ValueError("deploy: a version 2 plan records its deploy shape")
        if (self.rule == "fleet") != (self.fleet is not None):
            raise ValueError("fleet: a fleet plan records its levels, a published plan none")
        return self

    @model_validator(mode="after")
    def _cross_fields(self) -> PlanArtifact:
        # Figures the plan states twice, or that follow from each other by the recorded ratio:
        # an edit of one alone is no plan any tool writes.
        if self.queue_max_depth != self.inputs.q_max:
            raise ValueError(
                f"queue_max_depth {self.queue_max_depth} is not the Q_max the plan used "
                f"(inputs.q_max {self.inputs.q_max})"
            )
        order = self.finding("threshold_order")
        # A scale-in that reads the load with one instance fewer (`AfterOneLess`) may sit at the
        # target itself: the load it acts on is then below the target by one instance's share.
        scale_in = self.deploy.policy("scale-in") if self.deploy is not None else None
        after_one_less = isinstance(scale_in, StepSpec) and scale_in.alarm.after_one_less
        too_high = (
            self.scale_in_threshold > self.scaling_target_value
            if after_one_less
            else self.scale_in_threshold >= self.scaling_target_value
        )
        if too_high and not (order is not None and order.verdict is Verdict.STOP):
            raise ValueError(
                f"scale_in_threshold {self.scale_in_threshold:g} is not below "
                f"scaling_target_value {self.scaling_target_value:g}, and threshold_order is "
                "not stop"
            )
        if problem := _units_problem(self) or _shape_problem(self):
            raise ValueError(problem)
        return self

    def finding(self, name: str) -> Finding | None:
        return next((f for f in self.findings if f.name == name), None)


def _units_problem(plan: PlanArtifact) -> str | None:
    """Each threshold is its client-side level in the units it records (`CloudWatchUnits.of`)."""
    if plan.fleet is None:
        pairs = [
            ("scaling_target_value", plan.scaling_target_value, plan.target_units, plan.c_scale_max,
             "c_scale_max"),
            ("scale_in_threshold", plan.scale_in_threshold, plan.scale_in_units, plan.c_scale_min,
             "c_scale_min"),
        ]  # fmt: skip
    else:
        levels = plan.fleet
        if plan.target_units != levels.invocations_units:
            return "target_units: a fleet plan's target is in fleet.invocations_units"
        per_period = levels.scale_out_rps * levels.invocations_units.period_s
        pairs = [
            ("scaling_target_value", plan.scaling_target_value, levels.invocations_units,
             per_period, "fleet.scale_out_rps × the metric's period"),
            ("fleet.target_invocations_per_minute", levels.target_invocations_per_minute,
             levels.invocations_units, per_period, "fleet.scale_out_rps × the metric's period"),
        ]  # fmt: skip
        if levels.burst is not None:
            burst = levels.burst
            pairs.append(
                ("fleet.burst.threshold", burst.threshold, burst.units, burst.occupancy,
                 "fleet.burst.occupancy")
            )  # fmt: skip
    for name, value, units, client, what in pairs:
        if value != units.of(client):
            return (
                f"{name} {value:g} is not {what} ({client:g}) × its recorded cw_ratio "
                f"({units.cw_ratio:g}) = {units.of(client):g}"
            )
    return None


def _shape_problem(plan: PlanArtifact) -> str | None:
    """The deploy shape deploys the numbers the plan states: the target and its cooldowns, the
    scale-in's cooldown and threshold, the burst's."""
    if plan.deploy is None:
        return None
    burst = plan.fleet.burst if plan.fleet is not None else None
    checks: list[tuple[str, object, str, object]] = []
    for index, policy in enumerate(plan.deploy.policies):
        at = f"deploy.policies[{index}]"
        if isinstance(policy, TargetTrackingSpec):
            checks += [
                (f"{at}.target_value", policy.target_value, "scaling_target_value",
                 plan.scaling_target_value),
                (f"{at}.scale_out_cooldown_s", policy.scale_out_cooldown_s,
                 "scale_out_cooldown_s", plan.scale_out_cooldown_s),
            ]  # fmt: skip
            if not policy.disable_scale_in:
                checks.append(
                    (f"{at}.scale_in_cooldown_s", policy.scale_in_cooldown_s,
                     "scale_in_cooldown_s", plan.scale_in_cooldown_s)
                )  # fmt: skip
        elif policy.role == "scale-in":
            checks += [
                (f"{at}.cooldown_s", policy.cooldown_s, "scale_in_cooldown_s",
                 plan.scale_in_cooldown_s),
                (f"{at}.alarm.threshold", policy.alarm.threshold, "scale_in_threshold",
                 plan.scale_in_threshold),
            ]  # fmt: skip
        elif burst is not None:
            checks += [
                (f"{at}.alarm.threshold", policy.alarm.threshold, "fleet.burst.threshold",
                 burst.threshold),
                (f"{at}.cooldown_s", policy.cooldown_s, "fleet.burst.cooldown_s", burst.cooldown_s),
            ]  # fmt: skip
    for where, deployed, name, stated in checks:
        if deployed != stated:
            return f"{where} {deployed} is not the plan's {name} {stated}"
    return None
