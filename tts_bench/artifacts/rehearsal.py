"""The rehearsal artifact: a plan's policy on an endpoint, and the same arrivals replayed in the
simulator, side by side with their agreement (`tts-bench rehearse`, SPEC §13).

Times are seconds of the service's clock from the rehearsal's start (a compressed local cloud's
virtual time: minute for minute the fleet it models). Every figure of the rehearsed run was read
from its own source: the client's samples, DescribeEndpoint polled, CloudWatch's datapoints,
DescribeAlarmHistory, DescribeScalingActivities.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, NonNegativeFloat, NonNegativeInt, PositiveFloat, model_validator

from tts_bench.artifacts.fingerprint import Fingerprint, file_slug
from tts_bench.artifacts.provenance import SCHEMA_VERSION, Provenance
from tts_bench.artifacts.simulation import AwsSemanticsRecord, InputFile
from tts_bench.strict import StrictModel as _Strict

WINDOW_S = 10


class Window(_Strict):
    """One 10 s window of a run, ending at `t_s`."""

    t_s: NonNegativeFloat
    offered: NonNegativeInt
    admitted: NonNegativeInt = Field(description="not refused at admission (served or failed)")
    shed: NonNegativeInt = Field(description="refused at admission: 503 queue_saturated")
    errors: NonNegativeInt = 0
    desired: NonNegativeInt | None = None
    in_service: NonNegativeInt | None = None
    ttfab_p95_wall_ms: NonNegativeFloat | None = Field(
        default=None, description="admitted requests' p95 TTFAB, wall clock (× S of the fleet's)"
    )


class Point(_Strict):
    """A datapoint: its period's start and its value."""

    t_s: float
    value: float


class AlarmSeries(_Strict):
    """One deployed alarm and the datapoints it evaluates, in its metric, statistic and period."""

    name: str
    role: str
    kind: Literal["high", "low", "step"]
    metric: str
    statistic: str
    period_s: PositiveFloat
    threshold: float
    comparison: str
    points: list[Point]


class StateChange(_Strict):
    t_s: float
    alarm: str
    old: str
    new: str


class ScaleAction(_Strict):
    """A change of the desired count, with the detection lag of a scale-out that opened its
    alarm's episode: from the start of the first breaching datapoint's period to the action."""

    t_s: float
    before: int
    after: int
    role: str | None
    alarm: str | None
    cause: str = ""
    lag_s: NonNegativeFloat | None = Field(
        default=None, description="none: a scale-in, or a repeat within one ALARM episode"
    )


class RunTotals(_Strict):
    requests: NonNegativeInt
    shed: NonNegativeInt
    shed_share: NonNegativeFloat
    errors: NonNegativeInt = 0
    instance_hours: NonNegativeFloat = Field(
        description="desired instances over the run, as billed"
    )
    peak_desired: NonNegativeInt


class Run(_Strict):
    source: Literal["rehearsed", "simulated"]
    totals: RunTotals
    windows: list[Window]
    alarms: list[AlarmSeries]
    state_changes: list[StateChange] = Field(
        default_factory=list, description="rehearsed: DescribeAlarmHistory"
    )
    actions: list[ScaleAction]


class Replay(_Strict):
    """One more replay of the same arrivals (another seed of the simulator's service draws)."""

    seed: int
    shed_share: NonNegativeFloat
    instance_hours: NonNegativeFloat
    desired_agreement: NonNegativeFloat


class DesiredAgreement(_Strict):
    minutes: NonNegativeInt = Field(description="whole minutes after the first scale-out")
    agreeing: NonNegativeInt = Field(description="... where the primary replay agrees")
    share: NonNegativeFloat = Field(description="agreeing / minutes: the primary replay")
    shift_s: NonNegativeFloat = Field(description="the shift allowed: one metric period")
    required: float = 0.95
    replays_agreeing: NonNegativeInt = Field(description="replays agreeing on `required` minutes")
    replays_share: NonNegativeFloat = Field(description="replays_agreeing / replays")
    replay_quantile: NonNegativeFloat = Field(
        description="5 % quantile of each replay's share of the other replays it agrees with"
    )
    passed: bool = Field(
        description="pairwise (the published rule): replays_share ≥ replay_quantile, as good as "
        "one more replay; band (the fleet rule): within_replays ≥ required × minutes"
    )
    verdict: Literal["pairwise", "band"] = Field(
        "pairwise", description="which of the two rules `passed` is (older artifacts: pairwise)"
    )
    within_replays: NonNegativeInt | None = Field(
        None, description="minutes where the rehearsed count lies within the replays' band"
    )
    band: list[tuple[float, float, float]] = Field(
        default_factory=list,
        description="(minute's t_s, lowest, highest) desired count of the replays, a period's "
        "shift either side, over the compared minutes",
    )


