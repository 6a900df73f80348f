"""How a rehearsal and its replay agree: pure rules over the two runs' records.

- **Desired counts**: at each whole minute after the first scale-out (of any run), the
  rehearsed desired count against the simulated one at that minute or one metric period either
  side; they agree within max(1, 10 %) of the simulated count, and two runs agree when 95 % of
  the minutes do. The replays disagree among themselves too: the rules are sensitive to the order
  of events that service draws decide (which policy's first scale-out comes first sets the
  capacity a cooldown sizes from), so one replay is no yardstick. The rehearsal is judged as one
  more replay: the share of replays it agrees with must not fall below the 5 % quantile of each
  replay's share of the others it agrees with.
  The replays' band (their lowest and highest count at each minute or a period either side,
  widened by the same tolerance) says it to the eye: a rehearsal inside it did nothing the
  replays could not. For the fleet rule the band is the verdict (`band_passed`): its replays
  disagree among themselves so often that the pairwise quantile can be 0 and pass anything, so
  the rehearsal must lie inside the band on 95 % of the minutes.
- **Shed shares**: the replays are runs of the same fleet on the same arrivals with other service
  draws, so a rehearsal that is that fleet lies within their spread: within 3 × sd × sqrt(1 + 1/R)
  of their mean over R replays (a new run's deviation from an R-run mean), plus one request's
  share so that a fleet that never sheds is not judged by a single request. The fleet rule's
  rehearsal must lie within the replays' 5–95 % range (`shed_range`), widened by the same one
  request's share (so a range of 0 admits 0, or one request).
- **Detection lags**: for each scale-out that opened its alarm's episode, the time from the start
  of the first breaching datapoint's period to the action (what the organic ttotal measures),
  reconstructed the same way in both runs: the alarm evaluated over its datapoints at each of its
  periods with `planning.aws.scaling.read_alarm`.
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from tts_bench.planning.aws import scaling as aws_scaling

DESIRED_TOLERANCE = 0.10
REQUIRED_SHARE = 0.95
SHED_SIGMAS = 3.0


@dataclass(frozen=True)
class Steps:
    """A step function: `values[i]` holds from `times[i]` (sorted) until the next time."""

    times: Sequence[float]
    values: Sequence[float]

    def at(self, t_s: float, before: float = math.nan) -> float:
        i = bisect.bisect_right(self.times, t_s + 1e-9) - 1
        return self.values[i] if i >= 0 else before

    def integral(self, start_s: float, end_s: float, before: float) -> float:
        """∫ over [start_s, end_s], `before` until the first time."""
        edges = [start_s, *(t for t in self.times if start_s < t < end_s), end_s]
        return sum(self.at(a, before) * (b - a) for a, b in itertools.pairwise(edges))


def desired_agreement(
    rehearsed: Steps,
    simulated: Steps,
    from_s: float,
    duration_s: float,
    shift_s: float,
    initial: int,
) -> tuple[int, int]:
    """(minutes compared, minutes agreeing) from the first whole minute at or after `from_s`."""
    minutes = agreeing = 0
    for t in _minutes(from_s, duration_s):
        ours = rehearsed.at(t, initial)
        candidates = [simulated.at(t + d, initial) for d in (-shift_s, 0.0, shift_s)]
        minutes += 1
        agreeing += any(abs(ours - sim) <= _slack(sim) for sim in candidates)
    return minutes, agreeing


def replay_band(
    replays: Sequence[Steps],
    from_s: float,
    duration_s: float,
    shift_s: float,
    initial: int,
) -> list[tuple[float, float, float]]:
    """(minute, lowest, highest) desired count of any replay at that minute or one metric period
    either side, for each whole minute after `from_s`: the spread the service draws alone give."""
    band = []
    for t in _minutes(from_s, duration_s):
        counts = [line.at(t + d, initial) for line in replays for d in (-shift_s, 0.0, shift_s)]
        band.append((t, min(counts), max(counts)))
    return band


def within_band(rehearsed: Steps, band: Sequence[tuple[float, float, float]], initial: int) -> int:
    """Minutes of `band` where the rehearsed count lies in it, widened by max(1, 10 %)."""
    inside = 0
    for t, low, high in band:
        ours = rehearsed.at(t, initial)
        inside += low - _slack(low) <= ours <= high + _slack(high)
    return inside


def _slack(count: float) -> float:
    """How far a desired count may be from `count` and still agree: max(1, 10 %)."""
    return max(1.0, DESIRED_TOLERANCE * count)


def _minutes(from_s: float, duration_s: float) -> list[float]:
    """The whole minutes after `from_s`, up to `duration_s`."""
    first = math.ceil(from_s / 60 - 1e-9)
    return [
        60.0 * m
        for m in range(first, math.floor(duration_s / 60 + 1e-9) + 1)
        if from_s - 1e-9 < 60.0 * m <= duration_s + 1e-9
    ]


@dataclass(frozen=True)
class Exchangeable:
    share: float  # of the replays the rehearsal agrees with
    replay_quantile: float  # the 5 % quantile of each replay's share of the others
    passed: bool


def exchangeable(rehearsal: Sequence[bool], pairwise: Sequence[Sequence[bool]]) -> Exchangeable:
    """Whether the rehearsal agrees with the replays as often as a replay agrees with the others:
    `rehearsal[k]` whether it agrees with replay k, `pairwise[i][j]` whether replays i and j do."""
    runs = len(rehearsal)
    share = sum(rehearsal) / runs if runs else 1.0
    if runs < 2:
        return Exchangeable(share, share, bool(share >= 1))
    scores = [sum(pairwise[i][j] for j in range(runs) if j != i) / (runs - 1) for i in range(runs)]
    quantile = float(np.quantile(scores, 0.05))
    return Exchangeable(share, quantile, share >= quantile - 1e-12)


def band_passed(within: int, minutes: int) -> bool:
    """The fleet rule's desired verdict: inside the replays' band on `REQUIRED_SHARE` of the
    compared minutes (none compared: nothing to judge)."""
    return not minutes or within / minutes >= REQUIRED_SHARE - 1e-12


@dataclass(frozen=True)
class ShedRange:
    low: float
    high: float
    passed: bool


def shed_range(rehearsed_share: float, requests: int, replay_shares: Sequence[float]) -> ShedRange:
    """The fleet rule's shed verdict: within the replays' 5–95 % range, one request's share wider."""
    if not replay_shares:
        return ShedRange(0.0, 0.0, rehearsed_share <= 1 / max(requests, 1))
    low, high = (float(q) for q in np.quantile(np.asarray(replay_shares), [0.05, 0.95]))
    slack = 1 / max(requests, 1)
    return ShedRange(low, high, low - slack - 1e-12 <= rehearsed_share <= high + slack + 1e-12)


