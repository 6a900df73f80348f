"""The device ladders' grids: a bracket too wide for fine steps is narrowed before it is walked."""

from __future__ import annotations

import argparse
import itertools

from hypothesis import given
from hypothesis import strategies as st

from benchmarks.gpu_bench import final_grid, narrowing_grid, refined_grid


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


def _grid_args(**overrides: float) -> argparse.Namespace:
    settings = {"step": 0.045, "fine_below": 0.1, "keep_below": 1, "overshoot": 0.25}
    return argparse.Namespace(**(settings | overrides))


def test_a_refined_ladder_reaches_past_the_scouts_first_fail() -> None:
    # Run 9's third float16 repeat: its scout failed c=540 in a slow spell, and the refined
    # grid stopped at 564, which passed, so that repeat's Q_max was left unbracketed.
    coarse = [1, 288, 432, 540, 648, 800]
    grid = final_grid(coarse, 432, 540, _grid_args())
    assert grid[:3] == [1, 288, 388]  # c=1, the coarse rung kept below, then fine steps
    assert 664 <= grid[-1] < 700  # past 540 by a quarter: the other repeats' knee, 664, in reach
    # without overshoot, one step past the fail, as the grid ended before (564 in run 9)
    assert final_grid(coarse, 432, 540, _grid_args(overshoot=0.0))[-1] >= 564


@given(
    last_pass=st.integers(1, 2000),
    span=st.integers(1, 3000),
    overshoot=st.floats(0.0, 1.0),
)
def test_fine_rungs_rise_within_a_step_from_below_the_pass_to_past_the_fail(
    last_pass: int, span: int, overshoot: float
) -> None:
    first_fail = last_pass + span
    grid = final_grid(
        [1, last_pass, first_fail], last_pass, first_fail, _grid_args(overshoot=overshoot)
    )
    assert grid == sorted(set(grid)) and grid[0] == 1
    assert grid[-1] >= max(first_fail + 1, int(first_fail * (1 + max(0.045, overshoot))))
    fine = [r for r in grid if r >= int(last_pass * 0.9)]
    assert all(b <= max(a + 1, int(a * 1.045)) for a, b in itertools.pairwise(fine))