class ShedAgreement(_Strict):
    rehearsed: NonNegativeFloat
    simulated_mean: NonNegativeFloat
    simulated_sd: NonNegativeFloat
    tolerance: NonNegativeFloat = Field(
        description="3 × sd × sqrt(1 + 1/R) of R replays, plus one request's share"
    )
    passed: bool
    verdict: Literal["spread", "range"] = Field(
        "spread",
        description="spread (the published rule): within the tolerance of the replays' mean; "
        "range (the fleet rule): within the replays' 5–95 % range, widened by one request's share",
    )
    replays_low: NonNegativeFloat | None = Field(None, description="the replays' 5 % quantile")
    replays_high: NonNegativeFloat | None = Field(None, description="the replays' 95 % quantile")


class LagAgreement(_Strict):
    role: str
    modelled_s: NonNegativeFloat = Field(description="datapoints × period + publication delay")
    rehearsed_s: list[NonNegativeFloat]
    simulated_s: list[NonNegativeFloat]


class Agreement(_Strict):
    desired: DesiredAgreement
    shed: ShedAgreement
    lags: list[LagAgreement]
    scaled_out_before_shedding: bool | None = Field(
        description="rehearsed: the first scale-out came before the first shed (none: neither)"
    )


class RehearsalInputs(_Strict):
    traffic: str
    duration_s: PositiveFloat
    seed: int
    arrivals: NonNegativeInt
    endpoint: str
    variant: str
    rate_scale: PositiveFloat = Field(description="S: curve instances serve X(n) ÷ S (1 on AWS)")
    time_scale: PositiveFloat = Field(description="K: the service's seconds per wall second")
    request_weight: PositiveFloat = Field(description="S × K: fleet requests per request sent")
    min_instances: NonNegativeInt
    max_instances: NonNegativeInt
    initial_instances: NonNegativeInt
    start_delay_s: NonNegativeFloat = Field(description="the replay's action → InService")
    plan_id: str
    plan_rule: str
    files: dict[str, InputFile]
    replays: NonNegativeInt
    price_per_hour_usd: NonNegativeFloat | None = None
    aws_semantics: AwsSemanticsRecord | None = Field(
        default=None, description="the reading of AWS's open points it ran under (none: older)"
    )


class UnscaledPrediction(_Strict):
    """The fleet model on the fleet's own traffic and curve: what the real fleet would do."""

    requests: NonNegativeInt
    shed_share: NonNegativeFloat
    instance_hours: NonNegativeFloat
    peak_instances: NonNegativeInt
    cost_usd: NonNegativeFloat | None = None


class RehearsalArtifact(_Strict):
    artifact: Literal["rehearsal"] = "rehearsal"
    schema_version: Literal[1] = SCHEMA_VERSION
    fingerprint: Fingerprint | None
    inputs: RehearsalInputs
    rehearsed: Run
    simulated: Run
    replays: list[Replay]
    unscaled: UnscaledPrediction | None = None
    agreement: Agreement
    provenance: Provenance

    @model_validator(mode="after")
    def _sources(self) -> RehearsalArtifact:
        if self.rehearsed.source != "rehearsed" or self.simulated.source != "simulated":
            raise ValueError("rehearsed and simulated runs must say which they are")
        return self


def rehearsal_filename(artifact: RehearsalArtifact, digest: str) -> str:
    """`rehearsal-<model>-<rule>-<slug>-<8 hex of the inputs>.json`: one file per distinct run."""
    fp, rule = artifact.fingerprint, artifact.inputs.plan_rule
    kind = artifact.provenance.kind
    stem = f"rehearsal-{fp.model}-{rule}-{file_slug(fp, kind)}" if fp else f"rehearsal-{rule}"
    return f"{stem}-{digest[:8]}.json"
