"""--max-hold-s: an unstable rung is held longer, its window slides, later rungs start later."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from tts_bench.artifacts.rungs import LadderSettings
from tts_bench.measure.ladder.locust_child import LadderRequest
from tts_bench.measure.ladder.schedule import LadderError, LadderSchedule, describe_schedule
from tts_bench.measure.ladder.stability import hold_extension_s
from tts_bench.measure.ladder.statistics import extend_unstable, ladder_rungs, window_stability
from tts_bench.measure.samples import Outcome, Sample

from .conftest import LOCUSTFILE

T0 = 1_700_000_000.0


def drifting_loop(users: int, start: float, end: float, ttfab_ms) -> list[Sample]:
    """`users` back-to-back users over [start, end) (test seconds, stored as epoch from T0);
    a request starting at t has TTFAB `ttfab_ms(t)` and lasts 2.5 times that."""
    out: list[Sample] = []
    for u in range(users):
        t = start + u * 0.01
        while t < end:
            ttfab = ttfab_ms(t)
            latency = 2.5 * ttfab
            out.append(
                Sample(users, "h:1", T0 + t, T0 + t + latency / 1000, ttfab, latency, Outcome.OK)
            )
            t += latency / 1000
    return out


def hold_until_judged(schedule: LadderSchedule, index: int, samples: list[Sample]):
    """What the conductor does after each window of rung `index` closes, replayed to the end."""
    while (longer := extend_unstable(schedule, index, samples, T0)) is not None:
        schedule = longer
    return schedule


LADDER = LadderSchedule((4, 8), hold_s=30, measure_s=15, idle_s=5, max_hold_s=60)


def warming_then_steady(t: float) -> float:
    return 100.0 + 10.0 * max(0.0, 30.0 - t)  # TTFAB falls until 30 s, then stays at 100 ms


def growing_queue(t: float) -> float:
    return 100.0 + 10.0 * t  # TTFAB never stops climbing


def test_an_unstable_then_stable_rung_is_extended_and_judged_on_its_later_window():
    samples = drifting_loop(4, 0.0, 120.0, warming_then_steady)
    first = (T0 + 15.0, T0 + 30.0)
    assert not window_stability(samples, 4, first).stable  # the planned window was warming up
    held = hold_until_judged(LADDER, 0, samples)
    assert held.extended_s == (15.0,)  # one more measure_s, and no more: the next was steady
    assert held.window_s(0) == (30.0, 45.0)
    (rung,) = ladder_rungs(samples, [], held, T0, slo_ms=3000, now=T0 + 46.0)
    assert rung.stable is True and rung.ttfab_p95_ms == pytest.approx(100.0)


def test_a_rung_never_stable_stops_at_max_hold_and_is_recorded_unstable():
    samples = drifting_loop(4, 0.0, 120.0, growing_queue)
    held = hold_until_judged(LADDER, 0, samples)
    assert held.rung_hold_s(0) == 60.0 and held.extended_s == (30.0,)
    (rung,) = ladder_rungs(samples, [], held, T0, slo_ms=3000, now=T0 + 61.0)
    assert rung.stable is False


def test_without_max_hold_nothing_is_extended():
    plain = LadderSchedule((4, 8), hold_s=30, measure_s=15, idle_s=5)
    samples = drifting_loop(4, 0.0, 120.0, growing_queue)
    assert extend_unstable(plain, 0, samples, T0) is None
    assert plain.window_s(1) == (50.0, 65.0)  # 1 · (30 + 5) + 30 − 15, as always
    assert plain.settings(T0) == LadderSettings(
        rungs=[4, 8], hold_s=30, measure_s=15, idle_s=5, start_epoch=T0
    )


@pytest.mark.parametrize("own_max_hold_s", [None, 45.0])
def test_a_fleet_level_held_long_leaves_the_other_verification_rungs_at_the_ladders_cap(
    own_max_hold_s: float | None,
):
    """The fleet level's three minutes raise max_hold_s for that rung alone: an unstable rung
    beside it is held no longer than the ladder's own --max-hold-s (none: its hold)."""
    from tts_bench.measure.ladder.live.verification import VerificationLevel, verification_ladder

    ladder = LadderSchedule((1, 3), hold_s=30, measure_s=15, idle_s=0, max_hold_s=own_max_hold_s)
    levels = (VerificationLevel("fleet", 1.2, 1), VerificationLevel("scale_out", 2.2, 2))
    held = verification_ladder(ladder, levels, 180.0)
    assert held.rung_hold_s(0) == 180.0 and held.max_hold_s == 180.0
    samples = drifting_loop(2, 180.0, 400.0, lambda t: growing_queue(t - 180.0))
    assert not window_stability(samples, 2, (T0 + 195.0, T0 + 210.0)).stable
    judged = hold_until_judged(held, 1, samples)
    assert judged.rung_hold_s(1) == (own_max_hold_s or 30.0)
    settings = judged.settings(T0)
    assert LadderSettings.model_validate(settings.model_dump()) == settings


