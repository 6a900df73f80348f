"""The clock AWS timestamps are read in: the wall clock, or a compressed local cloud's."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tts_bench.aws.clock import ENV_TIME_ORIGIN, ENV_TIME_SCALE, ClockError, ServiceClock

scales = st.floats(0.01, 1000.0)
times = st.floats(1.5e9, 2.5e9)


@given(scale=scales, origin=times, wall=times)
def test_wall_and_virtual_time_map_back_and_forth(scale: float, origin: float, wall: float) -> None:
    clock = ServiceClock(scale, origin)
    assert math.isclose(clock.to_wall(clock.to_virtual(wall)), wall, rel_tol=0, abs_tol=1e-3)
    assert clock.to_virtual(origin) == origin


@given(scale=scales, origin=times, start=times, span=st.floats(0.0, 1e5))
def test_virtual_spans_are_scale_times_the_wall_spans(
    scale: float, origin: float, start: float, span: float
) -> None:
    clock = ServiceClock(scale, origin)
    virtual = clock.to_virtual(start + span) - clock.to_virtual(start)
    assert math.isclose(virtual, scale * span, rel_tol=1e-9, abs_tol=1e-3)
    assert math.isclose(clock.wall_seconds(virtual), span, rel_tol=1e-9, abs_tol=1e-3)


def test_the_exported_variables_give_the_same_clock_back() -> None:
    clock = ServiceClock(10.0, 1_800_000_000.25)
    again = ServiceClock.from_environment(clock.env())
    assert (again.scale, again.origin_s) == (10.0, 1_800_000_000.25)
    assert again.compressed and not ServiceClock().compressed


def test_without_the_variables_it_is_the_wall_clock() -> None:
    clock = ServiceClock.from_environment({})
    assert (clock.scale, clock.to_virtual(1234.5)) == (1.0, 1234.5)


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({ENV_TIME_SCALE: "10"}, "come together"),
        ({ENV_TIME_ORIGIN: "1"}, "come together"),
        ({ENV_TIME_SCALE: "ten", ENV_TIME_ORIGIN: "1"}, "not numbers"),
        ({ENV_TIME_SCALE: "0", ENV_TIME_ORIGIN: "1"}, "give a positive number"),
        ({ENV_TIME_SCALE: "nan", ENV_TIME_ORIGIN: "1"}, "give a positive number"),
    ],
)
def test_bad_variables_are_one_line(env: dict[str, str], expected: str) -> None:
    with pytest.raises(ClockError) as caught:
        ServiceClock.from_environment(env)
    assert expected in str(caught.value) and "\n" not in str(caught.value)
