"""The day a schedule is made from: each minute's need at λ_out, and the minutes whose ramp the
reactive rule cannot follow.

A fleet the reactive rule sized for minute m holds need[m] = max(1, ⌈r[m] / λ_out⌉) instances,
and serves up to need[m] · λ_out · s (s the surge ratio: the headroom λ_out leaves) before it
sheds. Whatever it asks for when the load grows serves one planned T_total later at the
earliest (detection plus start-up). So minute m's ramp cannot be followed when any rate within
the next `lead_minutes` exceeds need[m] · λ_out · s: the ramp alone eats the surge headroom
before the reactive rule's instances serve.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Sequence

import numpy as np

MINUTE_S = 60
RATE_DECIMALS = 3


def rounded_rates(rates_rps: Sequence[float]) -> list[float]:
    """The per-minute rates as a plan records them (3 decimals: a thousandth of a request/s)."""
    return [round(float(r), RATE_DECIMALS) for r in rates_rps]


def rates_sha256(rates_rps: Sequence[float]) -> str:
    """sha256 of the recorded rates as compact JSON: the schedule's input, named by its hash."""
    text = json.dumps(rounded_rates(rates_rps), separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def lead_minutes(lead_s: float) -> int:
    """Whole minutes a step must come ahead (cron's granularity): the lead, rounded up."""
    return max(1, math.ceil(lead_s / MINUTE_S - 1e-9))


def instances_needed(rates_rps: np.ndarray, per_instance_rps: float) -> np.ndarray:
    """The fewest instances holding each rate at `per_instance_rps` each, at least one."""
    return np.maximum(1, np.ceil(rates_rps / per_instance_rps - 1e-9)).astype(np.int64)


def max_ahead(values: np.ndarray, minutes: int) -> np.ndarray:
    """For each minute m, the largest value over minutes m+1 .. m+`minutes` (0 past the end)."""
    padded = np.concatenate((values, np.zeros(minutes, dtype=values.dtype)))
    windows = np.lib.stride_tricks.sliding_window_view(padded[1:], minutes)
    return windows.max(axis=1)[: len(values)]


def unfollowable(
    rates_rps: np.ndarray, per_instance_rps: float, surge_ratio: float, minutes: int
) -> np.ndarray:
    """Minutes whose ramp within the next `minutes` outgrows the fleet sized for them."""
    need = instances_needed(rates_rps, per_instance_rps)
    return max_ahead(rates_rps, minutes) > need * per_instance_rps * surge_ratio + 1e-9
