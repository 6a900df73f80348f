"""The qmax artifact: a ladder's rungs, refinement and verification rungs, and Q_max.

The coarse ladder's point Q_max is the highest rung whose p95 met the SLO, bracketed only when
a higher rung was measured and failed (`ladder_outcome`); with a confidence level, Q_max's
interval follows from the rungs' verdicts (`q_max_interval_of`). Which of them the artifact's
`q_max` is, and so what a plan deploys, is its `q_max_basis` (`q_max_on_basis`).
"""

from __future__ import annotations

from typing import Annotated, Final, Literal

from pydantic import (
    Field,
    NonNegativeFloat,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
    model_validator,
)

from tts_bench.artifacts.fingerprint import Fingerprint
from tts_bench.artifacts.provenance import SCHEMA_VERSION, Provenance, kind_fits_fingerprint
from tts_bench.artifacts.rungs import (
    LadderSettings,
    Rung,
    UncontendedService,
    VerificationRung,
    rung_meets_slo,
    rung_verdict,
)
from tts_bench.strict import StrictModel as _Strict


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


# What the artifact's `q_max` is (issue 38). "conservative": the low end of Q_max's interval,
# every rung up to it passed on its p95 interval (with --repeat the lowest repeat's); "point":
# the highest rung whose point p95 met the SLO, refined by the bisection, chosen with
# `qmax --q-max-basis point` for rungs too short to decide. A plan records it, and the gate
# refuses a point plan for a real image. Absent: a ladder written before the choice existed.
QmaxBasis = Literal["conservative", "point"]
DEFAULT_Q_MAX_BASIS: Final[QmaxBasis] = "conservative"  # what `qmax` records unless told


def q_max_on_basis(
    basis: QmaxBasis | None,
    coarse: list[Rung],
    interval: QmaxInterval | None,
    repeats: QmaxRepeats | None,
) -> int | None:
    """The artifact's `q_max` for its basis: the coarse point Q_max unless conservative."""
    if basis != "conservative":
        return ladder_outcome(coarse)[0]
    if repeats is not None:
        return repeats.q_max
    return None if interval is None else interval.low


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


class QmaxRepeats(_Strict):
    """--repeat R (issue 38): the refinement bisected R times from the same coarse bracket, the
    repeats' probes taking turns. The artifact's `refinement` is the first repeat; `others` the
    rest. Each repeat's conservative Q_max is the low end of the Q_max interval over the coarse
    rungs and its own probes (its refined Q_max when the ladder has no confidence level)."""

    others: list[Refinement] = Field(min_length=1)
    q_max_each: list[PositiveInt] = Field(description="each repeat's refined Q_max, in order")
    conservative_each: list[PositiveInt | None] = Field(
        description="each repeat's conservative Q_max; null when its c=1 did not pass"
    )
    q_max: PositiveInt | None = Field(
        description="the lowest conservative Q_max of the repeats (what a plan uses); null when "
        "any repeat's is unknown"
    )
    spread: NonNegativeInt = Field(description="max − min of q_max_each, in users")


def repeat_conservative(
    coarse: list[Rung], refinement: Refinement, level: float | None
) -> int | None:
    """One repeat's conservative Q_max: its interval's low end, or its refined Q_max without a
    confidence level."""
    if level is None:
        return refinement.q_max
    judged = sorted([*coarse, *(p.rung for p in refinement.probes)], key=lambda r: r.concurrency)
    return q_max_interval_of(judged, level).low


def repeats_of(
    coarse: list[Rung], refinements: list[Refinement], level: float | None
) -> QmaxRepeats | None:
    """The repeats' record from each repeat's refinement (the first first); None for one."""
    if len(refinements) < 2:
        return None
    each = [r.q_max for r in refinements]
    conservative = [repeat_conservative(coarse, r, level) for r in refinements]
    known = [c for c in conservative if c is not None]
    return QmaxRepeats(
        others=refinements[1:],
        q_max_each=each,
        conservative_each=conservative,
        q_max=min(known) if len(known) == len(conservative) else None,
        spread=max(each) - min(each),
    )


