"""An open-loop surge as arithmetic: its arrivals, what was measured, what the model predicts.

- Arrivals are a Poisson process: exponential gaps at `rate_rps`, drawn from one seeded
  generator, so a run's intended send times are fixed by (rate, duration, seed).
- Measured figures come from raw samples (`samples.Sample` with `intended_start`): shed =
  refused by the admission gate; TTFAB is taken from the intended send time; occupancy is
  admitted requests in flight (send to end of stream), the client's view of queued + executing.
- The prediction is the plan's birth–death chain (`planning.birth_death.loss_system`) over the
  ladder's measured X(n), started empty, refusing arrivals at Q_max, for the same rate and
  duration; `shed_probability` of the same chain gives the chance of reaching Q_max at all.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from tts_bench.artifacts.qmax import QmaxArtifact
from tts_bench.artifacts.surge import OccupancySeries, SurgePrediction, SurgeRun
from tts_bench.errors import TtsBenchError
from tts_bench.measure.samples import Outcome, Sample, mean_in_flight, percentile
from tts_bench.planning.birth_death import (
    DEFAULT_SEED,
    DEFAULT_TRIALS,
    loss_system,
    shed_probability,
)
from tts_bench.planning.curve import Curve, throughput_curve

OCCUPANCY_STEP_S = 0.5
# One surge run's bounds, checked before anything is sent: its arrivals are drawn one by one and
# each becomes a request and a sample, and the model records 400 trials on a 0.5 s grid. A
# surge check is a minute at a few requests/s; an hour and 100,000 arrivals leave ample room.
# At least a second: send times are epoch seconds (a tiny span rounds to none, and the run's
# window with it) and occupancy is read every OCCUPANCY_STEP_S.
MIN_SURGE_DURATION_S = 1.0
MAX_SURGE_DURATION_S = 3600.0
MAX_SURGE_ARRIVALS = 100_000


class SurgeError(TtsBenchError):
    """Surge settings that cannot describe a run."""


def check_duration(duration_s: float, flag: str = "--duration-s") -> None:
    """One rate's seconds of arrivals, within the bounds above."""
    if not (
        math.isfinite(duration_s) and MIN_SURGE_DURATION_S <= duration_s <= MAX_SURGE_DURATION_S
    ):
        raise SurgeError(
            f"{flag} {duration_s!r}: seconds, at least {MIN_SURGE_DURATION_S:g} and at most "
            f"{MAX_SURGE_DURATION_S:g}"
        )


def check_rate(rate_rps: float, duration_s: float) -> None:
    if not (math.isfinite(rate_rps) and rate_rps > 0):
        raise SurgeError(f"--rate {rate_rps!r}: requests per second, a positive number")
    check_duration(duration_s)
    if rate_rps * duration_s > MAX_SURGE_ARRIVALS:
        raise SurgeError(
            f"--rate {rate_rps:g} for {duration_s:g} s is {rate_rps * duration_s:.3g} arrivals; "
            f"at most {MAX_SURGE_ARRIVALS:,} in one run (lower the rate or the duration)"
        )


def check_seed(seed: int) -> int:
    if seed < 0:
        raise SurgeError(f"--seed {seed}: give 0 or more")
    return seed


def rate_seed(seed: int, index: int) -> int:
    """The seed of the `index`-th rate's schedule: each rate draws its own arrivals."""
    return seed + index


def check_schedules(rates_rps: Sequence[float], duration_s: float, seed: int) -> None:
    """Every rate's bounds, then its drawn schedule: a run without an arrival measures nothing
    (the schedule is fixed by rate, duration and seed, so this is the run's own draw)."""
    for rate in rates_rps:
        check_rate(rate, duration_s)
    check_seed(seed)
    for i, rate in enumerate(rates_rps):
        if len(poisson_arrivals(rate, duration_s, rate_seed(seed, i))) == 0:
            raise SurgeError(
                f"--rate {rate:g} for {duration_s:g} s draws no arrival (seed "
                f"{rate_seed(seed, i)}): raise the rate or --duration-s"
            )


