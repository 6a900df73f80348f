"""One rung of the ladder: its settings, its figures, and the verdict the SLO gives it.

The rules a rung is judged by (`rung_meets_slo`, `rung_verdict`) live beside the models, so
the ladder and the schema's checks share them.
"""

from __future__ import annotations

from typing import Annotated, Final, Literal

from pydantic import (
    Field,
    NonNegativeFloat,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
    field_validator,
    model_validator,
)

from tts_bench.artifacts.cloudwatch import LADDER_RATIO_STAT, CloudWatchStat, ratio_keys
from tts_bench.strict import StrictModel as _Strict

# Percentiles interpolated in floating point may disagree in the last bits; order is checked
# with this much slack.
_ULP: Final = 1 + 1e-12

# A rung fails the SLO when more than this share of its window's requests failed (a failed
# request has no TTFAB to hide behind); the ladder and the schema's check share it.
MAX_FAILURE_FRACTION: Final = 0.01


def rung_meets_slo(
    ttfab_p95_ms: float | None,
    failed: int,
    completed: int,
    slo_ms: float,
    underrun_share: float | None = None,
    underrun_slo_share: float | None = None,
) -> bool:
    """SPEC §4: p95 TTFAB at or under the SLO, and at most 1 % of the window's requests failed;
    with an underrun SLO (`--underrun-slo`), also at most that share of streams stalled."""
    stalled_too_often = (
        underrun_slo_share is not None and (underrun_share or 0.0) > underrun_slo_share
    )
    return (
        ttfab_p95_ms is not None
        and ttfab_p95_ms <= slo_ms
        and failed <= MAX_FAILURE_FRACTION * completed
        and not stalled_too_often
    )


RungVerdict = Literal["pass", "fail", "undecided"]


def rung_verdict(
    lower_ms: float | None,
    upper_ms: float | None,
    failed: int,
    completed: int,
    slo_ms: float,
    underrun_share: float | None = None,
    underrun_slo_share: float | None = None,
) -> RungVerdict:
    """Issue 38's three-way verdict on the p95 TTFAB's interval: pass when its upper end is
    within the SLO, fail when its lower end is above it, else undecided. The failure share and
    the stall rule are counts, judged as `rung_meets_slo` judges them; a window in which no
    request finished fails."""
    # A p95 of 0 meets any SLO: this asks `rung_meets_slo` only about its count rules.
    counts_fail = not rung_meets_slo(
        0.0, failed, completed, slo_ms, underrun_share, underrun_slo_share
    )
    if completed == 0 or counts_fail:
        return "fail"
    if lower_ms is not None and lower_ms > slo_ms:
        return "fail"
    if upper_ms is not None and upper_ms <= slo_ms:
        return "pass"
    return "undecided"


class UncontendedService(_Strict):
    """End-to-end latency at the c=1 rung, seconds (S and S_p95 of SPEC §6)."""

    mean: PositiveFloat
    p95: PositiveFloat


