"""The simulation artifact: policies side by side on simulated traffic, the files it read, and
the reading of AWS it ran under (`AwsSemanticsRecord`, which a rehearsal records too).

The record's fields are `planning.aws.semantics.AwsSemantics`'s (the open points of AWS's
scaling), with a short hash of them. Artifacts made before the variant sets carry none; `verify`
says so.
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

from tts_bench.artifacts.fingerprint import Fingerprint
from tts_bench.artifacts.provenance import SCHEMA_VERSION, Provenance, Text
from tts_bench.strict import StrictModel as _Strict


class InputFile(_Strict):
    """A file a simulation read, by path and content hash."""

    path: Text
    sha256: Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]


class PolicyOutcome(_Strict):
    """One policy's totals over one simulated traffic (`tts-bench simulate`)."""

    policy: str
    requests: NonNegativeInt
    shed: NonNegativeInt
    shed_share: NonNegativeFloat
    over_slo: NonNegativeInt
    over_slo_share: NonNegativeFloat
    instance_hours: NonNegativeFloat
    cost_usd: NonNegativeFloat | None
    peak_instances: NonNegativeInt


class SimulationInputs(_Strict):
    traffic: str = Field(description="the synthetic spec or the trace file's description")
    duration_s: PositiveFloat
    seed: int
    price_per_hour_usd: NonNegativeFloat | None
    model: Literal["fleet", "requests"]
    over_slo_rule: str
    plan_id: str
    files: dict[str, InputFile] = Field(description="plan, qmax, ttotal and the trace, if any")
    aws_semantics: AwsSemanticsRecord | None = Field(
        default=None, description="the reading of AWS's open points it ran under (none: older)"
    )


class SimulationArtifact(_Strict):
    artifact: Literal["simulation"] = "simulation"
    schema_version: Literal[1] = SCHEMA_VERSION
    fingerprint: Fingerprint | None
    policies: list[PolicyOutcome] = Field(min_length=1)
    inputs: SimulationInputs
    # The clairvoyant fleet on the same arrivals (docs/simulation.md); omitted when the fleet
    # rule gives no λ_out, and absent from simulations written before it.
    oracle_instance_hours: NonNegativeFloat | None = Field(
        default=None, exclude_if=lambda v: v is None
    )
    provenance: Provenance

    @model_validator(mode="after")
    def _simulated(self) -> SimulationArtifact:
        if self.provenance.kind != "simulated":
            raise ValueError("a simulation artifact's provenance is 'simulated'")
        return self


class AwsSemanticsRecord(_Strict):
    name: str = Field(min_length=1)
    high_resolution_tracking_period_s: PositiveInt
    tracking_low_datapoints: PositiveInt
    standard_publication_delay_s: NonNegativeInt
    refuse_while_updating: bool
    scale_in_updating_s: NonNegativeFloat
    action_repeat_s: PositiveInt
    sha256: str = Field(description="16 hex of the sha256 over the other fields, sorted JSON")
