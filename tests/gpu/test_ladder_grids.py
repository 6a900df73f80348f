"""The device ladders' grids: a bracket too wide for fine steps is narrowed before it is walked."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from benchmarks.gpu_bench import narrowing_grid, refined_grid


def test_run_8s_bracket_is_narrowed_instead_of_walked_rung_by_rung() -> None:
    # Run 8's scout passed c=1 and failed c=288: fine steps of 4.5 % made 94 rungs (17 min).
    assert len(refined_grid(1, 288, 0.045)) > 90
    assert narrowing_grid(1, 288, 5) == [3, 7, 17, 44, 112]  # ratio 288 ** (1/6)


@given(
    low=st.integers(1, 2000),
    span=st.integers(2, 5000),
    count=st.integers(1, 12),
)
def test_narrowing_rungs_lie_strictly_inside_the_bracket_in_rising_order(
    low: int, span: int, count: int
) -> None:
    high = low + span
    rungs = narrowing_grid(low, high, count)
    assert rungs == sorted(set(rungs))
    assert all(low < r < high for r in rungs)
    assert 1 <= len(rungs) <= count