class LadderSettings(_Strict):
    """The schedule: each rung is held `hold_s` plus its extension (`extended_s`, 0 when none),
    measured over the trailing `measure_s` of its hold; rungs are `idle_s` apart."""

    rungs: list[PositiveInt]
    hold_s: PositiveFloat
    measure_s: PositiveFloat
    idle_s: NonNegativeFloat
    start_epoch: float | None = Field(
        default=None, description="unix time the first rung began, the raw samples' clock"
    )
    underrun_slo_share: Annotated[float, Field(gt=0, le=1)] | None = Field(
        default=None, description="a rung whose underrun_share exceeds this fails"
    )
    # --max-hold-s (measure.ladder.stability): an unstable rung's hold grows up to this.
    max_hold_s: PositiveFloat | None = Field(
        default=None, description="longest hold an unstable rung was allowed; null: no extension"
    )
    unstable_max_hold_s: PositiveFloat | None = Field(
        default=None,
        description="where a rung was held longer in advance (the verification's fleet level), "
        "the longest hold an unstable rung was allowed; null: max_hold_s",
    )
    extended_s: list[NonNegativeFloat] = Field(
        default_factory=list,
        description="seconds added to rung i's hold while its window was unstable; a rung "
        "past the list's end (every rung of an artifact without it) was held hold_s",
    )
    widened_s: list[NonNegativeFloat] = Field(
        default_factory=list,
        description="seconds by which rung i's window reaches back beyond measure_s: an "
        "undecided rung held longer pools its requests (at most its extension)",
    )
    confidence: Annotated[float, Field(ge=0.9, le=0.999)] | None = Field(
        default=None,
        description="level of every rung's p95 TTFAB interval (--confidence); null: the "
        "ladder predates the intervals",
    )
    # A compressed local cloud stamps CloudWatch's points on its own clock; the join maps the
    # rungs' wall-clock windows onto it (`cloudwatch_join.cloud_window`), and `verify` again.
    time_scale: PositiveFloat = Field(
        default=1.0,
        description="the clock CloudWatch's timestamps were read on: cloud = time_origin_s + "
        "time_scale × (wall − time_origin_s); 1 on AWS (the wall clock)",
    )
    time_origin_s: float = Field(
        default=0.0, description="unix seconds where that clock equals the wall clock"
    )

    @model_validator(mode="after")
    def _extensions(self) -> LadderSettings:
        if len(self.extended_s) > len(self.rungs):
            raise ValueError("extended_s has more entries than the ladder has rungs")
        if any(self.extended_s) and self.max_hold_s is None:
            raise ValueError("a rung was extended but the ladder records no max_hold_s")
        if self.max_hold_s is not None and self.max_hold_s < self.hold_s:
            raise ValueError("max_hold_s is below hold_s")
        if self.unstable_max_hold_s is not None and not (
            self.max_hold_s is not None
            and self.hold_s <= self.unstable_max_hold_s <= self.max_hold_s
        ):
            raise ValueError("unstable_max_hold_s must lie between hold_s and max_hold_s")
        if self.max_hold_s is not None and any(
            self.hold_s + e > self.max_hold_s * (1 + 1e-9) for e in self.extended_s
        ):
            raise ValueError("a rung's extended hold exceeds max_hold_s")
        if len(self.widened_s) > len(self.rungs) or any(
            w > self.rung_hold_s(i) - self.hold_s + 1e-9 for i, w in enumerate(self.widened_s)
        ):
            raise ValueError("widened_s: a rung's window widens only by its extension")
        return self

    def rung_hold_s(self, index: int) -> float:
        """How long rung `index` was held: `hold_s` plus its extension."""
        extra = self.extended_s[index] if index < len(self.extended_s) else 0.0
        return self.hold_s + extra

    def measure_window(self, index: int) -> tuple[float, float]:
        """Rung `index`'s measure window in unix time (needs `start_epoch`)."""
        if self.start_epoch is None:
            raise ValueError("this ladder did not record when it started")
        start = self.start_epoch + sum(self.rung_hold_s(i) + self.idle_s for i in range(index))
        hold_end = start + self.rung_hold_s(index)
        widened = self.widened_s[index] if index < len(self.widened_s) else 0.0
        return hold_end - self.measure_s - widened, hold_end


class P95Interval(_Strict):
    """Where a rung's true p95 TTFAB lies at `level`, from its window's order statistics
    (`measure.ladder.quantile_interval`); an end null is unbounded (too few requests to give it)."""

    level: Annotated[float, Field(ge=0.9, le=0.999)]
    samples: NonNegativeInt = Field(description="the ok requests' TTFABs it is over")
    effective_samples: NonNegativeFloat = Field(
        description="what they were worth as independent requests (closed-loop neighbours "
        "share their wait); the ranks are taken for this many"
    )
    lower_ms: NonNegativeFloat | None
    upper_ms: NonNegativeFloat | None

    @model_validator(mode="after")
    def _ordered(self) -> P95Interval:
        if None not in (self.lower_ms, self.upper_ms) and self.lower_ms > self.upper_ms:  # type: ignore[operator]
            raise ValueError(f"lower_ms {self.lower_ms:g} is above upper_ms {self.upper_ms:g}")
        return self