def poisson_arrivals(rate_rps: float, duration_s: float, seed: int) -> np.ndarray:
    """Intended send times (seconds from the run's start) of a Poisson process in [0, duration)."""
    check_rate(rate_rps, duration_s)
    rng = np.random.default_rng(seed)
    times: list[float] = []
    t = float(rng.exponential(1.0 / rate_rps))
    while t < duration_s:
        times.append(t)
        t += float(rng.exponential(1.0 / rate_rps))
    return np.asarray(times)


def run_samples(samples: Sequence[Sample], start_epoch: float, duration_s: float) -> list[Sample]:
    """The samples of the run whose intended send times lie in [start, start + duration)."""
    return [
        s
        for s in samples
        if s.intended_start is not None
        and start_epoch <= s.intended_start < start_epoch + duration_s
    ]


def admitted(samples: Sequence[Sample]) -> list[Sample]:
    return [s for s in samples if s.outcome is not Outcome.REJECTED]


def occupancy_at(samples: Sequence[Sample], times: np.ndarray) -> list[int]:
    """Admitted requests in flight (start ≤ t < end) at each time."""
    starts = np.sort([s.start for s in admitted(samples)])
    ends = np.sort([s.end for s in admitted(samples)])
    return [
        int(np.searchsorted(starts, t, side="right") - np.searchsorted(ends, t, side="right"))
        for t in times
    ]


def max_occupancy(samples: Sequence[Sample]) -> int:
    """The most admitted requests in flight at once (an end before a start at the same instant)."""
    events = sorted(
        [(s.start, 1) for s in admitted(samples)] + [(s.end, -1) for s in admitted(samples)],
        key=lambda e: (e[0], e[1]),
    )
    level = peak = 0
    for _, change in events:
        level += change
        peak = max(peak, level)
    return peak


def fluid_shed_share(
    x_at_q_max_rps: float, q_max: int, rate_rps: float, duration_s: float
) -> float:
    """Shed share if the instance were full from the first moment and served X(Q_max) steadily:
    at most X·S + Q_max of R·S arrivals get in. A floor on the shedding a saturating surge shows
    (a real run starts empty, which only admits more)."""
    return max(0.0, 1.0 - (x_at_q_max_rps * duration_s + q_max) / (rate_rps * duration_s))


def predict(
    qmax: QmaxArtifact,
    rate_rps: float,
    duration_s: float,
    grid_s: np.ndarray,
    trials: int = DEFAULT_TRIALS,
    seed: int = DEFAULT_SEED,
) -> tuple[SurgePrediction, list[float]]:
    """The model's shed share, reach probability and occupancy over time for this run."""
    q_max = qmax.refined_q_max
    if q_max is None:
        raise SurgeError("the ladder found no Q_max: there is no admission bound to surge against")
    x_curve = throughput_curve(qmax.curve_rungs)
    loss = loss_system(rate_rps, x_curve.at, q_max, duration_s, grid_s, trials=trials, seed=seed)
    reach = shed_probability(
        rate_rps, x_curve.at, start=0, limit=q_max, horizon_s=duration_s, trials=trials, seed=seed
    )
    prediction = SurgePrediction(
        shed_share=loss.shed_share,
        reach_probability=reach.probability,
        mean_occupancy=loss.mean_occupancy,
        trials=trials,
        seed=seed,
    )
    return prediction, list(loss.occupancy_at)


def ttfab_curve(qmax: QmaxArtifact) -> Curve | None:
    """The ladder's p95 TTFAB against concurrency (usable rungs with successes)."""
    points = [
        (float(r.concurrency), r.ttfab_p95_ms)
        for r in qmax.curve_rungs
        if r.usable and r.ttfab_p95_ms is not None
    ]
    if not points:
        return None
    xs, ys = zip(*points, strict=True)
    return Curve(xs=xs, ys=ys)  # type: ignore[arg-type]


