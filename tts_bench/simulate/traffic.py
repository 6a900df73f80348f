"""Traffic: arrivals per tick from a trace file or a synthetic generator.

Both models take a `Traffic`: arrival counts per tick, spread uniformly within each tick.
That is exactly a Poisson process when the counts are Poisson (the synthetic generators,
one-second ticks at the rate of the tick's midpoint), and exactly a per-minute trace's meaning
(its counts, spread over the minute). A timestamp trace keeps its exact times as well, for the
request-level model; the fleet model bins it into one-second ticks.

Synthetic specs: `steady:RPS`, `diurnal:TROUGH_RPS:PEAK_RPS:PERIOD_S` (trough at t = 0, peak
at half the period) and `surge:BASE_RPS:RATIO:AT_S` (BASE, stepping to BASE × RATIO at AT_S
for one planned T_total). `steady` and `diurnal` also take a surge: `diurnal:10:5000:86400+surge:1.25:21600`
multiplies the rate by 1.25 from 6 h on for one planned T_total.
"""

from __future__ import annotations

import csv
import math
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tts_bench.errors import TtsBenchError

SYNTHETIC_TICK_S = 1.0
TRACE_TICK_S = 1.0
MINUTE_S = 60.0
DEFAULT_STEADY_DURATION_S = 3600.0


class TrafficError(TtsBenchError):
    """A trace file or a synthetic spec that cannot be read; the message names the fix."""


@dataclass(frozen=True)
class Traffic:
    tick_s: float
    counts: np.ndarray  # int64 arrivals per tick
    description: str
    timestamps_s: np.ndarray | None = None  # exact times, when a timestamp trace gave them

    @property
    def duration_s(self) -> float:
        return len(self.counts) * self.tick_s

    @property
    def requests(self) -> int:
        return int(self.counts.sum())

    def rate_at_start_rps(self) -> float:
        """Mean offered rate over the first minute (or the whole run, if shorter)."""
        ticks = max(1, min(len(self.counts), math.ceil(MINUTE_S / self.tick_s)))
        return float(self.counts[:ticks].sum()) / (ticks * self.tick_s)

    def arrival_times_s(self, rng: np.random.Generator) -> np.ndarray:
        """Every arrival time, sorted: exact for a timestamp trace, else uniform in its tick."""
        if self.timestamps_s is not None:
            return self.timestamps_s[self.timestamps_s < self.duration_s]
        starts = np.repeat(np.arange(len(self.counts)) * self.tick_s, self.counts)
        return np.sort(starts + rng.random(starts.size) * self.tick_s)


@dataclass(frozen=True)
class SyntheticShape:
    """A rate over time: steady or diurnal, optionally times a surge for one hold."""

    kind: str  # "steady" | "diurnal"
    low_rps: float
    high_rps: float
    period_s: float
    surge_ratio: float = 1.0
    surge_at_s: float = math.inf
    spec: str = ""

    def rate_rps(self, t_s: np.ndarray, surge_hold_s: float) -> np.ndarray:
        if self.kind == "steady":
            rate = np.full(t_s.shape, self.low_rps)
        else:
            swing = (1 - np.cos(2 * np.pi * t_s / self.period_s)) / 2
            rate = self.low_rps + (self.high_rps - self.low_rps) * swing
        surging = (t_s >= self.surge_at_s) & (t_s < self.surge_at_s + surge_hold_s)
        return np.where(surging, rate * self.surge_ratio, rate)

    def default_duration_s(self, surge_hold_s: float) -> float:
        base = self.period_s if self.kind == "diurnal" else DEFAULT_STEADY_DURATION_S
        if math.isfinite(self.surge_at_s) and self.kind == "steady":
            return max(base, self.surge_at_s + 2 * surge_hold_s)
        return base


_NUMBER = r"([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)"
_FORMS = {
    "steady": re.compile(rf"steady:{_NUMBER}"),
    "diurnal": re.compile(rf"diurnal:{_NUMBER}:{_NUMBER}:{_NUMBER}"),
    "surge": re.compile(rf"surge:{_NUMBER}:{_NUMBER}:{_NUMBER}"),
}
_SURGE_SUFFIX = re.compile(rf"\+surge:{_NUMBER}:{_NUMBER}$")
SYNTHETIC_HELP = (
    "steady:RPS, diurnal:TROUGH_RPS:PEAK_RPS:PERIOD_S or surge:BASE_RPS:RATIO:AT_S "
    "(steady and diurnal may end in +surge:RATIO:AT_S)"
)