class Rung(_Strict):
    """One step of the closed-loop ladder, computed from raw samples in its measure window."""

    concurrency: PositiveInt
    achieved_rps: NonNegativeFloat
    # Percentiles are null only when the window holds no successful request.
    ttfab_p50_ms: NonNegativeFloat | None
    ttfab_p95_ms: NonNegativeFloat | None
    ttfab_p99_ms: NonNegativeFloat | None
    latency_mean_ms: NonNegativeFloat | None
    latency_p95_ms: NonNegativeFloat | None
    completed: NonNegativeInt
    ok: NonNegativeInt
    rejected: NonNegativeInt
    errors: NonNegativeInt
    client_mean_in_flight: NonNegativeFloat
    cloudwatch_ratio: PositiveFloat | None = Field(
        description="CloudWatch ConcurrentRequestsPerModel Maximum (10 s) / client mean; null when not measured"
    )
    # Further statistics CloudWatch was read with in the same window (``Average/60s``: ratio).
    cloudwatch_ratios: dict[str, PositiveFloat] = Field(default_factory=dict)
    meets_slo: bool
    usable: bool
    unusable_reason: str | None = None
    client_cpu_percent: NonNegativeFloat | None = None
    # Server-side FirstChunkLatency p95 (queue wait excluded); a batching engine's alarm uses it.
    server_first_chunk_p95_ms: NonNegativeFloat | None = None
    # Playback (measure.playback): stream duration / audio duration, and listener stalls.
    rtf_p50: NonNegativeFloat | None = None
    rtf_p95: NonNegativeFloat | None = None
    underrun_share: Annotated[float, Field(ge=0, le=1)] | None = Field(
        default=None, description="share of successful requests whose playback stalled"
    )
    stall_ms_p95: NonNegativeFloat | None = Field(
        default=None, description="p95 over successful requests of their total stall time"
    )
    # Stability (measure.ladder.stability): p95 TTFAB of each third of the window; null: not judged.
    sub_window_ttfab_p95_ms: list[NonNegativeFloat | None] | None = None
    stable: bool | None = None
    # The p95's confidence interval and issue 38's verdict on it; null: the ladder predates them.
    ttfab_p95_interval: P95Interval | None = None
    verdict: RungVerdict | None = None

    @field_validator("cloudwatch_ratios")
    @classmethod
    def _stat_keys(cls, ratios: dict[str, float]) -> dict[str, float]:
        return ratio_keys(ratios)

    @property
    def passes(self) -> bool:
        return self.usable and self.meets_slo

    def ratio(self, stat: CloudWatchStat) -> float | None:
        """CloudWatch's ratio at this rung for `stat`, or None when it was not read that way."""
        if stat == LADDER_RATIO_STAT and self.cloudwatch_ratio is not None:
            return self.cloudwatch_ratio
        return self.cloudwatch_ratios.get(stat.key)

    @model_validator(mode="after")
    def _consistent(self) -> Rung:
        if self.ok + self.rejected + self.errors != self.completed:
            raise ValueError(
                f"c={self.concurrency}: ok {self.ok} + rejected {self.rejected} + errors "
                f"{self.errors} is not completed {self.completed} (each finished request is one)"
            )
        if self.usable == bool(self.unusable_reason):
            raise ValueError(
                f"c={self.concurrency}: usable {self.usable} disagrees with unusable_reason "
                "(a reason exactly when unusable)"
            )
        ttfab = [self.ttfab_p50_ms, self.ttfab_p95_ms, self.ttfab_p99_ms]
        if len({v is None for v in ttfab}) > 1 or (None not in ttfab and self.ok == 0):
            raise ValueError(
                f"c={self.concurrency}: ttfab_p50_ms, ttfab_p95_ms and ttfab_p99_ms are all "
                "null or all set, and set only when a request was ok"
            )
        if None not in ttfab and not ttfab[0] <= ttfab[1] * _ULP <= ttfab[2] * _ULP**2:  # type: ignore[operator]
            raise ValueError(
                f"c={self.concurrency}: ttfab_p50_ms {ttfab[0]:g} <= ttfab_p95_ms {ttfab[1]:g} "
                f"<= ttfab_p99_ms {ttfab[2]:g} does not hold"
            )
        if (self.ttfab_p95_interval is None) != (self.verdict is None):
            raise ValueError(
                f"c={self.concurrency}: ttfab_p95_interval and verdict are both set or both null"
            )
        return self


# Where a verification rung's window came from (see `VerificationRung.source`).
VerificationSource = Literal["held", "ladder-rung"]


class VerificationRung(_Strict):
    """A rung held after the ladder where a threshold sits, to measure CloudWatch's ratio there.

    `role` says which threshold: `scale_out` at C_scale_max, `scale_in` at C_scale_min, for
    `surge_ratio`, rounded to whole users; `fleet` at the fleet rule's level (one instance's
    occupancy at λ_out), held for whole minutes of InvocationsPerInstance. Its ratios are
    CloudWatch's reading of ConcurrentRequestsPerModel, one per statistic and period
    (``Maximum/10s``), over the client's mean in-flight in the same window; a fleet rung's also
    InvocationsPerInstance's minute Sums over the client's requests sent in the same minutes
    (``InvocationsPerInstance:Sum/60s``). `source` says which window: `held` after the
    ladder, or `ladder-rung` when a usable coarse rung had held these users already under the
    same freeze (the same measurement; holding it again would only cost time).
    """

    role: Literal["scale_out", "scale_in", "fleet"]
    source: VerificationSource = "held"
    surge_ratio: float = Field(gt=1, lt=1.5)
    concurrency: PositiveInt
    achieved_rps: NonNegativeFloat
    ttfab_p95_ms: NonNegativeFloat | None
    client_mean_in_flight: PositiveFloat
    cloudwatch_ratios: dict[str, PositiveFloat] = Field(min_length=1)
    usable: bool
    unusable_reason: str | None = None

    @field_validator("cloudwatch_ratios")
    @classmethod
    def _stat_keys(cls, ratios: dict[str, float]) -> dict[str, float]:
        return ratio_keys(ratios)

    @model_validator(mode="after")
    def _reason(self) -> VerificationRung:
        if not self.usable and not self.unusable_reason:
            raise ValueError("an unusable verification rung needs unusable_reason")
        return self
