"""Traffic: arrivals per tick from a trace file or a synthetic generator.

Both models take a `Traffic`: arrival counts per tick, spread uniformly within each tick.
That is exactly a Poisson process when the counts are Poisson (the synthetic generators,
one-second ticks at the rate of the tick's midpoint), and exactly a per-minute trace's meaning
(its counts, spread over the minute). A timestamp trace keeps its exact times as well, for the
request-level model; the fleet model bins it into one-second ticks.

Synthetic specs: `steady:RPS`, `diurnal:TROUGH_RPS:PEAK_RPS:PERIOD_S` (trough at t = 0, peak
at half the period) and `surge:BASE_RPS:RATIO:AT_S` (BASE, stepping to BASE × RATIO at AT_S
for one planned T_total). `steady` and `diurnal` also take a surge: `diurnal:10:5000:86400+surge:1.25:21600`
multiplies the rate by 1.25 from 6 h on for one planned T_total. A week: `+weekend:SCALE` last
(`diurnal:10:2000:86400+weekend:0.3`) makes the run's days 5 and 6 a weekend, the shape × SCALE
(day 0 is a Monday, as the simulator's clock for a schedule), and runs a week by default.

Bounds, checked before anything is sized or drawn: a run lasts at most `MAX_DURATION_S` (a
month of one-second ticks), holds at most `MAX_ARRIVALS` arrivals (a 5000 requests/s day is
432 million) and at most `MAX_TICK_ARRIVALS` in one tick (the fleet model spreads one tick's
arrivals at a time). A trace is read as a stream, a bounded line at a time, so its memory is its
per-tick counts (8 bytes a second) whatever the file's size; its exact times are kept for the
request-level model only up to `MAX_EXACT_TIMES` arrivals. Rows past `duration_s`, when it is
given, are not read.
"""

from __future__ import annotations

import csv
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

import numpy as np

from tts_bench.errors import TtsBenchError

SYNTHETIC_TICK_S = 1.0
TRACE_TICK_S = 1.0
MINUTE_S = 60.0
DEFAULT_STEADY_DURATION_S = 3600.0
DAY_S = 86_400.0
WEEK_S = 7 * DAY_S
WEEKEND_DAYS = (5, 6)  # Saturday and Sunday of a week from Monday
MAX_DURATION_S = 31 * 86400.0
MAX_ARRIVALS = 1_000_000_000
MAX_TICK_ARRIVALS = 10_000_000
MAX_EXACT_TIMES = 1_000_000
MAX_LINE_CHARS = 4096
CHUNK_ROWS = 65536


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
    weekend_scale: float | None = None  # a week: the rate on days 5 and 6 × this

    def rate_rps(self, t_s: np.ndarray, surge_hold_s: float) -> np.ndarray:
        if self.kind == "steady":
            rate = np.full(t_s.shape, self.low_rps)
        else:
            swing = (1 - np.cos(2 * np.pi * t_s / self.period_s)) / 2
            rate = self.low_rps + (self.high_rps - self.low_rps) * swing
        if self.weekend_scale is not None:
            weekend = np.isin(np.floor(t_s / DAY_S) % 7, WEEKEND_DAYS)
            rate = np.where(weekend, rate * self.weekend_scale, rate)
        surging = (t_s >= self.surge_at_s) & (t_s < self.surge_at_s + surge_hold_s)
        return np.where(surging, rate * self.surge_ratio, rate)

    def default_duration_s(self, surge_hold_s: float) -> float:
        if self.weekend_scale is not None:
            return WEEK_S
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
_WEEKEND_SUFFIX = re.compile(rf"\+weekend:{_NUMBER}$")
SYNTHETIC_HELP = (
    "steady:RPS, diurnal:TROUGH_RPS:PEAK_RPS:PERIOD_S or surge:BASE_RPS:RATIO:AT_S "
    "(steady and diurnal may end in +surge:RATIO:AT_S; any may end in +weekend:SCALE)"
)