def test_a_stable_rung_is_not_extended_even_with_room():
    samples = drifting_loop(4, 0.0, 120.0, lambda _t: 100.0)
    assert extend_unstable(LADDER, 0, samples, T0) is None


def test_the_next_rung_starts_after_the_extended_hold_and_its_window_follows():
    held = LADDER.extended(0, 15.0)
    assert held.rung_start_s(1) == 50.0  # 45 s held + 5 s idle
    assert held.window_s(1) == (65.0, 80.0)
    assert held.phase_at(44.9).users == 4 and held.phase_at(45.0).users == 0
    assert held.phase_at(50.0).users == 8
    settings = held.settings(T0)
    assert settings.measure_window(1) == (T0 + 65.0, T0 + 80.0)
    assert settings.rung_hold_s(0) == 45.0 and settings.rung_hold_s(1) == 30.0


extensions = st.lists(st.floats(0, 1), max_size=8)


@given(
    rungs=st.lists(st.integers(1, 500), min_size=1, max_size=8, unique=True).map(sorted),
    hold=st.floats(1, 600),
    measure_share=st.floats(0.01, 1),
    idle=st.floats(0, 100),
    room=st.floats(0, 600),
    shares=extensions,
)
def test_every_window_is_the_trailing_measure_of_its_real_hold(
    rungs, hold, measure_share, idle, room, shares
):
    shares = shares[: len(rungs)]
    plain = LadderSchedule(tuple(rungs), hold, hold * measure_share, idle, max_hold_s=hold + room)
    schedule = plain
    for i, share in enumerate(shares):
        schedule = schedule.extended(i, share * room)
    settings = schedule.settings(T0)
    settings = LadderSettings.model_validate_json(settings.model_dump_json())  # as written
    start = 0.0
    for i, users in enumerate(rungs):
        held = hold + (shares[i] * room if i < len(shares) else 0.0)
        w0, w1 = schedule.window_s(i)
        assert schedule.rung_start_s(i) == pytest.approx(start)
        assert w1 == pytest.approx(start + held) and w1 - w0 == pytest.approx(hold * measure_share)
        assert schedule.phase_at((w0 + w1) / 2).users == users
        a, b = settings.measure_window(i)
        assert a == pytest.approx(T0 + w0, abs=1e-6) and b == pytest.approx(T0 + w1, abs=1e-6)
        start += held + idle
    assert schedule.duration_s == pytest.approx(start - idle + max(idle, schedule.final_drain_s))
    worst = plain.worst_case()
    assert worst.duration_s >= schedule.duration_s - 1e-6
    assert worst.duration_s == pytest.approx(
        len(rungs) * (hold + room + idle) - idle + max(idle, plain.final_drain_s)
    )


@given(
    held=st.floats(1, 1000),
    measure=st.floats(0.1, 500),
    room=st.floats(0, 1000),
    steady=st.booleans(),
)
def test_an_extension_is_at_most_one_window_and_never_passes_max_hold(held, measure, room, steady):
    seconds = hold_extension_s(held, measure, held + room, steady)
    assert 0 <= seconds <= measure
    assert held + seconds <= held + room + 1e-9
    if steady:
        assert seconds == 0
    elif room > 1e-6:
        assert seconds == pytest.approx(min(measure, room))
    assert hold_extension_s(held, measure, None, steady) == 0


def test_an_artifact_without_extensions_means_what_it_meant():
    old = {"rungs": [1, 5, 10], "hold_s": 240, "measure_s": 60, "idle_s": 30, "start_epoch": T0}
    settings = LadderSettings.model_validate(old)
    for i in range(3):
        hold_end = T0 + i * (240 + 30) + 240
        assert settings.measure_window(i) == (hold_end - 60, hold_end)


@pytest.mark.parametrize(
    ("update", "message"),
    [
        ({"extended_s": [10.0]}, "no max_hold_s"),
        ({"max_hold_s": 200.0}, "below hold_s"),
        ({"max_hold_s": 260.0, "extended_s": [30.0]}, "exceeds max_hold_s"),
        ({"max_hold_s": 300.0, "extended_s": [0, 0, 0, 0]}, "more entries"),
        ({"unstable_max_hold_s": 250.0}, "between hold_s and max_hold_s"),
        ({"max_hold_s": 300.0, "unstable_max_hold_s": 320.0}, "between hold_s and max_hold_s"),
    ],
)
def test_settings_that_cannot_describe_a_hold_are_refused(update, message):
    base = {"rungs": [1, 5, 10], "hold_s": 240, "measure_s": 60, "idle_s": 30}
    with pytest.raises(ValidationError, match=message):
        LadderSettings.model_validate({**base, **update})


