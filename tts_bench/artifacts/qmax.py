"""The three measurement artifacts (qmax, ttotal, plan): schemas, loading and atomic writes.

Every artifact is JSON validated by a pydantic model with ``extra="forbid"``, carries its
provenance and fingerprint, and is named after the fingerprint's slug (see `fingerprint`).
Loading a broken file raises `ArtifactError` with one line naming the file and the field;
writing never overwrites an artifact of another fingerprint.
"""

from __future__ import annotations

import hashlib
import json
import os
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, Final, Literal, TypeVar

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    NonNegativeFloat,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
    ValidationError,
    field_validator,
    model_validator,
)

from tts_bench import __version__
from tts_bench.artifacts.atomic_file import write_atomically
from tts_bench.artifacts.fingerprint import Fingerprint, Transport
from tts_bench.artifacts.out_paths import usable_folder
from tts_bench.artifacts.semantics_record import AwsSemanticsRecord
from tts_bench.errors import ArtifactError
from tts_bench.strict import StrictModel as _Strict
from tts_bench.strict import UnrepresentableNumber, strict_loads

SCHEMA_VERSION = 1

# Counted stages are each rounded for storage; their sum may drift from the total by this much
# per stage (the published run's stages sum to 260.1 s against a 260.2 s total).
STAGE_ROUNDING_S = 0.05

__all__ = [
    "PLAN_SCHEMA_VERSION",
    "SCHEMA_VERSION",
    "CloudWatchStat",
    "CloudWatchUnits",
    "Finding",
    "Fingerprint",
    "P95Interval",
    "PlanArtifact",
    "PlanInputs",
    "PolicyOutcome",
    "Provenance",
    "ProvenanceKind",
    "QmaxArtifact",
    "QmaxInterval",
    "Refinement",
    "RefinementProbe",
    "Rung",
    "SimulationArtifact",
    "SourceArtifact",
    "Stage",
    "TimedPoint",
    "Transport",
    "Trigger",
    "TtotalArtifact",
    "TtotalEvents",
    "UncontendedService",
    "Verdict",
    "VerificationRung",
    "load_artifact",
    "sha256_file",
    "write_artifact",
]


ProvenanceKind = Literal["measured", "reference", "simulated", "emulated"]


def _encodable(value: object) -> object:
    """A file name or command line as UTF-8 can hold it: an undecodable byte of a file name
    (a lone surrogate in Python) is kept as its escape, never a refusal of the whole artifact."""
    return (
        value.encode("utf-8", "backslashreplace").decode("utf-8")
        if isinstance(value, str)
        else value
    )


# Descriptive text that quotes paths and command lines.
Text = Annotated[str, BeforeValidator(_encodable)]


class Provenance(_Strict):
    """Where an artifact came from: measured live, rebuilt from a reference, simulated, or
    emulated (measured through the local cloud: real clients and containers, no real AWS)."""

    kind: ProvenanceKind
    created_at: datetime
    source: Text = Field(min_length=1, description="what was measured: endpoint, host or file")
    tool: Text = f"tts-bench {__version__}"
    command: Text | None = None
    notes: Text | None = None
    curve_modelled: bool = Field(
        default=False,
        description="measured on the local cloud's curve instances: service times from a "
        "ladder's curve, no synthesis (always with kind emulated)",
    )

    @classmethod
    def now(cls, kind: ProvenanceKind, source: str, **kw: Any):
        return cls(
            kind=kind, created_at=datetime.now(UTC).replace(microsecond=0), source=source, **kw
        )


def kind_fits_fingerprint(provenance: Provenance, fingerprint: Fingerprint | None) -> str | None:
    """Emulated is the local cloud, which speaks only SageMaker's transports; a SageMaker
    transport on a `local-` instance type (this machine's hardware) is never measured or
    reference."""
    if fingerprint is None:
        return None
    sagemaker = not fingerprint.transport.is_local
    if provenance.kind == "emulated" and not sagemaker:
        return (
            f"provenance.kind: emulated means measured through the local cloud, which serves "
            f"only SageMaker transports, not {fingerprint.transport.value}"
        )
    if (
        provenance.kind in ("measured", "reference")
        and sagemaker
        and fingerprint.instance_type.startswith("local-")
    ):
        return (
            f"provenance.kind: {provenance.kind}, but {fingerprint.transport.value} on "
            f"{fingerprint.instance_type} is the local cloud: emulated"
        )
    return None


# --------------------------------------------------------------------------- CloudWatch units

