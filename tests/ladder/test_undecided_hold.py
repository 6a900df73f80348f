"""--max-hold-s with --confidence: a steady rung whose p95 interval straddles the SLO is held
longer and its window widens until it is decided, or it is recorded as undecided; --refine
bisects on decided probes only (issue 38).
Samples built by arithmetic; no Locust."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.core.ladders import rung
from tts_bench.artifacts.provenance import Provenance
from tts_bench.artifacts.qmax import RefinementProbe
from tts_bench.measure.ladder.locust_child import LadderRequest
from tts_bench.measure.ladder.run import LadderRun
from tts_bench.measure.ladder.schedule import LadderSchedule
from tts_bench.measure.ladder.stability import HoldStep, next_hold
from tts_bench.measure.ladder.state import ShapeSnapshot
from tts_bench.measure.ladder.statistics import (
    VerdictRule,
    build_qmax_artifact,
    build_refinement,
    extend_unstable,
    rung_statistics,
)
from tts_bench.measure.samples import Outcome, Sample

from .test_ladder_control import FINGERPRINT

T0 = 1_700_000_000.0
LEVEL = 0.95


@pytest.mark.parametrize(
    ("steady", "undecided", "widened", "expected"),
    [
        (True, True, False, HoldStep(10.0, widen=True)),  # undecided: pool more requests
        (True, True, True, HoldStep(10.0, widen=True)),  # and more, while room is left
        (False, False, False, HoldStep(10.0, widen=False)),  # unstable: slide, as before
        (False, True, False, HoldStep(10.0, widen=False)),
        (False, True, True, None),  # a widened window turned unstable: judged as it is
        (True, False, False, None),  # steady and decided
    ],
)
def test_the_next_step_of_a_hold(steady, undecided, widened, expected):
    assert next_hold(20.0, 10.0, 60.0, steady, undecided, widened) == expected


def test_no_room_or_no_max_hold_judges_the_rung_as_it_is():
    assert next_hold(60.0, 10.0, 60.0, True, True, False) is None
    assert next_hold(20.0, 10.0, None, True, True, False) is None
    assert next_hold(55.0, 10.0, 60.0, True, True, False) == HoldStep(5.0, widen=True)


@given(steps=st.lists(st.tuples(st.integers(0, 2), st.booleans()), max_size=8))
def test_a_window_stays_inside_its_hold_and_widens_only_by_its_extension(steps):
    schedule = LadderSchedule((1, 2, 4), hold_s=20, measure_s=10, idle_s=2, max_hold_s=60)
    for index, widen in steps:
        room = schedule.longest_hold_s - schedule.rung_hold_s(index)
        if room > 0:
            schedule = schedule.extended(index, min(10.0, room), widen)
    settings = schedule.settings(T0)
    for i in range(3):
        w0, w1 = schedule.window_s(i)
        start = schedule.rung_start_s(i)
        assert start - 1e-9 <= w0 < w1 == start + schedule.rung_hold_s(i)
        assert w1 - w0 == pytest.approx(10.0 + schedule.widening_s(i))
        assert settings.measure_window(i) == pytest.approx((T0 + w0, T0 + w1))


def steady_rung(seconds: float, users: int = 1) -> list[Sample]:
    """One user, 5 requests a second, TTFAB spread evenly over 100–150 ms the whole time."""
    out, i, t = [], 0, 0.0
    while t < seconds:
        ttfab = 100.0 + 50.0 * ((i * 37) % 101) / 100
        out.append(Sample(users, "h:1", T0 + t, T0 + t + 0.2, ttfab, 200.0, Outcome.OK))
        i, t = i + 1, t + 0.2
    return out


def hold_until_judged(schedule, samples, rule):
    while (longer := extend_unstable(schedule, 0, samples, T0, rule)) is not None:
        schedule = longer
    return schedule


def test_a_window_too_short_to_pass_widens_until_the_rung_is_decided():
    # 10 s windows hold 50 requests: no upper end at 95 % (72 needed), so c=1 is undecided
    schedule = LadderSchedule((1,), hold_s=20, measure_s=10, idle_s=0, max_hold_s=60)
    samples = steady_rung(60.0)
    rule = VerdictRule(slo_ms=1000.0, confidence=LEVEL)
    first = rung_statistics(samples, [], 1, (T0 + 10, T0 + 20), 1000.0, confidence=LEVEL)
    assert first.stable and first.verdict == "undecided"
    held = hold_until_judged(schedule, samples, rule)
    assert (held.extension_s(0), held.widening_s(0)) == (10.0, 10.0)  # one step sufficed
    w0, w1 = held.window_s(0)
    assert (w0, w1) == (10.0, 30.0)  # the first window's start, 20 s of requests
    judged = rung_statistics(samples, [], 1, (T0 + w0, T0 + w1), 1000.0, confidence=LEVEL)
    assert judged.verdict == "pass" and judged.ok >= 72
    artifact = build_qmax_artifact(
        [judged], FINGERPRINT, held, 1000.0, Provenance.now("measured", "test"), T0,
        confidence=LEVEL,
    )  # fmt: skip
    assert artifact.ladder.widened_s == [10.0]
    assert artifact.q_max_interval.low == 1


def test_a_rung_still_undecided_at_max_hold_is_recorded_as_undecided():
    # the SLO sits on the p95 itself: no window of any length decides it
    schedule = LadderSchedule((1,), hold_s=20, measure_s=10, idle_s=0, max_hold_s=50)
    samples = steady_rung(50.0)
    slo = 147.0
    held = hold_until_judged(schedule, samples, VerdictRule(slo, LEVEL))
    assert held.rung_hold_s(0) == 50.0 and held.widening_s(0) == 30.0
    w0, w1 = held.window_s(0)
    judged = rung_statistics(samples, [], 1, (T0 + w0, T0 + w1), slo, confidence=LEVEL)
    assert judged.verdict == "undecided"
    artifact = build_qmax_artifact(
        [judged], FINGERPRINT, held, slo, Provenance.now("measured", "test"), T0,
        confidence=LEVEL,
    )  # fmt: skip
    assert artifact.q_max_interval.undecided == [1] and artifact.q_max_interval.low is None


def test_without_a_level_an_undecided_rung_is_not_held_longer():
    schedule = LadderSchedule((1,), hold_s=20, measure_s=10, idle_s=0, max_hold_s=60)
    assert extend_unstable(schedule, 0, steady_rung(60.0), T0) is None


def test_a_probe_widens_too():
    run = LadderRun(
        1000.0, T0, ShapeSnapshot(LadderSchedule((1, 4), 20, 10, 2, max_hold_s=40)),
        confidence=LEVEL,
    )  # fmt: skip
    run.begin_refinement(T0 + 42.0)
    window = run.add_probe(1, 44.0)
    run.store.samples.extend(
        replace(s, start=s.start + 44, end=s.end + 44) for s in steady_rung(40.0)
    )
    longer = run.extend_probe(1, window, T0 + 64.0)
    assert longer == (window[0], window[1] + 10.0)  # same start, 10 s more
    assert run.snapshot.probes[-1].end_s == 74.0


def test_refinement_bisects_on_decided_probes_and_ends_at_an_undecided_one():
    coarse = [
        rung(1, 10.0, 80.0, interval=(50.0, 90.0, LEVEL)),
        rung(8, 10.0, 3300.0, interval=(3100.0, 3500.0, LEVEL)),
    ]
    probes = [
        RefinementProbe(
            rung=rung(4, 10.0, 2500.0, interval=(2300.0, 2700.0, LEVEL)),
            window_start_epoch=T0 + 100, window_end_epoch=T0 + 110,
        ),
        RefinementProbe(  # p95 under the SLO, but its interval reaches over it
            rung=rung(6, 10.0, 2990.0, interval=(2900.0, 3100.0, LEVEL)),
            window_start_epoch=T0 + 120, window_end_epoch=T0 + 130,
        ),
    ]  # fmt: skip
    refinement = build_refinement(coarse, probes, 5.0, "undecided")
    assert (refinement.q_max, refinement.failing_above) == (4, 8)  # 6 narrowed nothing
    artifact = build_qmax_artifact(
        coarse, FINGERPRINT, LadderSchedule((1, 8), 20, 10, 2), 3000.0,
        Provenance.now("measured", "test"), T0, refinement=refinement, confidence=LEVEL,
    )  # fmt: skip
    assert artifact.refined_q_max == 4
    assert artifact.q_max_interval.low == 4 and artifact.q_max_interval.high == 6
    assert artifact.q_max_interval.undecided == [6]


def test_the_board_and_the_log_say_a_rung_is_undecided(caplog: pytest.LogCaptureFixture):
    run = LadderRun(1000.0, T0, ShapeSnapshot(LadderSchedule((1,), 20, 10, 0)), confidence=LEVEL)
    run.store.samples.extend(steady_rung(20.0))
    with caplog.at_level("INFO", logger="qmax"):
        judged = run.judge(1, (T0 + 10, T0 + 20))
    assert judged.verdict == "undecided" and judged.meets_slo
    assert run.board[1]["status"] == "passes (undecided)"
    assert "95% interval [" in caplog.text and "undecided" in caplog.text


def test_the_locust_child_is_told_a_level_other_than_the_default():
    def command(**kw) -> list[str]:
        request = LadderRequest(
            "http://127.0.0.1:1", LadderSchedule((1, 5), hold_s=20, measure_s=10), 3000,
            "local-http", None, "m", Path("out"), **kw,
        )  # fmt: skip
        return request.locust_command()

    told = command(confidence=0.99)
    assert told[told.index("--confidence") + 1] == "0.99"
    assert "--confidence" not in command()  # the child's own default is the same 0.95