class QmaxArtifact(_Strict):
    artifact: Literal["qmax"] = "qmax"
    schema_version: Literal[1] = SCHEMA_VERSION
    fingerprint: Fingerprint | None
    slo_ms: PositiveFloat
    q_max: PositiveInt | None = Field(
        description="the Q_max a plan deploys, on `q_max_basis`; null when no rung passed"
    )
    q_max_basis: QmaxBasis | None = Field(
        default=None,
        description="conservative: the Q_max interval's low end (the lowest repeat's with "
        "--repeat); point: the coarse ladder's highest rung whose p95 met the SLO; absent: the "
        "ladder predates the choice, and q_max is the point value",
    )
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
    repeats: QmaxRepeats | None = Field(
        default=None,
        description="--repeat: every repeat's Q_max and the spread; absent for one bisection",
    )
    fleet_level_skipped: bool = Field(
        default=False,
        description="qmax --no-fleet-level: the verification held no fleet rule's level, so "
        "InvocationsPerInstance's ratio is unmeasured unless a ladder rung held two whole "
        "minutes; absent when the level was held",
    )
    provenance: Provenance

    @model_serializer(mode="wrap")
    def _absent_repeats(self, handler: SerializerFunctionWrapHandler) -> dict[str, object]:
        # One bisection writes the artifact exactly as before --repeat existed.
        data = handler(self)
        if self.q_max_basis is None:
            data.pop("q_max_basis", None)
        if self.repeats is None:
            data.pop("repeats", None)
        if not self.fleet_level_skipped:
            data.pop("fleet_level_skipped", None)
        return data

    @model_validator(mode="after")
    def _provenance_fits(self) -> QmaxArtifact:
        if self.provenance.curve_modelled:
            raise ValueError(
                "provenance.curve_modelled: a ladder never measures curve instances (they serve "
                "a ladder's own curve)"
            )
        if problem := kind_fits_fingerprint(self.provenance, self.fingerprint):
            raise ValueError(problem)
        if self.fleet_level_skipped and any(v.role == "fleet" for v in self.verification):
            raise ValueError("fleet_level_skipped, yet a verification rung holds the fleet level")
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
        judged = [*self.rungs, *(p.rung for f in self.refinements for p in f.probes)]
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
        if self.q_max_basis is not None and (self.ladder is None or self.ladder.confidence is None):
            raise ValueError(
                f"q_max_basis {self.q_max_basis}: a basis is chosen only by a ladder with a "
                "confidence level (ladder.confidence)"
            )
        _, bracketed = ladder_outcome(self.rungs)
        if self.bracketed != bracketed:
            raise ValueError(
                f"bracketed={self.bracketed} disagrees with the rungs (which give {bracketed})"
            )
        for refinement in self.refinements:
            self._check_refinement(refinement)
        if self.repeats is not None:
            if self.refinement is None:
                raise ValueError("repeats without a refinement: only a refined ladder repeats")
            level = self.ladder.confidence if self.ladder else None
            expected = repeats_of(self.rungs, self.refinements, level)
            if self.repeats != expected:
                raise ValueError(
                    f"repeats {self.repeats.model_dump(exclude={'others'})} disagree with the "
                    f"repeats' probes (which give "
                    f"{None if expected is None else expected.model_dump(exclude={'others'})})"
                )
        q_max = q_max_on_basis(self.q_max_basis, self.rungs, self.q_max_interval, self.repeats)
        if self.q_max != q_max:
            raise ValueError(
                f"q_max={self.q_max} disagrees with the rungs (which give {q_max} on the "
                f"{self.q_max_basis or 'point'} basis)"
            )
        return self

    @property
    def refinements(self) -> list[Refinement]:
        """Every repeat's refinement, the first first (none without refinement)."""
        if self.refinement is None:
            return []
        return [self.refinement, *(self.repeats.others if self.repeats else [])]

    def _check_refinement(self, refinement: Refinement) -> None:
        """Refined Q_max = the highest pass, the bound above = the lowest failure, both inside
        the coarse bracket."""
        failing, coarse = self.coarse_failing_above, self.coarse_q_max
        if failing is None or coarse is None:
            raise ValueError("only a bracketed ladder can be refined")
        levels = [p.rung.concurrency for p in refinement.probes]
        if any(not coarse < n < failing for n in levels) or len(set(levels)) != len(levels):
            raise ValueError(
                f"refinement probes {levels} must be distinct and inside ({coarse}, {failing})"
            )
        judged = [
            p.rung for p in refinement.probes if p.rung.usable and p.rung.verdict != "undecided"
        ]
        q_max = max([coarse, *(r.concurrency for r in judged if r.meets_slo)])
        above = min([failing, *(r.concurrency for r in judged if not r.meets_slo)])
        if (refinement.q_max, refinement.failing_above) != (q_max, above):
            raise ValueError(
                f"refinement says Q_max {refinement.q_max} below {refinement.failing_above}; "
                f"its probes give {q_max} below {above}"
            )

    @property
    def coarse_q_max(self) -> int | None:
        """The coarse ladder's point Q_max: its highest rung below the first failure."""
        return ladder_outcome(self.rungs)[0]

    @property
    def coarse_failing_above(self) -> int | None:
        """The coarse rung that failed above Q_max; None unless bracketed."""
        if not self.bracketed:
            return None
        return next(r.concurrency for r in self.rungs if r.usable and not r.meets_slo)

    @property
    def refined_q_max(self) -> int | None:
        """The Q_max a plan uses: `q_max` on the conservative basis; else with --repeat the
        lowest repeat's conservative value, else the refinement's when there is one, else the
        coarse ladder's."""
        if self.q_max_basis == "conservative":
            return self.q_max
        if self.repeats is not None:
            return self.repeats.q_max
        return self.refinement.q_max if self.refinement is not None else self.q_max

    @property
    def q_max_resolution(self) -> int | None:
        """Users between Q_max and the failure above it; None when nothing failed above."""
        if self.refinement is not None:
            return self.refinement.q_max_resolution
        coarse, failing = self.coarse_q_max, self.coarse_failing_above
        return None if coarse is None or failing is None else failing - coarse

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
