"""A qmax artifact recomputed from its raw data with the ladder's own code
(`measure.ladder.statistics`).

From the samples (`….samples.csv.gz`) and the raw record (`….raw.json`: CPU readings and the
CloudWatch datapoints read) every figure of every coarse rung, refinement probe and verification
rung is recomputed, then Q_max, bracketing and the uncontended service time; the result is
compared field by field with the artifact (`differences`). Inputs are taken as recorded: the
fingerprint (checked by the file's name), the SLO, the ladder's schedule and start, the
refinement's windows, the verification's surge ratio and schedule. Figures rounded for storage
(CloudWatch ratios, to 3 places) agree within that rounding.

A reference ladder is accepted only as a pinned file; a measured or emulated one without its
samples is refused; a legacy ladder (pinned in `pins`) is checked against what it holds.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

from pydantic import ValidationError

from tts_bench.artifacts.cloudwatch import INVOCATIONS_RATIO_STAT, LADDER_RATIO_STAT
from tts_bench.artifacts.fingerprint import qmax_filename
from tts_bench.artifacts.qmax import (
    QmaxArtifact,
    QmaxInterval,
    QmaxRepeats,
    Refinement,
    ladder_outcome,
    q_max_interval_of,
    q_max_on_basis,
    repeats_of,
)
from tts_bench.artifacts.rungs import LadderSettings, Rung
from tts_bench.custody.differences import FLOAT_TOLERANCE, first_difference
from tts_bench.custody.outcome import Checked, CustodyError, check_name
from tts_bench.custody.pins import LEGACY_QMAX_SHA256
from tts_bench.custody.references import check_reference
from tts_bench.errors import ArtifactError
from tts_bench.measure.ladder.live.cloudwatch_join import (
    MetricPoint,
    invocation_ratios_for,
    ratios_for,
)
from tts_bench.measure.ladder.live.verification import (
    all_levels,
    held_by_the_ladder,
    verification_from_runs,
    verification_levels,
)
from tts_bench.measure.ladder.raw_record import QmaxRaw, raw_path, read_raw
from tts_bench.measure.ladder.schedule import LadderSchedule
from tts_bench.measure.ladder.statistics import (
    CpuReading,
    client_cpu_percent,
    ladder_rungs,
    rung_from_window,
    uncontended_service,
)
from tts_bench.measure.samples import Sample, read_samples, samples_path

# CloudWatch ratios are stored rounded to 3 places: a recomputation agrees within that.
RATIO_TOLERANCE: Final = (0.0, 0.0011)
# Legacy ladders' stability figures, null where the code that made them had none.
STABILITY_FIELDS: Final = ("stable", "sub_window_ttfab_p95_ms")


def _figures_first(recorded: dict[str, Any]) -> dict[str, Any]:
    """The rungs before what follows from them (Q_max, the uncontended service time), so an
    edited figure is named rather than its consequence."""
    first = ("rungs", "refinement", "repeats", "verification")
    return {**{k: recorded[k] for k in first if k in recorded}, **recorded}


def tolerance(path: str) -> tuple[float, float]:
    return RATIO_TOLERANCE if "cloudwatch_ratio" in path else FLOAT_TOLERANCE


def check_qmax(path: Path, qmax: QmaxArtifact, sha256: str) -> Checked:
    """The ladder against its raw data; a `CustodyError` naming the first differing field."""
    if qmax.provenance.kind == "reference":
        return check_reference(path, qmax, sha256)
    # A --curve-check ladder is simulated but measured all the same: its samples are checked.
    unsampled = qmax.provenance.kind == "simulated" and not samples_path(path).is_file()
    if unsampled or qmax.fingerprint is None:
        raise CustodyError(
            path,
            f"provenance.kind is {qmax.provenance.kind}"
            + ("" if qmax.fingerprint else " and fingerprint is null")
            + ": only a ladder with its samples can be checked",
        )
    check_name(path, qmax_filename(qmax.fingerprint, qmax.provenance.kind))
    legacy = LEGACY_QMAX_SHA256.get(sha256)
    samples, raw = _raw_data(path)
    if raw is not None and raw.fingerprint != qmax.fingerprint:
        found = first_difference(
            qmax.fingerprint.model_dump(mode="json"),
            raw.fingerprint.model_dump(mode="json"),
            path="fingerprint",
        )
        raise CustodyError(path, found.describe("as the target reported it") if found else "")
    expected = recompute(path, qmax, samples, raw)
    recorded = qmax.model_dump(mode="json")
    if raw is None:
        _keep_unrecorded_stability(recorded, expected)
    found = first_difference(_figures_first(recorded), expected, tolerance=tolerance)
    if raw is None and legacy is None:
        without = f"; without it, {found.describe('recomputed')}" if found else ""
        raise CustodyError(
            path,
            f"{raw_path(path).name} is missing (the fingerprint the target reported, its CPU "
            "readings and CloudWatch reads): only the pinned legacy ladders may lack it, and "
            "this file's sha256 is none of theirs (an edit of a legacy file's fingerprint or "
            f"provenance shows only so); restore it, or measure again{without}",
        )
    if found is not None:
        raise CustodyError(path, found.describe("recomputed from its raw samples"))
    probes = sum(len(r.probes) for r in qmax.refinements)
    how = (
        f"{len(qmax.rungs)} rungs, {probes} probes and {len(qmax.verification)} verification "
        f"rungs recomputed from {len(samples):,} samples"
    )
    notes: tuple[str, ...] = ()
    if legacy is not None:
        notes = (
            f"legacy ({legacy}): measured before CPU readings were kept, so each rung's "
            "client_cpu_percent is taken as recorded; a stability figure it left null is unjudged",
        )
    if raw is not None and raw.cloudwatch:
        how += ", CloudWatch ratios from the reads kept"
    return Checked(path, f"qmax {qmax.provenance.kind}", how, notes)


def _raw_data(path: Path) -> tuple[list[Sample], QmaxRaw | None]:
    """The samples (required) and the raw record (None when missing: a legacy ladder's)."""
    where = samples_path(path)
    if not where.is_file():
        raise CustodyError(
            path,
            f"{where.name} is missing: a measured or emulated ladder is checked against its raw "
            "samples; restore it beside the artifact, or measure again",
        )
    try:
        samples = read_samples(where)
        raw = read_raw(raw_path(path)) if raw_path(path).is_file() else None
    except ArtifactError as exc:
        raise CustodyError(path, f"its raw data cannot be read: {exc}") from None
    return samples, raw


def recompute(
    path: Path, qmax: QmaxArtifact, samples: Sequence[Sample], raw: QmaxRaw | None
) -> dict[str, Any]:
    """The artifact again from its raw data (as JSON values): everything but its inputs."""
    ladder = qmax.ladder
    if ladder is None or ladder.start_epoch is None:
        raise CustodyError(path, "ladder.start_epoch: not recorded, so no rung's window is known")
    cpu = raw.cpu_readings() if raw is not None else None
    rungs = [
        _rung(samples, cpu, qmax, rung, ladder.measure_window(i))
        for i, rung in enumerate(qmax.rungs)
    ]
    _no_rung_left_out(path, samples, ladder, rungs)
    expected = qmax.model_dump(mode="json")
    _, bracketed = ladder_outcome(rungs)
    uncontended = uncontended_service(rungs)
    expected.update(
        rungs=[r.model_dump(mode="json") for r in rungs],
        bracketed=bracketed,
        uncontended_service_s=uncontended.model_dump(mode="json") if uncontended else None,
    )
    if qmax.refinement is not None:
        for probe, again in zip(
            qmax.refinement.probes, expected["refinement"]["probes"], strict=True
        ):
            window = (probe.window_start_epoch, probe.window_end_epoch)
            again["rung"] = _rung(samples, cpu, qmax, probe.rung, window).model_dump(mode="json")
    if qmax.repeats is not None:
        for other, again_other in zip(
            qmax.repeats.others, expected["repeats"]["others"], strict=True
        ):
            for probe, again in zip(other.probes, again_other["probes"], strict=True):
                window = (probe.window_start_epoch, probe.window_end_epoch)
                rung = _rung(samples, cpu, qmax, probe.rung, window)
                again["rung"] = rung.model_dump(mode="json")
        expected["repeats"] = _repeats(ladder, rungs, expected)
    expected["q_max_interval"] = _q_max_interval(ladder, rungs, expected.get("refinement"))
    interval, repeats = expected["q_max_interval"], expected.get("repeats")
    expected["q_max"] = q_max_on_basis(
        qmax.q_max_basis,
        rungs,
        None if interval is None else QmaxInterval.model_validate(interval),
        None if repeats is None else QmaxRepeats.model_validate(repeats),
    )
    joined = _joined(path, expected, raw, samples)
    joined["verification"] = _verification(qmax, joined, samples, cpu, raw)
    return joined


def _rung(
    samples: Sequence[Sample],
    cpu: list[CpuReading] | None,
    qmax: QmaxArtifact,
    recorded: Rung,
    window: tuple[float, float],
) -> Rung:
    """The rung from its window, judged with the CPU readings kept (or, for a legacy ladder,
    the CPU share it recorded)."""
    share = client_cpu_percent(cpu, *window) if cpu is not None else recorded.client_cpu_percent
    underrun = qmax.ladder.underrun_slo_share if qmax.ladder else None
    level = qmax.ladder.confidence if qmax.ladder else None
    return rung_from_window(
        samples, recorded.concurrency, window, qmax.slo_ms, underrun, share, level
    )


def _q_max_interval(
    ladder: LadderSettings, rungs: list[Rung], refinement: dict[str, Any] | None
) -> dict[str, Any] | None:
    """Q_max's interval from the recomputed verdicts, coarse and probe; none without a level."""
    if ladder.confidence is None:
        return None
    probes = [Rung.model_validate(p["rung"]) for p in refinement["probes"]] if refinement else []
    judged = sorted([*rungs, *probes], key=lambda r: r.concurrency)
    return q_max_interval_of(judged, ladder.confidence).model_dump(mode="json")


def _repeats(
    ladder: LadderSettings, rungs: list[Rung], expected: dict[str, Any]
) -> dict[str, Any] | None:
    """--repeat's record (each repeat's conservative Q_max, the lowest, the spread) from the
    recomputed probes."""
    refinements = [
        Refinement.model_validate(r)
        for r in [expected["refinement"], *expected["repeats"]["others"]]
    ]
    repeats = repeats_of(rungs, refinements, ladder.confidence)
    return None if repeats is None else repeats.model_dump(mode="json")


def _no_rung_left_out(
    path: Path, samples: Sequence[Sample], ladder: LadderSettings, rungs: Sequence[Rung]
) -> None:
    """The ladder stops at its first failure: a passing last rung with a later rung whose whole
    window the samples hold means a measured rung was dropped from the artifact."""
    if not rungs or not rungs[-1].passes or len(rungs) >= len(ladder.rungs):
        return
    after = ladder.rungs[len(rungs)]
    window_end = ladder.measure_window(len(rungs))[1]
    if any(s.rung == after and s.end >= window_end for s in samples):
        raise CustodyError(
            path,
            f"rungs: the samples hold rung c={after}'s whole window, but the artifact stops at "
            f"c={rungs[-1].concurrency}, which passed",
        )


def _joined(
    path: Path, expected: dict[str, Any], raw: QmaxRaw | None, samples: Sequence[Sample]
) -> dict[str, Any]:
    """CloudWatch's ratios joined from the reads kept, as the live ladder joined them."""
    if raw is None or not raw.cloudwatch:
        return expected
    try:
        artifact = QmaxArtifact.model_validate(expected)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise CustodyError(
            path, f"rungs: recomputed, they make no ladder: {first['msg']}"
        ) from None
    reads = {
        key: [MetricPoint(ts, v) for ts, v in points] for key, points in raw.cloudwatch.items()
    }
    if LADDER_RATIO_STAT.key in reads:
        artifact = ratios_for(artifact, reads[LADDER_RATIO_STAT.key])
    if INVOCATIONS_RATIO_STAT.key in reads:
        artifact = invocation_ratios_for(artifact, reads[INVOCATIONS_RATIO_STAT.key], samples)
    return artifact.model_dump(mode="json")


def _verification(
    qmax: QmaxArtifact,
    expected: dict[str, Any],
    samples: Sequence[Sample],
    cpu: list[CpuReading] | None,
    raw: QmaxRaw | None,
) -> list[dict[str, Any]]:
    """The verification rungs again: the levels for the recorded surge ratio at the recomputed
    Q_max, each read from the ladder rung that held it or the held run's rung. The fleet level
    is recomputed when the artifact records one (a ladder measured before it existed has none)."""
    if not qmax.verification:
        return []
    surge_ratio = qmax.verification[0].surge_ratio
    rungs = [Rung.model_validate(r) for r in expected["rungs"]]
    refinement = expected.get("refinement")
    q_max = refinement["q_max"] if refinement else expected["q_max"]
    if q_max is None:
        return []
    levels = verification_levels(q_max, surge_ratio)
    if any(v.role == "fleet" for v in qmax.verification):
        probes = [p["rung"] for p in refinement["probes"]] if refinement else []
        curve = [*rungs, *(Rung.model_validate(r) for r in probes)]
        levels = all_levels(sorted(curve, key=lambda r: r.concurrency), q_max, surge_ratio)
    held_run = None
    schedule = qmax.verification_ladder
    if schedule is not None and schedule.start_epoch is not None:
        held = ladder_rungs(
            samples, cpu or [], _schedule(schedule), schedule.start_epoch, qmax.slo_ms, math.inf,
            schedule.underrun_slo_share,
        )  # fmt: skip
        held_run = (schedule, held)
    reads = raw.cloudwatch.get(LADDER_RATIO_STAT.key, []) if raw else []
    points = [MetricPoint(ts, v) for ts, v in reads]
    counts = raw.cloudwatch.get(INVOCATIONS_RATIO_STAT.key, []) if raw else []
    minutes = [MetricPoint(ts, v) for ts, v in counts]
    again = verification_from_runs(
        levels, surge_ratio, held_by_the_ladder(levels, rungs, qmax.ladder), (qmax.ladder, rungs),
        held_run, points, minutes, samples,
    )  # fmt: skip
    return [v.model_dump(mode="json") for v in again]


def _schedule(settings: LadderSettings) -> LadderSchedule:
    return LadderSchedule(
        rungs=tuple(settings.rungs),
        hold_s=settings.hold_s,
        measure_s=settings.measure_s,
        idle_s=settings.idle_s,
        max_hold_s=settings.max_hold_s,
        unstable_max_hold_s=settings.unstable_max_hold_s,
        extended_s=tuple(settings.extended_s),
        widened_s=tuple(settings.widened_s),
    )


def _keep_unrecorded_stability(recorded: dict[str, Any], expected: dict[str, Any]) -> None:
    """A legacy rung that recorded no stability figure (its code had none) is not judged on it."""
    pairs = list(zip(recorded["rungs"], expected["rungs"], strict=False))
    if recorded.get("refinement") and expected.get("refinement"):
        pairs += [
            (a["rung"], b["rung"])
            for a, b in zip(
                recorded["refinement"]["probes"], expected["refinement"]["probes"], strict=False
            )
        ]
    for mine, again in pairs:
        for key in STABILITY_FIELDS:
            if mine.get(key) is None:
                again[key] = None