def parse_synthetic(spec: str) -> SyntheticShape:
    text = spec.strip()
    weekend = None
    if week := _WEEKEND_SUFFIX.search(text):
        weekend, text = float(week.group(1)), text[: week.start()]
        if not 0 < weekend < math.inf:
            raise TrafficError(f"--synthetic {spec!r}: the weekend scale must be positive")
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
    given = [*values, surge_ratio, surge_at] if suffix else values
    if not all(math.isfinite(v) for v in given):
        raise TrafficError(f"--synthetic {spec!r}: a number is too large to be finite")
    if kind == "steady":
        shape = SyntheticShape("steady", values[0], values[0], math.inf)
    elif kind == "diurnal":
        trough, peak, period = values
        if trough > peak:
            raise TrafficError(
                f"--synthetic {spec!r}: the trough {trough:g} is above the peak {peak:g}"
            )
        if period < 2 * SYNTHETIC_TICK_S:
            raise TrafficError(
                f"--synthetic {spec!r}: the period must be at least {2 * SYNTHETIC_TICK_S:g} s "
                f"(rates are drawn per {SYNTHETIC_TICK_S:g} s tick)"
            )
        shape = SyntheticShape("diurnal", trough, peak, period)
    else:
        base, surge_ratio, surge_at = values
        shape = SyntheticShape("steady", base, base, math.inf)
    if surge_ratio <= 0:
        raise TrafficError(f"--synthetic {spec!r}: the surge ratio must be positive")
    return SyntheticShape(
        shape.kind, shape.low_rps, shape.high_rps, shape.period_s, surge_ratio, surge_at, spec,
        weekend,
    )  # fmt: skip


def check_duration(duration_s: float) -> None:
    """Refuse a run the simulator cannot hold: not positive, not finite, past a month."""
    if not 0 < duration_s <= MAX_DURATION_S:
        raise TrafficError(
            f"--duration-s {duration_s:g}: give more than 0 and at most {MAX_DURATION_S:g} s "
            f"({MAX_DURATION_S / 86400:g} days)"
        )


def _too_many(what: str, count: float) -> TrafficError:
    return TrafficError(
        f"{what} {count:.4g} arrivals: more than the {MAX_ARRIVALS:.0e} one run may hold "
        "(a 5000 requests/s day is 4.3e+08); shorten the run or lower the rate"
    )


def _with_margin(mean: float) -> float:
    return mean + 10 * math.sqrt(mean) + 10


def synthetic_traffic(
    shape: SyntheticShape, duration_s: float, surge_hold_s: float, rng: np.random.Generator
) -> Traffic:
    """Poisson arrivals: per one-second tick, a Poisson count at the tick's midpoint rate. The
    expected totals are checked before anything is drawn."""
    if not 0 < duration_s <= MAX_DURATION_S:
        raise TrafficError(
            f"--synthetic {shape.spec!r}: a run of {duration_s:g} s is longer than the longest "
            f"({MAX_DURATION_S:g} s, {MAX_DURATION_S / 86400:g} days); give --duration-s or "
            "an earlier surge"
        )
    ticks = max(1, math.ceil(duration_s / SYNTHETIC_TICK_S))
    midpoints = (np.arange(ticks) + 0.5) * SYNTHETIC_TICK_S
    with np.errstate(all="ignore"):
        mean = shape.rate_rps(midpoints, surge_hold_s) * SYNTHETIC_TICK_S
        expected, busiest = float(mean.sum()), float(mean.max())
    # Ten standard deviations above the mean: no draw passes a bound its spec was allowed by.
    if not math.isfinite(expected) or _with_margin(expected) > MAX_ARRIVALS:
        raise _too_many(f"--synthetic {shape.spec!r} expects", expected)
    if _with_margin(busiest) > MAX_TICK_ARRIVALS:
        raise TrafficError(
            f"--synthetic {shape.spec!r}: {busiest:.4g} arrivals in one second is more than "
            f"{MAX_TICK_ARRIVALS:.0e}; lower the rate"
        )
    counts = rng.poisson(mean).astype(np.int64)
    return Traffic(SYNTHETIC_TICK_S, counts, f"synthetic {shape.spec} (Poisson)")


