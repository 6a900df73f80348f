"""The ladder shape's tick(): users held per rung, idle between rungs, None at the end."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tts_bench.measure.ladder.schedule import LadderError, LadderSchedule, parse_rungs

SETTINGS = {"rungs": [1, 5, 10], "hold_s": 10, "measure_s": 4, "idle_s": 3, "final_drain_s": 5}
# (run time s, expected users or None at the end)
CASES = [
    (0.0, 1), (9.99, 1), (10.0, 0), (12.99, 0), (13.0, 5), (22.9, 5), (23.0, 0),
    (26.0, 10), (35.9, 10), (36.0, 0), (40.9, 0), (41.0, None), (500.0, None),
]  # fmt: skip


@pytest.fixture(scope="module")
def answers(tick_answers) -> dict[float, list | None]:
    times = [t for t, _ in CASES]
    return dict(
        zip(times, tick_answers({**SETTINGS, "user_class": "HttpLadderUser"}, times), strict=True)
    )


@pytest.mark.parametrize(("run_time", "users"), CASES)
def test_tick_holds_each_rung_then_idles_then_stops(answers, run_time, users):
    tick = answers[run_time]
    if users is None:
        assert tick is None
    else:
        assert tick[0] == users
        assert tick[1] >= 10  # every rung starts at once
        assert tick[2] == "HttpLadderUser"


def test_tick_without_idle_steps_straight_to_the_next_rung(tick_answers):
    settings = {**SETTINGS, "idle_s": 0, "final_drain_s": 2}
    ticks = tick_answers(settings, [9.9, 10.0, 19.9, 20.0, 30.0, 31.9, 32.0])
    assert [t and t[0] for t in ticks] == [1, 5, 5, 10, 0, 0, None]


def test_tick_defaults_are_the_spec_ladder(tick_answers):
    # Hold 240 s, idle 30 s: the second rung (5) starts at 270 s; the last ends at 8 × 270 − 30.
    ticks = tick_answers({}, [239.0, 241.0, 270.0, 7 * 270 + 239.0, 8 * 270.0 + 1])
    assert [t and t[0] for t in ticks] == [1, 0, 5, 60, None]
    assert ticks[0][2] is None  # no transport chosen: Locust's own user classes


@pytest.mark.parametrize(
    ("text", "expected", "error"),
    [
        ("1,5,10,20,30,40,50,60", (1, 5, 10, 20, 30, 40, 50, 60), None),
        ("1, 2 ,4", (1, 2, 4), None),
        ("5,1", None, "strictly ascending"),
        ("1,1", None, "strictly ascending"),
        ("0,1", None, "positive"),
        ("one", None, "comma-separated integers"),
        ("", None, "empty"),
    ],
)
def test_parse_rungs(text, expected, error):
    if error:
        with pytest.raises(LadderError, match=error):
            parse_rungs(text)
    else:
        assert parse_rungs(text) == expected


@given(
    rungs=st.lists(st.integers(1, 500), min_size=1, max_size=10, unique=True).map(sorted),
    hold=st.floats(1, 600),
    measure_share=st.floats(0.01, 1),
    idle=st.floats(0, 100),
    t=st.floats(0, 10_000),
)
def test_schedule_windows_sit_at_the_end_of_each_hold(rungs, hold, measure_share, idle, t):
    schedule = LadderSchedule(tuple(rungs), hold, hold * measure_share, idle)
    for i, users in enumerate(rungs):
        w0, w1 = schedule.window_s(i)
        assert w1 - w0 == pytest.approx(hold * measure_share)
        assert schedule.phase_at((w0 + w1) / 2).users == users
    phase = schedule.phase_at(t)
    assert (phase is None) == (t >= schedule.duration_s)
    assert schedule.duration_s == pytest.approx(
        len(rungs) * (hold + idle) - idle + max(idle, schedule.final_drain_s)
    )


def test_window_longer_than_hold_is_refused():
    with pytest.raises(LadderError, match="--measure-s 70 exceeds --hold-s 60"):
        LadderSchedule((1,), hold_s=60, measure_s=70)


@pytest.mark.parametrize("refining", [True, False])
def test_refinement_cuts_the_coarse_schedule_and_holds_each_probe(tick_answers, refining):
    # Rung 5 failed (its hold ended at 23 s); one probe at 3 users from 25 s to 35 s.
    settings = {**SETTINGS, "coarse_end_s": 23.0, "probes": [[3, 25.0, 35.0]], "refining": refining}
    times = [13.0, 22.9, 23.0, 24.9, 25.0, 30.0, 34.9, 35.0, 39.9, 40.0, 500.0]
    users = [None if t is None else t[0] for t in tick_answers(settings, times)]
    # The coarse rung 10 (due at 26 s) never starts; after the probe the run idles while more
    # probes may come, and ends final_drain_s (5 s) after the last once refinement is over.
    after = [0, 0, 0] if refining else [0, None, None]
    assert users == [5, 5, 0, 0, 3, 3, 3, 0, *after]
