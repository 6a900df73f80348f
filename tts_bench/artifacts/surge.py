"""The surge artifact: open-loop Poisson runs against one bounded instance, beside the
birth–death model's prediction for the same rate and duration (SPEC §6 `surge_survival`).

Written as `surge-<model>-<transport>-<slug>.json` (`-emulated` through the local cloud) with its raw samples beside it; every
figure of a run recomputes from the samples whose intended send time lies in its span.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import (
    Field,
    NonNegativeFloat,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
    model_validator,
)

from tts_bench.artifacts.fingerprint import Fingerprint, file_slug
from tts_bench.artifacts.provenance import SCHEMA_VERSION, Provenance, Text
from tts_bench.strict import StrictModel

Share = Annotated[float, Field(ge=0, le=1)]


def surge_filename(fp: Fingerprint, provenance_kind: str = "measured") -> str:
    return f"surge-{fp.model}-{fp.transport.value}-{file_slug(fp, provenance_kind)}.json"


class SurgePrediction(StrictModel):
    """The birth–death model over the ladder's X(n), for the run's rate, duration and bound."""

    shed_share: Share = Field(description="refused arrivals ÷ arrivals, pooled over trials")
    reach_probability: Share = Field(description="P(occupancy reaches Q_max within the run)")
    mean_occupancy: NonNegativeFloat
    trials: PositiveInt
    seed: int


class OccupancySeries(StrictModel):
    """Admitted requests in flight at `step_s` intervals from the run's start: measured (client
    side, send to end of stream) and the model's mean over trials."""

    step_s: PositiveFloat
    measured: list[NonNegativeInt]
    model_mean: list[NonNegativeFloat]

    @model_validator(mode="after")
    def _same_length(self) -> OccupancySeries:
        if len(self.measured) != len(self.model_mean):
            raise ValueError("measured and model_mean must have one value per step")
        return self


class SurgeRun(StrictModel):
    """One open-loop run at one rate."""

    rate_rps: PositiveFloat
    duration_s: PositiveFloat
    seed: int
    start_epoch: float = Field(description="intended send times lie in [start, start + duration)")
    arrivals: NonNegativeInt
    admitted: NonNegativeInt
    shed: NonNegativeInt = Field(description="refused by the admission gate (503 queue_saturated)")
    errors: NonNegativeInt
    shed_share: Share
    ok: NonNegativeInt
    # Admitted, successful requests' TTFAB from their intended send time (no coordinated omission).
    ttfab_p95_ms: NonNegativeFloat | None
    ttfab_p99_ms: NonNegativeFloat | None
    send_ttfab_p95_ms: NonNegativeFloat | None = Field(
        description="the same from the actual send time, to show the sender's own lag"
    )
    max_send_lag_ms: NonNegativeFloat
    served_rps: NonNegativeFloat = Field(
        description="admitted requests completed before the run ended, per second of the run"
    )
    ladder_rps_at_occupancy: NonNegativeFloat = Field(
        description="the ladder's X(n) at the run's measured mean occupancy: what the model serves"
    )
    mean_occupancy: NonNegativeFloat
    max_occupancy: NonNegativeInt
    reached_q_max: bool
    prediction: SurgePrediction
    closed_loop_ttfab_p95_ms: NonNegativeFloat | None = Field(
        description="the ladder's p95 TTFAB interpolated at the measured mean occupancy"
    )
    occupancy: OccupancySeries

    @model_validator(mode="after")
    def _counts(self) -> SurgeRun:
        if self.admitted + self.shed != self.arrivals:
            raise ValueError("admitted + shed must equal arrivals")
        if self.ok + self.errors > self.admitted:
            raise ValueError("ok + errors exceed admitted")
        return self


class SurgeArtifact(StrictModel):
    artifact: Literal["surge"] = "surge"
    schema_version: Literal[1] = SCHEMA_VERSION
    fingerprint: Fingerprint | None
    q_max: PositiveInt = Field(
        description="the admission bound (MAX_QUEUE_DEPTH) = the ladder's Q_max"
    )
    qmax_path: Text
    qmax_sha256: Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]
    runs: list[SurgeRun] = Field(min_length=1)
    provenance: Provenance
