"""What each step of `plan.derive_plan` hands on: the operator's request and the derived figures.

`plan` derives them, `findings` judges them; both import this module, neither the other's
internals.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, NonNegativeFloat, PositiveInt

from tts_bench.artifacts.cloudwatch import CloudWatchUnits
from tts_bench.artifacts.plan import DeployShape, Finding, FleetLevels, PlanInputs
from tts_bench.artifacts.qmax import QmaxArtifact
from tts_bench.errors import RefusalError
from tts_bench.planning.birth_death import DEFAULT_SEED, DEFAULT_TRIALS
from tts_bench.planning.curve import Curve

Rule = Literal["published", "fleet"]
DEFAULT_RULE: Rule = "fleet"
# Application Auto Scaling's MinCapacity and MaxCapacity are 32-bit integers.
MAX_CAPACITY = 2**31 - 1


class PlanRequest(BaseModel):
    """The operator's choices that, with the two artifacts, determine a plan."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    peak_rps: NonNegativeFloat
    trough_rps: NonNegativeFloat = 0.0
    slo_ms: float = Field(default=3000.0, gt=0)
    surge_ratio: float = 1.25
    min_floor: PositiveInt = 1
    allow_config_mismatch: bool = False
    rule: Rule = DEFAULT_RULE
    surge_trials: PositiveInt = DEFAULT_TRIALS
    surge_seed: int = DEFAULT_SEED


def request_of(inputs: PlanInputs, rule: Rule) -> PlanRequest:
    """The request a plan's recorded inputs stand for, under `rule`."""
    return PlanRequest(
        peak_rps=inputs.peak_rps,
        trough_rps=inputs.trough_rps,
        slo_ms=inputs.slo_ms,
        surge_ratio=inputs.surge_ratio,
        min_floor=inputs.min_floor,
        allow_config_mismatch=inputs.allow_config_mismatch,
        rule=rule,
    )


@dataclass(frozen=True)
class Basis:
    """The measured figures the arithmetic starts from, once the inputs are known usable."""

    h: float  # surge_ratio − 1
    q_max: int
    s_mean: float  # uncontended end-to-end latency, mean and p95 (s)
    s_p95: float
    c1_ttfab_p95_ms: float
    t_total_s: float  # planned: measured + lag bound, read from the artifact (or measured lag)
    launch_s: float  # measured: desired count set → serving
    measured_lag_s: float | None = None  # an organic ttotal's lag, when this plan may use it


@dataclass(frozen=True)
class Thresholds:
    """Where scaling happens, in client concurrency and in CloudWatch units, and its cooldowns."""

    c_scale_max: float
    c_scale_min: float
    w_max_s: float
    target_units: CloudWatchUnits
    scale_in_units: CloudWatchUnits
    target_ratio_from: str  # where each ratio came from, for the cw_ratio finding
    scale_in_ratio_from: str
    scaling_target_value: float
    scale_in_threshold: float
    scale_out_cooldown_s: int
    scale_in_cooldown_s: int


@dataclass(frozen=True)
class Fleet:
    """Fleet bounds from measured throughput, and the published formula's figure beside them."""

    throughput_at_trigger_rps: float  # the per-instance rate the fleet is sized at
    min_instances: int
    max_instances: int
    naive_max_instances: int | None  # None when there is no throughput to size from


@dataclass(frozen=True)
class Alarm:
    """The FirstChunkLatency p95 alarm threshold and the rule that chose it."""

    threshold_ms: int
    rule: str
    why: str


@dataclass(frozen=True)
class PlanSteps:
    """Everything the findings judge: the inputs and each step's result."""

    request: PlanRequest
    qmax: QmaxArtifact
    pairing: Finding
    basis: Basis
    thresholds: Thresholds
    fleet: Fleet
    alarm: Alarm
    x_curve: Curve
    shape: DeployShape
    levels: FleetLevels | None = None
    detection: Finding | None = None  # whether an organic ttotal's measured lag was used
    confidence: Finding | None = None  # qmax_confidence: only a ladder with intervals has one


def refuse_beyond_max_capacity(request: PlanRequest, rate_rps: float) -> None:
    """A peak or trough that needs more instances at `rate_rps` each than a 32-bit MaxCapacity."""
    for flag, rps in (("--peak-rps", request.peak_rps), ("--trough-rps", request.trough_rps)):
        if not rps / rate_rps <= MAX_CAPACITY:  # also catches an overflow to inf
            raise RefusalError(
                f"{flag} {rps:g} needs about {rps / rate_rps:.3g} instances at "
                f"{rate_rps:.3g} rps each, beyond Application Auto Scaling's MaxCapacity "
                f"({MAX_CAPACITY}, a 32-bit integer) and any account's quota; check {flag}"
            )