def surge_run(
    samples: Sequence[Sample],
    qmax: QmaxArtifact,
    rate_rps: float,
    duration_s: float,
    seed: int,
    start_epoch: float,
) -> SurgeRun:
    """One run's figures from all samples (those of the run are picked by intended time)."""
    mine = run_samples(samples, start_epoch, duration_s)
    shed = [s for s in mine if s.outcome is Outcome.REJECTED]
    inside = admitted(mine)
    ok = [s for s in inside if s.outcome is Outcome.OK and s.ttfab_ms is not None]
    intended = [s.intended_ttfab_ms for s in ok]
    sent = [s.ttfab_ms for s in ok]
    grid = np.arange(0.0, duration_s, OCCUPANCY_STEP_S)
    prediction, model_occupancy = predict(qmax, rate_rps, duration_s, grid)
    mean_occ = mean_in_flight(inside, start_epoch, start_epoch + duration_s)
    end = start_epoch + duration_s
    served = sum(1 for s in inside if s.outcome is Outcome.OK and s.end < end) / duration_s
    curve = ttfab_curve(qmax)
    peak = max_occupancy(inside)
    return SurgeRun(
        rate_rps=rate_rps,
        duration_s=duration_s,
        seed=seed,
        start_epoch=start_epoch,
        arrivals=len(mine),
        admitted=len(inside),
        shed=len(shed),
        errors=sum(1 for s in inside if s.outcome is Outcome.ERROR),
        shed_share=len(shed) / len(mine) if mine else 0.0,
        ok=sum(1 for s in inside if s.outcome is Outcome.OK),
        ttfab_p95_ms=percentile(intended, 95) if intended else None,  # type: ignore[arg-type]
        ttfab_p99_ms=percentile(intended, 99) if intended else None,  # type: ignore[arg-type]
        send_ttfab_p95_ms=percentile(sent, 95) if sent else None,  # type: ignore[arg-type]
        max_send_lag_ms=max(((s.start - s.intended_start) * 1000 for s in mine), default=0.0),  # type: ignore[operator]
        served_rps=served,
        ladder_rps_at_occupancy=throughput_curve(qmax.curve_rungs)(mean_occ),
        mean_occupancy=mean_occ,
        max_occupancy=peak,
        reached_q_max=peak >= (qmax.refined_q_max or 0),
        prediction=prediction,
        closed_loop_ttfab_p95_ms=None if curve is None or mean_occ <= 0 else curve(mean_occ),
        occupancy=OccupancySeries(
            step_s=OCCUPANCY_STEP_S,
            measured=occupancy_at(inside, start_epoch + grid),
            model_mean=model_occupancy,
        ),
    )


# The main job's two rates, as multiples of X(Q_max): one below capacity, one above.
BELOW_SHARE = 0.5
ABOVE_SHARE = 1.5

WHY_THEY_DIFFER = (
    "the model serves at X(n), the closed-loop ladder's average throughput at n users, as a "
    "memoryless rate; real service times follow utterance length and the engine's batching, and "
    "an open loop sends bursts the closed loop never did. The run is short (tens of arrivals), "
    "so its shed share carries Poisson noise of about 1/√arrivals, and the machine is shared, so "
    "X itself moves between the ladder and the surge."
)


def surge_note(runs: Sequence[SurgeRun], x_at_q_max_rps: float) -> str:
    """How close the model came, run by run, and why they differ (the main job's report)."""
    lines = [f"surge check against X(Q_max) = {x_at_q_max_rps:.3f} rps:"]
    for run in runs:
        p = run.prediction
        noise = 1 / math.sqrt(run.arrivals) if run.arrivals else float("nan")
        lines.append(
            f"  {run.rate_rps:.3f} rps ({run.rate_rps / x_at_q_max_rps:.2f} × X): shed "
            f"{run.shed_share:.1%} measured vs {p.shed_share:.1%} modelled "
            f"(difference {100 * (run.shed_share - p.shed_share):+.1f} points, Poisson noise "
            f"±{noise:.0%}); mean occupancy {run.mean_occupancy:.2f} vs {p.mean_occupancy:.2f}; "
            f"served {run.served_rps:.3f} rps vs the ladder's X({run.mean_occupancy:.2f}) = "
            f"{run.ladder_rps_at_occupancy:.3f} rps; admitted p95 TTFAB "
            f"{_ms(run.ttfab_p95_ms)} from the intended send vs the ladder's "
            f"{_ms(run.closed_loop_ttfab_p95_ms)} at that occupancy"
        )
    lines.append(f"  why they differ: {WHY_THEY_DIFFER}")
    return "\n".join(lines)


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f} ms"
