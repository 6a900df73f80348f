"""The reading of AWS a simulation or rehearsal ran under, as its artifact records it.

The fields are `planning.aws_semantics.AwsSemantics`'s (the open points of AWS's scaling), with
a short hash of them. Artifacts made before the variant sets carry none; `verify` says so.
"""

from __future__ import annotations

from pydantic import Field, NonNegativeFloat, NonNegativeInt, PositiveInt

from tts_bench.strict import StrictModel as _Strict


class AwsSemanticsRecord(_Strict):
    name: str = Field(min_length=1)
    high_resolution_tracking_period_s: PositiveInt
    tracking_low_datapoints: PositiveInt
    standard_publication_delay_s: NonNegativeInt
    refuse_while_updating: bool
    scale_in_updating_s: NonNegativeFloat
    action_repeat_s: PositiveInt
    sha256: str = Field(description="16 hex of the sha256 over the other fields, sorted JSON")