@dataclass(frozen=True)
class ShedSpread:
    mean: float
    sd: float
    tolerance: float
    passed: bool


def shed_spread(
    rehearsed_share: float, requests: int, replay_shares: Sequence[float]
) -> ShedSpread:
    shares = np.asarray(replay_shares, dtype=float)
    runs = len(shares)
    mean = float(shares.mean()) if runs else 0.0
    sd = float(shares.std(ddof=1)) if runs > 1 else 0.0
    tolerance = SHED_SIGMAS * sd * math.sqrt(1 + 1 / max(runs, 1)) + 1 / max(requests, 1)
    return ShedSpread(mean, sd, tolerance, abs(rehearsed_share - mean) <= tolerance + 1e-12)


def alarm_episodes(
    rule: aws_scaling.AlarmRule, points: Sequence[aws_scaling.Datapoint], until_s: float
) -> list[tuple[float, float]]:
    """(evaluation that put the alarm in ALARM, start of the earliest breaching period it read),
    for each time the alarm entered ALARM, its evaluations at each of its periods from the run's
    start (`read_alarm`, publication delay included)."""
    episodes: list[tuple[float, float]] = []
    state = aws_scaling.AlarmState.INSUFFICIENT_DATA
    period = rule.period_s
    # A metric-math alarm's points are read back as its expression's own values.
    rule = replace(rule, after_one_less=None)
    for k in range(1, int(until_s // period) + 1):
        t = k * period
        reading = aws_scaling.read_alarm(rule, points, t)
        if reading.state is aws_scaling.AlarmState.ALARM and state is not reading.state:
            last_end = math.floor((t - rule.delay_s) / period + 1e-9) * period
            first = last_end - rule.evaluation_periods * period
            breaching = [
                i
                for i, value in enumerate(reading.points)
                if value is not None
                and aws_scaling.breaches(value, rule.comparison, rule.threshold)
            ]
            episodes.append((t, first + period * (breaching[0] if breaching else 0)))
        state = reading.state
    return episodes


@dataclass(frozen=True)
class Action:
    """A change of the desired count and the alarm that asked for it (None: unknown)."""

    t_s: float
    before: int
    after: int
    alarm: str | None


def detection_lags(
    actions: Sequence[Action],
    rules: dict[str, aws_scaling.AlarmRule],
    points: dict[str, Sequence[aws_scaling.Datapoint]],
    until_s: float,
    slack_s: float = aws_scaling.METRIC_PERIOD_S,
) -> list[float | None]:
    """Each action's detection lag: for a scale-out that is the first of its alarm's episode,
    the action's time less the episode's breach start; None for any other action. `slack_s`
    lets an action follow its reconstructed evaluation by a read delay."""
    episodes = {
        name: alarm_episodes(rule, points.get(name, ()), until_s + slack_s)
        for name, rule in rules.items()
    }
    lags: list[float | None] = []
    taken: set[tuple[str, float]] = set()
    for action in actions:
        if action.after <= action.before or action.alarm not in episodes:
            lags.append(None)
            continue
        opened = [e for e in episodes[action.alarm] if e[0] <= action.t_s + 1e-9]
        if not opened or (action.alarm, opened[-1][0]) in taken:
            lags.append(None)
            continue
        taken.add((action.alarm, opened[-1][0]))
        lags.append(round(action.t_s - opened[-1][1], 3))
    return lags


def scaled_out_before_shedding(
    first_scale_out_s: float | None, first_shed_s: float | None
) -> bool | None:
    """True when the first scale-out came before the first shed (or nothing was shed)."""
    if first_scale_out_s is None:
        return None if first_shed_s is None else False
    return first_shed_s is None or first_scale_out_s <= first_shed_s