def parse_synthetic(spec: str) -> SyntheticShape:
    text = spec.strip()
    surge_ratio, surge_at = 1.0, math.inf
    if suffix := _SURGE_SUFFIX.search(text):
        surge_ratio, surge_at = float(suffix.group(1)), float(suffix.group(2))
        text = text[: suffix.start()]
        if text.startswith("surge:"):
            raise TrafficError(f"--synthetic {spec!r}: a surge cannot carry another surge")
    found = next(((k, m) for k, f in _FORMS.items() if (m := f.fullmatch(text))), None)
    if found is None:
        raise TrafficError(f"--synthetic {spec!r}: expected {SYNTHETIC_HELP}")
    kind, values = found[0], [float(g) for g in found[1].groups()]
    if kind == "steady":
        shape = SyntheticShape("steady", values[0], values[0], math.inf)
    elif kind == "diurnal":
        trough, peak, period = values
        if trough > peak:
            raise TrafficError(
                f"--synthetic {spec!r}: the trough {trough:g} is above the peak {peak:g}"
            )
        if period <= 0:
            raise TrafficError(f"--synthetic {spec!r}: the period must be positive")
        shape = SyntheticShape("diurnal", trough, peak, period)
    else:
        base, surge_ratio, surge_at = values
        shape = SyntheticShape("steady", base, base, math.inf)
    if surge_ratio <= 0:
        raise TrafficError(f"--synthetic {spec!r}: the surge ratio must be positive")
    return SyntheticShape(
        shape.kind, shape.low_rps, shape.high_rps, shape.period_s, surge_ratio, surge_at, spec
    )


def synthetic_traffic(
    shape: SyntheticShape, duration_s: float, surge_hold_s: float, rng: np.random.Generator
) -> Traffic:
    """Poisson arrivals: per one-second tick, a Poisson count at the tick's midpoint rate."""
    ticks = max(1, math.ceil(duration_s / SYNTHETIC_TICK_S))
    midpoints = (np.arange(ticks) + 0.5) * SYNTHETIC_TICK_S
    rate = shape.rate_rps(midpoints, surge_hold_s)
    counts = rng.poisson(rate * SYNTHETIC_TICK_S).astype(np.int64)
    return Traffic(SYNTHETIC_TICK_S, counts, f"synthetic {shape.spec} (Poisson)")


def load_trace(path: Path, duration_s: float | None) -> Traffic:
    """A `timestamp_s` CSV (one arrival per line, sorted) or a `minute,count` CSV."""
    try:
        with path.open(newline="", encoding="utf-8") as handle:
            rows = list(csv.reader(handle))
    except FileNotFoundError:
        raise TrafficError(f"{path}: no such trace file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise TrafficError(f"{path}: cannot read the trace: {exc}") from None
    if not rows:
        raise TrafficError(f"{path}: the trace is empty; it needs a header line")
    header = [cell.strip() for cell in rows[0]]
    if "timestamp_s" in header:
        return _timestamps(path, rows[1:], header.index("timestamp_s"), duration_s)
    if header == ["minute", "count"]:
        return _minutes(path, rows[1:], duration_s)
    raise TrafficError(
        f"{path}: header {','.join(header)!r} has no timestamp_s column and is not minute,count"
    )


def _number(path: Path, line: int, row: list[str], column: int, name: str) -> float:
    try:
        value = float(row[column])
    except (IndexError, ValueError):
        cell = row[column] if column < len(row) else ""
        raise TrafficError(f"{path}:{line}: {name} {cell!r} is not a number") from None
    if not math.isfinite(value) or value < 0:
        raise TrafficError(f"{path}:{line}: {name} {value:g} must be a non-negative number")
    return value


def _timestamps(
    path: Path, rows: list[list[str]], column: int, duration_s: float | None
) -> Traffic:
    times = np.empty(len(rows))
    previous = 0.0
    for i, row in enumerate(rows):
        value = _number(path, i + 2, row, column, "timestamp_s")
        if value < previous:
            raise TrafficError(
                f"{path}:{i + 2}: timestamp_s {value:g} comes before {previous:g}; sort the trace"
            )
        times[i] = previous = value
    if not len(times):
        raise TrafficError(f"{path}: the trace has a header but no arrivals")
    end = (
        duration_s
        if duration_s is not None
        else math.floor(times[-1] / TRACE_TICK_S + 1) * TRACE_TICK_S
    )
    kept = times[times < end]
    ticks = max(1, math.ceil(end / TRACE_TICK_S))
    counts = np.bincount((kept // TRACE_TICK_S).astype(np.int64), minlength=ticks)[:ticks]
    return Traffic(TRACE_TICK_S, counts.astype(np.int64), f"trace {path.name}", kept)


def _minutes(path: Path, rows: list[list[str]], duration_s: float | None) -> Traffic:
    minutes, counts = [], []
    for i, row in enumerate(rows):
        minute = _number(path, i + 2, row, 0, "minute")
        count = _number(path, i + 2, row, 1, "count")
        if minute != int(minute) or count != int(count):
            raise TrafficError(f"{path}:{i + 2}: minute and count must be whole numbers")
        if minutes and minute <= minutes[-1]:
            raise TrafficError(
                f"{path}:{i + 2}: minute {minute:g} does not come after {minutes[-1]:g}; sort the trace"
            )
        minutes.append(int(minute))
        counts.append(int(count))
    if not minutes:
        raise TrafficError(f"{path}: the trace has a header but no minutes")
    total = minutes[-1] + 1 if duration_s is None else math.ceil(duration_s / MINUTE_S)
    per_minute = np.zeros(max(1, total), dtype=np.int64)
    for minute, count in zip(minutes, counts, strict=True):
        if minute < len(per_minute):
            per_minute[minute] = count
    return Traffic(MINUTE_S, per_minute, f"per-minute trace {path.name}")