def load_trace(path: Path, duration_s: float | None) -> Traffic:
    """A `timestamp_s` CSV (one arrival per line, sorted) or a `minute,count` CSV, streamed."""
    if duration_s is not None:
        check_duration(duration_s)
    try:
        with path.open(newline="", encoding="utf-8-sig") as handle:
            rows = _rows(path, handle)
            try:
                header = [cell.strip() for cell in next(rows)[1]]
            except StopIteration:
                raise TrafficError(f"{path}: the trace is empty; it needs a header line") from None
            if "timestamp_s" in header:
                return _timestamps(path, rows, header.index("timestamp_s"), duration_s)
            if header == ["minute", "count"]:
                return _minutes(path, rows, duration_s)
    except FileNotFoundError:
        raise TrafficError(f"{path}: no such trace file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise TrafficError(f"{path}: cannot read the trace: {exc}") from None
    shown = ",".join(header)[:200]
    raise TrafficError(
        f"{path}: header {shown!r} has no timestamp_s column and is not minute,count"
    )


def _lines(path: Path, handle: TextIO) -> Iterator[str]:
    """The file's lines, none longer than MAX_LINE_CHARS (a file with no line breaks, such as
    /dev/zero, is refused at its first line, not read whole)."""
    number = 0
    while line := handle.readline(MAX_LINE_CHARS + 1):
        number += 1
        if len(line) > MAX_LINE_CHARS:
            raise TrafficError(
                f"{path}:{number}: a line longer than {MAX_LINE_CHARS} characters; "
                "is this a CSV trace?"
            )
        yield line


def _rows(path: Path, handle: TextIO) -> Iterator[tuple[int, list[str]]]:
    """(line number, cells) of each non-blank row; the header is the first."""
    reader = csv.reader(_lines(path, handle), strict=True)
    try:
        for row in reader:
            if any(cell.strip() for cell in row):
                yield reader.line_num, row
    except csv.Error as exc:
        raise TrafficError(f"{path}:{reader.line_num}: not CSV: {exc}") from None


def _number(path: Path, line: int, row: list[str], column: int, name: str) -> float:
    try:
        value = float(row[column])
    except (IndexError, ValueError):
        cell = row[column] if column < len(row) else ""
        raise TrafficError(f"{path}:{line}: {name} {cell[:40]!r} is not a number") from None
    if not math.isfinite(value) or value < 0:
        raise TrafficError(f"{path}:{line}: {name} {value:g} must be a non-negative number")
    return value


class _Counts:
    """Arrivals per tick, grown as a trace is read, within the bounds."""

    def __init__(self, path: Path, tick_s: float) -> None:
        self.path, self.tick_s = path, tick_s
        self.counts = np.zeros(1024, dtype=np.int64)
        self.total = 0

    def add(self, ticks: np.ndarray, weights: np.ndarray | None = None) -> None:
        if not ticks.size:
            return
        needed = int(ticks.max()) + 1
        if needed > len(self.counts):
            grown = np.zeros(max(needed, 2 * len(self.counts)), dtype=np.int64)
            grown[: len(self.counts)] = self.counts
            self.counts = grown
        np.add.at(self.counts, ticks, 1 if weights is None else weights)
        self.total += int(ticks.size if weights is None else weights.sum())
        if self.total > MAX_ARRIVALS:
            raise _too_many(f"{self.path}: the trace holds more than", self.total)
        busiest = int(self.counts[ticks].max())
        if busiest > MAX_TICK_ARRIVALS:
            raise TrafficError(
                f"{self.path}: {busiest} arrivals in one {self.tick_s:g} s tick, more than "
                f"{MAX_TICK_ARRIVALS:.0e}; is this the trace you meant?"
            )

    def sized(self, ticks: int) -> np.ndarray:
        out = np.zeros(max(1, ticks), dtype=np.int64)
        kept = self.counts[: len(out)]
        out[: len(kept)] = kept
        return out


def _past_the_end(path: Path, line: int, name: str, value_s: float) -> TrafficError:
    return TrafficError(
        f"{path}:{line}: {name} reaches {value_s:g} s, past the longest run "
        f"({MAX_DURATION_S:g} s); times are seconds from the trace's start (an epoch "
        "timestamp? subtract the first one), or give --duration-s"
    )


def _timestamps(
    path: Path, rows: Iterator[tuple[int, list[str]]], column: int, duration_s: float | None
) -> Traffic:
    end = duration_s if duration_s is not None else MAX_DURATION_S
    counts = _Counts(path, TRACE_TICK_S)
    exact: list[np.ndarray] | None = []
    chunk: list[float] = []
    previous, last, rows_seen = 0.0, None, False

    def flush() -> None:
        nonlocal exact
        if not chunk:
            return
        times = np.array(chunk)
        counts.add((times // TRACE_TICK_S).astype(np.int64))
        if exact is not None:
            exact.append(times)
            if counts.total > MAX_EXACT_TIMES:
                exact = None  # the fleet model needs only the counts
        chunk.clear()

    for line, row in rows:
        rows_seen = True
        value = _number(path, line, row, column, "timestamp_s")
        if value < previous:
            raise TrafficError(
                f"{path}:{line}: timestamp_s {value:g} comes before {previous:g}; sort the trace"
            )
        if value >= end:
            if duration_s is not None:
                break  # the run ends before it: the rest is not read
            raise _past_the_end(path, line, "timestamp_s", value)
        chunk.append(value)
        previous = last = value
        if len(chunk) >= CHUNK_ROWS:
            flush()
    flush()
    if not rows_seen:
        raise TrafficError(f"{path}: the trace has a header but no arrivals")
    if duration_s is None:
        duration_s = math.floor((last or 0.0) / TRACE_TICK_S + 1) * TRACE_TICK_S
    ticks = max(1, math.ceil(duration_s / TRACE_TICK_S))
    kept = np.concatenate(exact) if exact else (np.empty(0) if exact is not None else None)
    return Traffic(TRACE_TICK_S, counts.sized(ticks), f"trace {path.name}", kept)


def _minutes(
    path: Path, rows: Iterator[tuple[int, list[str]]], duration_s: float | None
) -> Traffic:
    last_minute = math.ceil((duration_s or MAX_DURATION_S) / MINUTE_S) - 1
    counts = _Counts(path, MINUTE_S)
    previous: int | None = None
    rows_seen = False
    for line, row in rows:
        rows_seen = True
        minute = _number(path, line, row, 0, "minute")
        count = _number(path, line, row, 1, "count")
        if minute != int(minute) or count != int(count):
            raise TrafficError(f"{path}:{line}: minute and count must be whole numbers")
        if previous is not None and minute <= previous:
            raise TrafficError(
                f"{path}:{line}: minute {minute:g} does not come after {previous}; sort the trace"
            )
        if minute > last_minute:
            if duration_s is not None:
                break
            raise _past_the_end(path, line, "minute", minute * MINUTE_S)
        if count > MAX_TICK_ARRIVALS:
            raise TrafficError(
                f"{path}:{line}: count {count:g} in one minute is more than "
                f"{MAX_TICK_ARRIVALS:.0e}; is this the trace you meant?"
            )
        counts.add(np.array([int(minute)]), np.array([int(count)]))
        previous = int(minute)
    if not rows_seen:
        raise TrafficError(f"{path}: the trace has a header but no minutes")
    total = (previous or 0) + 1 if duration_s is None else math.ceil(duration_s / MINUTE_S)
    return Traffic(MINUTE_S, counts.sized(total), f"per-minute trace {path.name}")
