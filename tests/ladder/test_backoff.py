"""A refused ladder user backs off (jittered, exponential, capped), and a rung the server failed
by refusing is still judged though its refused users were waiting (issue 39)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tts_bench.measure.ladder.statistics import rung_statistics
from tts_bench.measure.samples import Outcome, Sample
from tts_bench.measure.transport.backoff import BASE_S, CAP_S, RefusalBackoff, backoff_s

from .synthetic import closed_loop


@given(consecutive=st.integers(1, 200), draw=st.floats(0, 1, exclude_max=True))
def test_each_refusal_in_a_row_waits_at_least_half_its_step_and_never_past_the_cap(
    consecutive: int, draw: float
) -> None:
    step = min(CAP_S, BASE_S * 2 ** (consecutive - 1))
    # At most the step, not below it: a draw just under 1 rounds to the whole step in floats.
    assert step / 2 <= backoff_s(consecutive, draw) <= step <= CAP_S


def test_the_wait_doubles_until_the_cap_and_a_served_request_resets_it() -> None:
    user = RefusalBackoff(draw=lambda: 1.0)  # the top of each step
    waits = [user.after(Outcome.REJECTED) for _ in range(7)]
    assert waits == pytest.approx([0.05, 0.1, 0.2, 0.4, 0.8, 1.0, 1.0])
    assert user.after(Outcome.OK) == 0.0
    assert user.after(Outcome.REJECTED) == pytest.approx(0.05)
    # An error or a cancelled request is not the server saying "later": no wait, count reset.
    assert user.after(Outcome.ERROR) == 0.0 and user.consecutive == 0
    assert user.after(Outcome.CANCELLED) == 0.0


def _refused_user(rung: int, start: float, end: float, every_s: float) -> list[Sample]:
    """A fifth user refused at once, then backing off `every_s` between its refusals."""
    times = [start + i * every_s for i in range(int((end - start) / every_s))]
    return [Sample(rung, "h:1", t, t + 0.002, None, 2.0, Outcome.REJECTED, "HTTP 429")
            for t in times]  # fmt: skip


def test_a_rung_failed_by_refusals_is_judged_though_the_refused_user_waited() -> None:
    samples = closed_loop(4, 0.0, 30.0, latency_ms=100, rung=5) + _refused_user(5, 0, 30, 0.5)
    rung = rung_statistics(samples, [], 5, (20.0, 30.0), slo_ms=1000)
    assert rung.client_mean_in_flight < 0.95 * 5 and rung.rejected == 20
    assert rung.usable and not rung.meets_slo  # a verdict: the ladder brackets Q_max below it


def test_a_rung_that_passes_while_its_client_held_too_few_is_still_no_pass() -> None:
    # One refusal in a thousand requests is within the 1 % a passing rung may fail, so the
    # refusal excuses nothing: the client held 4 of 5 and the rung says nothing about 5.
    samples = closed_loop(4, 0.0, 30.0, latency_ms=10, rung=5) + _refused_user(5, 25, 26, 1)
    rung = rung_statistics(samples, [], 5, (20.0, 30.0), slo_ms=1000)
    assert rung.rejected == 1 and rung.meets_slo
    assert not rung.usable and "below 95% of 5" in (rung.unusable_reason or "")
