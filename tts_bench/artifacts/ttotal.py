"""The ttotal artifact: one scale-out's timed stages, its measured and planned totals, its events."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Literal

from pydantic import (
    Field,
    NonNegativeFloat,
    NonNegativeInt,
    PositiveFloat,
    model_validator,
)

from tts_bench.artifacts.fingerprint import Fingerprint
from tts_bench.artifacts.provenance import SCHEMA_VERSION, Provenance, kind_fits_fingerprint
from tts_bench.strict import StrictModel as _Strict

# Counted stages are each rounded for storage; their sum may drift from the total by this much
# per stage (the published run's stages sum to 260.1 s against a 260.2 s total).
STAGE_ROUNDING_S = 0.05


class Trigger(StrEnum):
    FORCE_DESIRED = "force-desired"  # UpdateEndpointWeightsAndCapacities +1, policy bypassed
    LOCAL_PROCESS = "local-process"  # a fresh server process started beside a loaded one
    ORGANIC = "organic"  # the deployed policy scaled out on the probe's own load


class Stage(_Strict):
    """One timed stage of a scale-out, from its own source of timestamps."""

    name: str = Field(min_length=1, description="'<from marker> -> <to marker>'")
    seconds: NonNegativeFloat
    measured: bool = Field(description="false when the figure is a bound, not a reading")
    reason: str | None = Field(default=None, description="why a bound stands in for a reading")
    counted: bool = Field(description="part of measured_total_s")

    @model_validator(mode="after")
    def _bound_has_reason(self) -> Stage:
        if not self.measured and not self.reason:
            raise ValueError(f"stage {self.name!r} is a bound (measured=false) and needs a reason")
        return self


class TimedPoint(_Strict):
    """One timestamp of a scale-out, from its own source (unix seconds)."""

    name: str = Field(min_length=1)
    epoch_s: float


class TtotalEvents(_Strict):
    """What a T_total's stages are computed from: when the probe's load was applied, each
    point in order, the clock skew tolerated between sources, and the note a stage carries."""

    load_applied_epoch_s: float
    points: list[TimedPoint] = Field(min_length=1)
    skew_tolerance_s: NonNegativeFloat
    reasons: dict[str, str] = Field(default_factory=dict, description="point name -> note")
    counted_from: str | None = Field(
        default=None,
        description="the point the counted stages start at (an organic detection's are not counted)",
    )


class Detection(_Strict):
    """An organic scale-out's detection: the lag measured from the load crossing the scale-out
    level to the desired count set (the stages between them), which policy's alarm acted, and
    the deploy shape it was measured under. A plan uses `lag_s` only when its own shape has the
    same structure and the lag is its target tracking's (`planning.deploy.detection_shape`)."""

    lag_s: NonNegativeFloat = Field(description="load_crossed -> desired_set, measured")
    modelled_s: NonNegativeFloat = Field(
        description="the acting alarm's datapoints × period + publication delay (aws_scaling)"
    )
    policy_role: str = Field(min_length=1, description="the deploy-shape role that scaled out")
    alarm: str = Field(min_length=1, description="the alarm that acted, as AWS names it")
    deploy_shape: str = Field(min_length=1, description="the deployed shape's structure")
    plan_id: str = Field(pattern=r"^[0-9a-f]{12}$", description="the plan that was deployed")
    load_factor: PositiveFloat = Field(description="the probe's load over the scale-out level")
    dips: NonNegativeInt = Field(
        default=0,
        description="datapoints back under the level between the first over and the alarm: "
        "each restarts the alarm's count (a load too near the level for the metric's noise)",
    )


class RecoveryBaseline(_Strict):
    """What recovery was judged against: the bound rung's p95 TTFAB from the ladder and, where
    the probe held that rung's users on one instance just before the scale-out, the p95 it
    measured then. The larger is the baseline: on a machine whose load rose since the ladder,
    recovery means back to the load it carried just before, not to a quieter hour's."""

    ladder_p95_ms: PositiveFloat = Field(description="the bound rung's p95 TTFAB in the ladder")
    remeasured_p95_ms: PositiveFloat | None = Field(
        default=None, description="the probe's p95 TTFAB just before desired_set; null: not used"
    )
    remeasured_requests: NonNegativeInt = Field(
        default=0, description="the probe's requests the re-measured p95 is over"
    )
    why_not_remeasured: str | None = Field(
        default=None, description="why the ladder's p95 alone is the baseline"
    )
    factor: PositiveFloat
    bound_ms: PositiveFloat = Field(description="factor × the larger of the two p95s")

    @model_validator(mode="after")
    def _bound_follows(self) -> RecoveryBaseline:
        if (self.remeasured_p95_ms is None) == (self.why_not_remeasured is None):
            raise ValueError("a baseline is re-measured or says why it is not, never both")
        baseline = max(self.ladder_p95_ms, self.remeasured_p95_ms or 0.0)
        if abs(self.bound_ms - self.factor * baseline) > 1e-6 * self.bound_ms:
            raise ValueError(f"bound_ms {self.bound_ms:g} is not {self.factor:g} × {baseline:g}")
        return self


class TtotalArtifact(_Strict):
    artifact: Literal["ttotal"] = "ttotal"
    schema_version: Literal[1] = SCHEMA_VERSION
    fingerprint: Fingerprint | None
    trigger: Trigger
    stages: list[Stage] = Field(min_length=1)
    measured_total_s: PositiveFloat
    policy_lag_bound_s: NonNegativeFloat = Field(
        description="metric period × evaluation periods + scale-out cooldown; not a stage"
    )
    planned_total_s: PositiveFloat
    recovery_rule: str | None = None
    recovery_baseline: RecoveryBaseline | None = Field(
        default=None, description="force-desired: the p95 recovery was judged against"
    )
    qmax_sha256: Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")] | None = Field(
        default=None, description="the ladder recovery was judged by"
    )
    detection: Detection | None = Field(
        default=None, description="organic only: the measured detection lag and its shape"
    )
    provenance: Provenance
    events: TtotalEvents | None = Field(
        default=None, description="the timestamps the stages were made from (`timed_stages`)"
    )

    @model_validator(mode="after")
    def _provenance_fits(self) -> TtotalArtifact:
        if problem := kind_fits_fingerprint(self.provenance, self.fingerprint):
            raise ValueError(problem)
        return self

    @model_validator(mode="after")
    def _organic_has_detection(self) -> TtotalArtifact:
        if (self.trigger is Trigger.ORGANIC) != (self.detection is not None):
            raise ValueError("detection: an organic ttotal records its detection, no other does")
        return self

    @model_validator(mode="after")
    def _totals_add_up(self) -> TtotalArtifact:
        counted = [s for s in self.stages if s.counted]
        total = sum(s.seconds for s in counted)
        if abs(total - self.measured_total_s) > STAGE_ROUNDING_S * len(counted) + 1e-9:
            raise ValueError(
                f"counted stages sum to {total:.3f} s but measured_total_s is "
                f"{self.measured_total_s:.3f} s"
            )
        expected = self.measured_total_s + self.policy_lag_bound_s
        if abs(self.planned_total_s - expected) > 1e-6:
            raise ValueError(
                f"planned_total_s {self.planned_total_s} != measured_total_s + policy_lag_bound_s "
                f"({expected:.3f})"
            )
        return self