@pytest.mark.parametrize("max_hold", [100.0, -5.0, math.nan, 1e9])
def test_a_bad_max_hold_is_refused_before_anything_runs(max_hold):
    with pytest.raises(LadderError, match=r"--max-hold-s .*: must be at least --hold-s 240"):
        LadderSchedule((1, 5), hold_s=240, measure_s=60, max_hold_s=max_hold)


@pytest.mark.parametrize(("max_hold", "unstable"), [(None, 250.0), (300.0, 200.0), (300.0, 310.0)])
def test_an_unstable_cap_outside_hold_and_max_hold_is_refused(max_hold, unstable):
    with pytest.raises(LadderError, match=r"--unstable-max-hold-s .*: must lie between"):
        LadderSchedule((1, 5), 240, 60, max_hold_s=max_hold, unstable_max_hold_s=unstable)


@pytest.mark.parametrize("minutes", [0, -1, 1441])
def test_a_whole_minutes_count_outside_a_day_is_refused(minutes):
    with pytest.raises(LadderError, match=rf"--whole-minutes {minutes}: give 1 to a day's"):
        LadderSchedule((1, 5), 240, 60, whole_minutes=minutes)


def test_the_dry_run_shows_the_worst_case_with_every_rung_extended():
    schedule = LadderSchedule((1, 5), hold_s=240, measure_s=60, idle_s=30, max_hold_s=360)
    text = describe_schedule(schedule, 3000, refine_pct=10)
    assert "up to 360 s" in text
    # Worst case: 2 × 360 + 30 + 30 = 780 s; unextended 2 × 240 + 30 + 30 = 540 s.
    assert "at most 13 min 00 s (780 s" in text and "9 min 00 s if no rung is extended" in text
    assert "     2      5      390s      690s-   750s" in text
    assert "probes of 360 s" in text
    plain = describe_schedule(LadderSchedule((1, 5), 240, 60, 30), 3000)
    assert "extended" not in plain and "at most 9 min 00 s (540 s" in plain


def test_the_locust_command_carries_max_hold_only_when_given():
    def command(**kw) -> list[str]:
        schedule = LadderSchedule((1, 5), hold_s=20, measure_s=10, **kw)
        request = LadderRequest(
            "http://127.0.0.1:1", schedule, 3000, "local-http", None, "m", Path("out")
        )
        return request.locust_command()

    with_max = command(max_hold_s=45.0)
    assert with_max[with_max.index("--max-hold-s") + 1] == "45.0"
    assert "--max-hold-s" not in command()


SHAPE = {"rungs": [1, 5], "hold_s": 10, "measure_s": 4, "idle_s": 3, "final_drain_s": 5}


def test_the_shape_holds_an_extended_rung_and_starts_the_next_one_later(tick_answers):
    # Rung 1 extended by 4 s: held to 14 s, idle to 17 s, rung 5 from 17 s to 27 s.
    settings = {**SHAPE, "max_hold_s": 20, "extended_s": [4]}
    times = [9.9, 13.9, 14.0, 16.9, 17.0, 26.9, 27.0, 31.9, 32.0]
    users = [t and t[0] for t in tick_answers(settings, times)]
    assert users == [1, 1, 0, 0, 5, 5, 0, 0, None]


def test_the_shape_keeps_a_rung_awaiting_its_verdict_on_past_its_end(tick_answers):
    # Rung 1's window closed at 10 s; the conductor has not judged it yet: its users stay on,
    # even past the next rung's start, until the verdict lets the schedule move on.
    settings = {**SHAPE, "max_hold_s": 20, "held_open": [1, 0.0, 10.0]}
    users = [t and t[0] for t in tick_answers(settings, [5.0, 10.5, 12.9, 13.5])]
    assert users == [1, 1, 1, 1]
    released = [t and t[0] for t in tick_answers({**SHAPE, "max_hold_s": 20}, [10.5, 13.5])]
    assert released == [0, 5]


def test_locust_refuses_a_bad_max_hold_in_one_line(child_env):
    command = [sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--headless"]
    flags = ["--rungs", "1", "--hold-s", "20", "--measure-s", "10", "--max-hold-s", "15"]
    done = subprocess.run(
        [*command, *flags], capture_output=True, text=True, env=child_env, timeout=120
    )
    assert done.returncode == 2
    refusals = [line for line in done.stderr.splitlines() if "refused:" in line]
    assert len(refusals) == 1 and "--max-hold-s 15: must be at least --hold-s 20" in refusals[0]
    assert "Traceback" not in done.stderr