# The SageMaker metrics (AWS/SageMaker) a plan may deploy scaling on, and their statistics.
MetricName = Literal["ConcurrentRequestsPerModel", "InvocationsPerInstance"]
Statistic = Literal["Maximum", "Average", "Minimum", "Sum"]


class CloudWatchStat(BaseModel):
    """A CloudWatch metric read as one statistic over a period: the units a threshold is in.

    ConcurrentRequestsPerModel read as its 10 s Maximum is another number than its 60 s
    Average for the same load, so a ratio, and a threshold converted by it, belongs to one.
    Keys name the metric unless it is ConcurrentRequestsPerModel (``Maximum/10s``,
    ``InvocationsPerInstance:Sum/60s``).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    metric: MetricName = "ConcurrentRequestsPerModel"
    statistic: Statistic
    period_s: PositiveInt

    @property
    def key(self) -> str:
        """How ratios are keyed in artifacts, e.g. ``Maximum/10s``."""
        stat = f"{self.statistic}/{self.period_s}s"
        return stat if self.metric == "ConcurrentRequestsPerModel" else f"{self.metric}:{stat}"

    @classmethod
    def parse(cls, key: str) -> CloudWatchStat:
        metric, _, stat = key.rpartition(":")
        statistic, _, period = stat.partition("/")
        if not period.endswith("s") or not period[:-1].isdigit():
            raise ValueError(f"a statistic key looks like Maximum/10s, got {key!r}")
        return cls(
            metric=metric or "ConcurrentRequestsPerModel",  # type: ignore[arg-type]
            statistic=statistic,  # type: ignore[arg-type]
            period_s=int(period[:-1]),
        )


# What the ladder's per-rung `cloudwatch_ratio` was always measured against (SPEC §4).
LADDER_RATIO_STAT: Final = CloudWatchStat(statistic="Maximum", period_s=10)
# What the fleet rule deploys on, joined per rung in `cloudwatch_ratios` under its key.
INVOCATIONS_RATIO_STAT: Final = CloudWatchStat(
    metric="InvocationsPerInstance", statistic="Sum", period_s=60
)


def _ratio_keys(ratios: dict[str, float]) -> dict[str, float]:
    for key in ratios:
        CloudWatchStat.parse(key)
    return ratios


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


# --------------------------------------------------------------------------- qmax


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

    @model_validator(mode="after")
    def _extensions(self) -> LadderSettings:
        if len(self.extended_s) > len(self.rungs):
            raise ValueError("extended_s has more entries than the ladder has rungs")
        if any(self.extended_s) and self.max_hold_s is None:
            raise ValueError("a rung was extended but the ladder records no max_hold_s")
        if self.max_hold_s is not None and self.max_hold_s < self.hold_s:
            raise ValueError("max_hold_s is below hold_s")
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
        return _ratio_keys(ratios)

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
        return _ratio_keys(ratios)

    @model_validator(mode="after")
    def _reason(self) -> VerificationRung:
        if not self.usable and not self.unusable_reason:
            raise ValueError("an unusable verification rung needs unusable_reason")
        return self


def ladder_outcome(rungs: list[Rung]) -> tuple[int | None, bool]:
    """(Q_max, bracketed): the highest passing rung below the first failure.

    A rung that meets the SLO but is unusable (client-bound) is no pass: the ladder cannot
    vouch for anything at or above it, so it ends the ladder unbracketed.
    """
    q_max: int | None = None
    for rung in rungs:
        if not rung.usable:
            return q_max, False
        if not rung.meets_slo:
            return q_max, True
        q_max = rung.concurrency
    return q_max, False


class QmaxInterval(_Strict):
    """Q_max as the rungs' verdicts know it (issue 38): `low`, the conservative Q_max, is the
    highest rung that passed with every rung below it passed; `high` the highest rung below the
    first failure, undecided ones counted; `failing_above` that failure (null: none measured, so
    Q_max may lie above `high`). Coarse and refinement rungs together."""

    level: Annotated[float, Field(ge=0.9, le=0.999)]
    low: PositiveInt | None = Field(description="conservative Q_max; null when c=1 did not pass")
    high: PositiveInt | None = Field(description="the largest concurrency not failed")
    failing_above: PositiveInt | None
    undecided: list[PositiveInt] = Field(description="rungs whose verdict stayed undecided")


def q_max_interval_of(rungs: list[Rung], level: float) -> QmaxInterval:
    """The interval from judged rungs (ascending). An unusable rung ends both walks: the ladder
    vouches for nothing at or above a rung the client could not hold."""
    low: int | None = None
    high: int | None = None
    failing_above: int | None = None
    chain_passed = True
    for rung in rungs:
        if not rung.usable:
            break
        if rung.verdict == "fail":
            failing_above = rung.concurrency
            break
        high = rung.concurrency
        chain_passed = chain_passed and rung.verdict == "pass"
        if chain_passed:
            low = rung.concurrency
    undecided = [r.concurrency for r in rungs if r.usable and r.verdict == "undecided"]
    return QmaxInterval(
        level=level, low=low, high=high, failing_above=failing_above, undecided=undecided
    )


class RefinementProbe(_Strict):
    """One bisection rung, held with the ladder's hold (plus any extension), and where its
    window lay."""

    rung: Rung
    window_start_epoch: float
    window_end_epoch: float
    extended_s: NonNegativeFloat = Field(
        default=0.0, description="seconds added to the probe's hold while it was unstable"
    )

    @model_validator(mode="after")
    def _window(self) -> RefinementProbe:
        if not self.window_end_epoch > self.window_start_epoch:
            raise ValueError("a probe's window must end after it starts")
        return self


class Refinement(_Strict):
    """Q_max bisected between the coarse ladder's last pass and first failure
    (measure.ladder.refine)."""

    resolution_pct: Annotated[float, Field(gt=0, lt=100)]
    probes: list[RefinementProbe]
    q_max: PositiveInt = Field(description="the highest passing level, coarse or probe")
    failing_above: PositiveInt = Field(description="the lowest failing level, coarse or probe")
    q_max_resolution: PositiveInt = Field(
        description="failing_above − q_max: Q_max lies in [q_max, failing_above − 1]"
    )
    # "undecided": a probe's p95 interval still straddled the SLO after its hold (issue 38); the
    # bisection narrows only on decided probes, so it ends there.
    ended_by: Literal["resolution", "client-bound", "interrupted", "undecided"]

    @model_validator(mode="after")
    def _consistent(self) -> Refinement:
        if self.q_max_resolution != self.failing_above - self.q_max:
            raise ValueError("q_max_resolution must equal failing_above − q_max")
        return self


class QmaxArtifact(_Strict):
    artifact: Literal["qmax"] = "qmax"
    schema_version: Literal[1] = SCHEMA_VERSION
    fingerprint: Fingerprint | None
    slo_ms: PositiveFloat
    q_max: PositiveInt | None = Field(description="highest passing rung; null when c=1 fails")
    bracketed: bool = Field(description="a higher rung was measured and failed")
    uncontended_service_s: UncontendedService | None
    rungs: list[Rung] = Field(min_length=1)
    ladder: LadderSettings | None = None
    refinement: Refinement | None = Field(
        default=None, description="bisection after a bracketed ladder; its rungs kept apart"
    )
    verification: list[VerificationRung] = Field(
        default_factory=list,
        description="rungs held after the ladder at C_scale_max and C_scale_min (not ladder rungs)",
    )
    verification_ladder: LadderSettings | None = Field(
        default=None,
        description="the schedule the held verification rungs ran on, so their windows are "
        "known; null when none was held",
    )
    q_max_interval: QmaxInterval | None = Field(
        default=None,
        description="Q_max as the p95 intervals know it; null: the ladder predates them",
    )
    provenance: Provenance

    @model_validator(mode="after")
    def _provenance_fits(self) -> QmaxArtifact:
        if self.provenance.curve_modelled:
            raise ValueError(
                "provenance.curve_modelled: a ladder never measures curve instances (they serve "
                "a ladder's own curve)"
            )
        if problem := kind_fits_fingerprint(self.provenance, self.fingerprint):
            raise ValueError(problem)
        return self

    @field_validator("rungs")
    @classmethod
    def _ascending(cls, rungs: list[Rung]) -> list[Rung]:
        levels = [r.concurrency for r in rungs]
        if levels != sorted(set(levels)):
            raise ValueError(f"rung concurrencies must be strictly ascending, got {levels}")
        return rungs

    @model_validator(mode="after")
    def _verdicts_match_figures(self) -> QmaxArtifact:
        # A hand-edited "pass" must not load: the verdict follows from the rung's own figures.
        for r in self.rungs:
            if not r.usable:
                continue
            underrun_slo = self.ladder.underrun_slo_share if self.ladder else None
            meets = rung_meets_slo(
                r.ttfab_p95_ms, r.rejected + r.errors, r.completed, self.slo_ms,
                r.underrun_share, underrun_slo,
            )  # fmt: skip
            if r.meets_slo != meets:
                p95 = "none" if r.ttfab_p95_ms is None else f"{r.ttfab_p95_ms:g} ms"
                raise ValueError(
                    f"rung {r.concurrency}: meets_slo={r.meets_slo} disagrees with its p95 TTFAB "
                    f"({p95}), {r.rejected + r.errors} failed of {r.completed} and the SLO "
                    f"{self.slo_ms:g} ms"
                )
        return self

    @model_validator(mode="after")
    def _intervals_match_figures(self) -> QmaxArtifact:
        # Each verdict follows from its interval, each interval is at the ladder's level, and
        # the Q_max interval from the verdicts: a hand-edited "pass" must not load.
        level = self.ladder.confidence if self.ladder else None
        underrun_slo = self.ladder.underrun_slo_share if self.ladder else None
        judged = (
            [*self.rungs, *(p.rung for p in self.refinement.probes)]
            if self.refinement
            else self.rungs
        )
        for r in judged:
            interval = r.ttfab_p95_interval
            if interval is None:
                if level is not None:
                    raise ValueError(f"rung {r.concurrency}: no p95 interval at the ladder's level")
                continue
            if interval.level != level:
                raise ValueError(
                    f"rung {r.concurrency}: its p95 interval is at level {interval.level:g}, "
                    f"the ladder's confidence is {level}"
                )
            verdict = rung_verdict(
                interval.lower_ms, interval.upper_ms, r.rejected + r.errors, r.completed,
                self.slo_ms, r.underrun_share, underrun_slo,
            )  # fmt: skip
            if r.verdict != verdict:
                raise ValueError(
                    f"rung {r.concurrency}: verdict {r.verdict} disagrees with its p95 interval "
                    f"and the SLO {self.slo_ms:g} ms (which give {verdict})"
                )
        expected = None if level is None else q_max_interval_of(self.curve_rungs, level)
        if self.q_max_interval != expected:
            raise ValueError(
                f"q_max_interval {self.q_max_interval} disagrees with the rungs' verdicts "
                f"(which give {expected})"
            )
        return self

    @model_validator(mode="after")
    def _rungs_follow_the_schedule(self) -> QmaxArtifact:
        if self.ladder is not None:
            held = [r.concurrency for r in self.rungs]
            if held != self.ladder.rungs[: len(held)]:
                raise ValueError(
                    f"rungs: concurrencies {held} are not the start of the ladder's schedule "
                    f"{self.ladder.rungs}"
                )
        return self

    @model_validator(mode="after")
    def _outcome_matches_rungs(self) -> QmaxArtifact:
        q_max, bracketed = ladder_outcome(self.rungs)
        if (self.q_max, self.bracketed) != (q_max, bracketed):
            raise ValueError(
                f"q_max={self.q_max}, bracketed={self.bracketed} disagree with the rungs "
                f"(which give q_max={q_max}, bracketed={bracketed})"
            )
        if self.refinement is not None:
            self._check_refinement(self.refinement)
        return self

    def _check_refinement(self, refinement: Refinement) -> None:
        """Refined Q_max = the highest pass, the bound above = the lowest failure, both inside
        the coarse bracket."""
        if not self.bracketed or self.q_max is None:
            raise ValueError("only a bracketed ladder can be refined")
        failing = next(r.concurrency for r in self.rungs if r.usable and not r.meets_slo)
        levels = [p.rung.concurrency for p in refinement.probes]
        if any(not self.q_max < n < failing for n in levels) or len(set(levels)) != len(levels):
            raise ValueError(
                f"refinement probes {levels} must be distinct and inside ({self.q_max}, {failing})"
            )
        judged = [
            p.rung for p in refinement.probes if p.rung.usable and p.rung.verdict != "undecided"
        ]
        q_max = max([self.q_max, *(r.concurrency for r in judged if r.meets_slo)])
        above = min([failing, *(r.concurrency for r in judged if not r.meets_slo)])
        if (refinement.q_max, refinement.failing_above) != (q_max, above):
            raise ValueError(
                f"refinement says Q_max {refinement.q_max} below {refinement.failing_above}; "
                f"its probes give {q_max} below {above}"
            )

    @property
    def refined_q_max(self) -> int | None:
        """The Q_max a plan uses: the refinement's when there is one, else the coarse ladder's."""
        return self.refinement.q_max if self.refinement is not None else self.q_max

    @property
    def q_max_resolution(self) -> int | None:
        """Users between Q_max and the failure above it; None when nothing failed above."""
        if self.refinement is not None:
            return self.refinement.q_max_resolution
        if not self.bracketed or self.q_max is None:
            return None
        failing = next(r.concurrency for r in self.rungs if r.usable and not r.meets_slo)
        return failing - self.q_max

    @property
    def curve_rungs(self) -> list[Rung]:
        """Coarse and refinement rungs together, by concurrency (the measured curve X(N))."""
        probes = [p.rung for p in self.refinement.probes] if self.refinement else []
        return sorted([*self.rungs, *probes], key=lambda r: r.concurrency)

    def q_max_rung(self) -> Rung | None:
        """The rung the refined Q_max rests on."""
        level = self.refined_q_max
        return next((r for r in self.curve_rungs if r.concurrency == level), None)

    def rung(self, concurrency: int) -> Rung | None:
        return next((r for r in self.rungs if r.concurrency == concurrency), None)


# --------------------------------------------------------------------------- ttotal


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


# --------------------------------------------------------------------------- plan


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


class CloudWatchUnits(_Strict):
    """The units one threshold is deployed in: the metric, statistic and period its alarm
    evaluates, and the CloudWatch/client ratio that converted it, with the rule that chose it."""

    metric: MetricName = "ConcurrentRequestsPerModel"
    statistic: Statistic
    period_s: PositiveInt
    cw_ratio: PositiveFloat
    ratio_rule: Literal[
        "verification-rung",  # measured by a verification rung held at this point
        "ladder-rung",  # a ladder rung sits exactly at this point
        "smaller-bracketing",  # the smaller ratio of the two rungs either side
        "nearest-rung",  # beyond the measured rungs: the nearest one's
        "smallest-rung",  # a count per request: the smallest ratio any rung measured
        "by-definition",  # AWS defines the metric as the client's figure (a reference run)
        "local-no-cloudwatch",  # a local transport has no CloudWatch: 1.0 by construction
        "unmeasured",  # a SageMaker transport without a measured ratio: a stop
    ]

    @property
    def stat(self) -> CloudWatchStat:
        return CloudWatchStat(metric=self.metric, statistic=self.statistic, period_s=self.period_s)

    def of(self, client_figure: float) -> float:
        """A client-side figure (concurrency, or requests per period) in these units: times
        the ratio, rounded to 9 places (SPEC §6's float-noise rule)."""
        return round(client_figure * self.cw_ratio, 9)


# --------------------------------------------------------------------------- deploy shape

PLAN_SCHEMA_VERSION: Final = 2
PlanRule = Literal["published", "fleet"]
Comparison = Literal[
    "GreaterThanThreshold",
    "GreaterThanOrEqualToThreshold",
    "LessThanThreshold",
    "LessThanOrEqualToThreshold",
]


class AlarmSpec(_Strict):
    """A CloudWatch alarm on one SageMaker metric of the variant (EndpointName, VariantName)."""

    metric: MetricName
    statistic: Statistic
    period_s: PositiveInt
    evaluation_periods: PositiveInt
    datapoints_to_alarm: PositiveInt
    comparison: Comparison
    threshold: NonNegativeFloat
    treat_missing_data: Literal["missing", "breaching", "notBreaching", "ignore"]

    @model_validator(mode="after")
    def _m_of_n(self) -> AlarmSpec:
        if self.datapoints_to_alarm > self.evaluation_periods:
            raise ValueError("datapoints_to_alarm exceeds evaluation_periods")
        return self


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


class SeedCheck(_Strict):
    seed: int
    rules: list[RuleFigures] = Field(min_length=1)


class TrafficCheck(_Strict):
    """`plan --traffic`: both rules' plans simulated over the same days. Never changes a
    deployed number; a mean shed share above the budget makes the plan `stop`."""

    traffic: str
    trace_sha256: Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")] | None = None
    duration_s: PositiveFloat
    shed_budget: float = Field(gt=0, lt=1)
    seeds: list[SeedCheck] = Field(min_length=1)
    mean: list[RuleFigures] = Field(min_length=1)

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
        if self.scale_in_threshold >= self.scaling_target_value and not (
            order is not None and order.verdict is Verdict.STOP
        ):
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


# --------------------------------------------------------------------------- simulation


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
    provenance: Provenance

    @model_validator(mode="after")
    def _simulated(self) -> SimulationArtifact:
        if self.provenance.kind != "simulated":
            raise ValueError("a simulation artifact's provenance is 'simulated'")
        return self


# --------------------------------------------------------------------------- files

A = TypeVar("A", QmaxArtifact, TtotalArtifact, PlanArtifact, SimulationArtifact)
ARTIFACT_MODELS: dict[str, type[BaseModel]] = {
    "qmax": QmaxArtifact,
    "ttotal": TtotalArtifact,
    "plan": PlanArtifact,
    "simulation": SimulationArtifact,
}


def _describe(error: ValidationError) -> str:
    first = error.errors()[0]
    loc = ".".join(str(p) for p in first["loc"]) or "(top level)"
    msg = first["msg"].removeprefix("Value error, ")
    more = error.error_count() - 1
    return f"{loc}: {msg}" + (f" (and {more} more problem{'s' * (more > 1)})" if more else "")


def parse_artifact_json(raw: str, path: Path) -> Any:
    """JSON text as Python values, or `ArtifactError` of one line: never NaN or Infinity,
    never an integer too long to convert, never a RecursionError from deep nesting."""
    try:
        return strict_loads(raw)
    except json.JSONDecodeError as exc:
        raise ArtifactError(
            f"{path}: not JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})"
        ) from None
    except RecursionError:
        raise ArtifactError(f"{path}: nested too deeply to be an artifact") from None
    except (UnrepresentableNumber, ValueError) as exc:
        raise ArtifactError(f"{path}: {exc}") from None


def load_artifact(path: str | os.PathLike[str], model: type[A]) -> A:
    """Read and validate one artifact; any problem is an `ArtifactError` of one line."""
    path = Path(path)
    try:
        raw = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ArtifactError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ArtifactError(f"{path}: cannot read: {exc}") from None
    data = parse_artifact_json(raw, path)
    kind = model.model_fields["artifact"].default
    if isinstance(data, dict) and data.get("artifact") not in (None, kind):
        raise ArtifactError(
            f"{path}: artifact: this is a {data['artifact']!r} artifact, expected {kind!r}"
        )
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise ArtifactError(f"{path}: {_describe(exc)}") from None


def load_any(path: str | os.PathLike[str]) -> QmaxArtifact | TtotalArtifact | PlanArtifact:
    """Load an artifact of whichever kind its `artifact` key names."""
    path = Path(path)
    try:
        kind = json.loads(path.read_text(encoding="utf-8")).get("artifact")
    except (OSError, ValueError, AttributeError, RecursionError):
        kind = None
    if kind not in ARTIFACT_MODELS:
        # Let the qmax loader produce the precise one-line complaint.
        kind = kind if kind in ARTIFACT_MODELS else "qmax"
    return load_artifact(path, ARTIFACT_MODELS[kind])  # type: ignore[type-var]


def dump_json(artifact: BaseModel) -> str:
    return artifact.model_dump_json(indent=2) + "\n"


def write_artifact(artifact: A, directory: str | os.PathLike[str], filename: str) -> Path:
    """Atomically write `artifact` as `directory/filename`.

    Overwrites an earlier artifact of the same fingerprint (a re-run); refuses to replace one
    of another fingerprint, or a file it cannot read, so nothing measured is ever lost.
    """
    directory = usable_folder(directory)
    target = directory / filename
    if target.exists():
        try:
            existing = load_artifact(target, type(artifact))
        except ArtifactError as exc:
            raise ArtifactError(
                f"{target}: exists and cannot be read back ({exc}); move it aside, nothing was written"
            ) from None
        if _is_emulated(artifact) != _is_emulated(existing):
            raise ArtifactError(
                f"{target}: holds a {existing.provenance.kind} artifact and this one is "
                f"{artifact.provenance.kind}; they never replace each other, nothing was written"
            )
        if existing.fingerprint != artifact.fingerprint:
            raise ArtifactError(
                f"{target}: holds an artifact of another fingerprint; pass another --out "
                "directory or move it aside, nothing was written"
            )
    try:
        write_atomically(target, dump_json(artifact).encode("utf-8"))
    except OSError as exc:
        raise ArtifactError(
            f"{target}: cannot write ({exc.strerror or exc}); nothing was written"
        ) from None
    return target


def _is_emulated(artifact: QmaxArtifact | TtotalArtifact | PlanArtifact) -> bool:
    return artifact.provenance.kind == "emulated"


def sha256_file(path: str | os.PathLike[str]) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()
