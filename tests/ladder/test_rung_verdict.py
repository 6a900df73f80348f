"""Issue 38's three-way verdict on a rung's p95 interval, and Q_max as an interval."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from tts_bench.artifacts.qmax import QmaxArtifact, q_max_interval_of
from tts_bench.artifacts.rungs import rung_verdict
from tts_bench.measure.ladder.schedule import LadderSchedule
from tts_bench.measure.ladder.statistics import build_qmax_artifact, rung_statistics
from tts_bench.measure.samples import Outcome, Sample

from ..core.ladders import qmax_artifact, rung
from .coverage_table import ladder_coverage
from .synthetic import closed_loop
from .test_statistics import FP

LEVEL = 0.95


@pytest.mark.parametrize(
    ("lower", "upper", "failed", "expected"),
    [
        (800.0, 990.0, 0, "pass"),  # upper end within the SLO
        (800.0, 1000.0, 0, "pass"),  # at the SLO is within it, as the point verdict's ≤
        (1001.0, 1500.0, 0, "fail"),  # lower end above it
        (900.0, 1100.0, 0, "undecided"),
        (900.0, None, 0, "undecided"),  # too few requests to bound it from above
        (None, None, 0, "undecided"),
        (800.0, 990.0, 2, "fail"),  # 2 of 100 failed: the failure share is a count, as today
    ],
)
def test_the_verdict_reads_the_interval_against_the_slo(lower, upper, failed, expected):
    assert rung_verdict(lower, upper, failed, 100, 1000.0) == expected


def test_a_rung_with_no_finished_request_fails():
    assert rung_verdict(None, None, 0, 0, 1000.0) == "fail"


def _window(latency_ms: float, users: int = 10, seconds: float = 30.0) -> list[Sample]:
    return closed_loop(users, 0.0, 20.0 + seconds, latency_ms=latency_ms)


def test_a_rung_well_under_the_slo_with_many_requests_passes():
    rung_ = rung_statistics(_window(100), [], 10, (20.0, 50.0), 1000.0, confidence=LEVEL)
    interval = rung_.ttfab_p95_interval
    assert interval is not None and interval.samples == rung_.ok > 72
    assert interval.lower_ms <= rung_.ttfab_p95_ms <= interval.upper_ms <= 1000.0
    assert rung_.verdict == "pass" and rung_.meets_slo


def test_a_few_requests_under_the_slo_stay_undecided_but_can_fail():
    # One user for 3 s at 400 ms: 7 requests, no upper end at 95 % (it needs 72).
    samples = _window(400, users=1, seconds=3.0)
    quick = rung_statistics(samples, [], 1, (20.0, 23.0), 1000.0, confidence=LEVEL)
    assert quick.ok < 72 and quick.ttfab_p95_interval.upper_ms is None
    assert quick.meets_slo and quick.verdict == "undecided"
    slow = rung_statistics(samples, [], 1, (20.0, 23.0), 100.0, confidence=LEVEL)
    assert slow.verdict == "fail" and not slow.meets_slo


def _spread(count: int) -> list[Sample]:
    """`count` requests of one rung ending inside [0, 10), TTFAB spread over 50–150 ms."""
    return [
        Sample(1, "h:1", i * 10 / count - 0.5, i * 10 / count, 50.0 + (i * 37) % 101, 200.0,
               Outcome.OK)
        for i in range(count)
    ]  # fmt: skip


def test_an_slo_inside_the_interval_is_undecided_whichever_side_the_p95_falls():
    samples = _spread(300)
    rung_ = rung_statistics(samples, [], 1, (0.0, 10.0), 1000.0, confidence=LEVEL)
    interval = rung_.ttfab_p95_interval
    assert interval.lower_ms < rung_.ttfab_p95_ms < interval.upper_ms
    for slo in (interval.lower_ms, rung_.ttfab_p95_ms, interval.upper_ms - 0.5):
        again = rung_statistics(samples, [], 1, (0.0, 10.0), slo, confidence=LEVEL)
        assert again.verdict == "undecided"


def test_without_a_level_a_rung_records_neither_as_before():
    rung_ = rung_statistics(_window(100), [], 10, (20.0, 50.0), 1000.0)
    assert rung_.ttfab_p95_interval is None and rung_.verdict is None


def _ladder(*intervals, usable=(True,) * 5):
    return [
        rung(c, 10.0 * c, 500.0 + 100 * i, slo_ms=1000, interval=(lo, hi, LEVEL), usable=u)
        for i, ((c, lo, hi), u) in enumerate(zip(intervals, usable, strict=False))
    ]


def test_q_max_runs_from_the_last_unbroken_pass_to_the_last_rung_not_failed():
    rungs = _ladder((1, 400, 900), (2, 500, 990), (4, 600, 1300), (8, 700, None), (16, 1100, None))
    found = q_max_interval_of(rungs, LEVEL)
    assert (found.low, found.high, found.failing_above) == (2, 8, 16)
    assert found.undecided == [4, 8]


def test_an_undecided_rung_below_ends_the_conservative_chain():
    rungs = _ladder((1, 400, None), (2, 500, 990), (4, 1100, 1300))
    found = q_max_interval_of(rungs, LEVEL)
    assert (found.low, found.high, found.failing_above) == (None, 2, 4)


def test_an_unusable_rung_ends_both_walks():
    rungs = _ladder((1, 400, 900), (2, 500, 990), (4, 600, 900), usable=(True, False, True))
    found = q_max_interval_of(rungs, LEVEL)
    assert (found.low, found.high, found.failing_above) == (1, 1, None)


def test_the_artifact_records_the_level_and_refuses_an_edited_verdict():
    schedule = LadderSchedule((1, 10), hold_s=30, measure_s=30, idle_s=0)
    samples = closed_loop(1, 0.0, 30.0, 1000) + [
        Sample(10, "h:1", 30.0 + i * 0.01, 31.0 + i * 0.01, 100.0, 200.0, Outcome.OK)
        for i in range(2000)
    ]
    rungs = [
        rung_statistics(samples, [], c, w, 1000.0, confidence=LEVEL)
        for c, w in ((1, (0.0, 30.0)), (10, (30.0, 60.0)))
    ]
    artifact = build_qmax_artifact(
        rungs, FP, schedule, 1000.0, _provenance(), 0.0, confidence=LEVEL
    )
    assert artifact.ladder.confidence == LEVEL
    assert artifact.q_max == 10  # the point verdict and the plan's Q_max are as before
    assert artifact.rungs[0].ok < 72  # 1 user for 30 s: too few to pass c=1
    assert artifact.q_max_interval.low is None
    assert artifact.q_max_interval.high == 10
    edited = artifact.model_dump(mode="json")
    edited["rungs"][1]["verdict"] = "undecided"
    with pytest.raises(ValidationError, match="verdict undecided disagrees"):
        QmaxArtifact.model_validate(edited)
    edited = artifact.model_dump(mode="json")
    edited["q_max_interval"]["low"] = 10
    with pytest.raises(ValidationError, match="q_max_interval"):
        QmaxArtifact.model_validate(edited)
    edited = artifact.model_dump(mode="json")
    edited["ladder"]["confidence"] = 0.99
    with pytest.raises(ValidationError, match=r"level 0\.95"):
        QmaxArtifact.model_validate(edited)


def test_an_artifact_without_intervals_loads_as_before():
    plain = qmax_artifact([rung(1, 5.0, 500.0), rung(2, 9.0, 900.0)])
    assert plain.q_max_interval is None and plain.rungs[0].verdict is None
    assert QmaxArtifact.model_validate(plain.model_dump(mode="json")) == plain


def _provenance():
    from tts_bench.artifacts.provenance import Provenance

    return Provenance.now("measured", source="tests")


def test_simulated_ladders_intervals_hold_the_true_q_max():
    """The acceptance's coverage check, small and simulated (docs/measuring.md has twenty
    ladders per case): five ladders against a serial engine whose true Q_max is known."""
    truth, held, within_step, known = ladder_coverage(tuple(range(22, 28)), 1000, 2900.0, 5)
    assert truth == 24
    assert held >= 4 and within_step == 5 and known >= 2  # long windows decide most rungs
