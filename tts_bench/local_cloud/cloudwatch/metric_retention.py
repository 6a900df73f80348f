"""CloudWatch's retention for the local cloud's moto: datapoints rolled up as they age.

moto keeps every datapoint `put_metric_data` gives it, forever; the local cloud publishes one per
metric every 10 s of its clock, so on a compressed cloud (`--time-scale 60`) moto's list grew by
thousands of datapoints a wall minute, idle too (docs/soak.md). CloudWatch does not keep them so (its documented
retention, "Metrics retention" in the CloudWatch user guide): datapoints with a period under
60 s stay readable for 3 hours, 1-minute ones for 15 days, 5-minute ones for 63 days, 1-hour
ones for 455 days (15 months), each tier aggregated from the finer one as it expires.

`roll_up` does the same on moto's datapoint list, on the cloud's clock: a datapoint older than a
tier's age is merged into one aggregate per metric, dimensions, unit and bucket of the next
tier's period (Sum, SampleCount, Minimum and Maximum merge exactly, so Average does too), and
dropped past 455 days. A query at a period that is a multiple of the bucket reads the same
figures as before the roll-up. Percentiles are not kept in an aggregate (CloudWatch keeps
them; moto computes none from aggregates, and nothing here reads one from the local cloud).

Who reads old datapoints in tts_bench: the rehearsal reads its whole run back at the end, at
each alarm's period (`aws.scaling_record.read_datapoints`); ttotal and the ladders read minutes
back. A rehearsal longer than 3 hours of the cloud's clock with a 10 s alarm therefore reads its
older part as 1-minute aggregates (one per minute in its 10 s buckets), where CloudWatch would
return nothing at a 10 s period; every 60 s-multiple period reads exactly as before.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Final

# (age past which a datapoint is aggregated, the period it is aggregated to); None: dropped.
TIERS: Final[tuple[tuple[timedelta, int | None], ...]] = (
    (timedelta(days=455), None),
    (timedelta(days=63), 3600),
    (timedelta(days=15), 300),
    (timedelta(hours=3), 60),
)
# How often (the cloud's seconds) a roll-up pass runs: datapoints may stay that much past their
# tier's age, which bounds the list as well and keeps the pass off every put.
PASS_EVERY_S: Final = 600.0


@dataclass
class _Bucket:
    first: Any  # the bucket's first datapoint: namespace, name, dimensions, unit
    stamp: datetime  # the bucket's start
    minimum: float
    maximum: float
    count: float
    total: float
    members: int = 1

    def add(self, figures: tuple[float, float, float, float]) -> None:
        low, high, count, total = figures
        self.minimum, self.maximum = min(self.minimum, low), max(self.maximum, high)
        self.count += count
        self.total += total
        self.members += 1

    def settled(self) -> bool:
        """One aggregate already on the bucket's start: kept as it is, no new object."""
        return self.members == 1 and hasattr(self.first, "sample_count") and (
            self.first.timestamp == self.stamp
        )  # fmt: skip


def _epoch(stamp: datetime) -> float:
    return (stamp if stamp.tzinfo else stamp.replace(tzinfo=UTC)).timestamp()


def _period_of(age_s: float) -> int | None:
    """The period a datapoint of this age is kept at; None: dropped; 0: kept as it is."""
    for age, period in TIERS:
        if age_s > age.total_seconds():
            return period
    return 0


def _figures(datum: Any) -> tuple[float, float, float, float] | None:
    """(min, max, sample count, sum) of a moto datapoint, or None for one it cannot merge."""
    if hasattr(datum, "sample_count"):
        return float(datum.min), float(datum.max), float(datum.sample_count), float(datum.sum)
    if hasattr(datum, "value"):
        value = float(datum.value)
        return value, value, 1.0, value
    return None


def roll_up(data: Sequence[Any], now: datetime) -> list[Any] | None:
    """`data` (moto's `MetricDatumBase` list) as CloudWatch holds it at `now` (the cloud's
    clock, naive UTC as moto's), in its order; None when nothing changes."""
    now_s = _epoch(now)
    kept: list[Any] = []
    buckets: dict[tuple[Any, ...], _Bucket] = {}
    dropped = False
    for datum in data:
        stamp = getattr(datum, "timestamp", None)
        figures = _figures(datum)
        period = _period_of(now_s - _epoch(stamp)) if isinstance(stamp, datetime) else 0
        if period == 0 or figures is None:
            kept.append(datum)
        elif period is None:
            dropped = True
        else:
            key = _bucket_key(datum, stamp, period)
            if key in buckets:
                buckets[key].add(figures)
            else:
                buckets[key] = _Bucket(datum, _start(stamp, period), *figures)
                kept.append(buckets[key])
    if not dropped and all(b.settled() for b in buckets.values()):
        return None
    # Every aggregate of one metric shares one dimension list: an aggregate is held 15 days and
    # more, and its own two Dimension objects were half of what it costs.
    shared: dict[tuple[Any, ...], list[Any]] = {}
    for b in buckets.values():
        if b.settled():
            shared.setdefault(_series_key(b.first), b.first.dimensions)
    return [
        (d.first if d.settled() else _aggregate(d, shared)) if isinstance(d, _Bucket) else d
        for d in kept
    ]


def _start(stamp: datetime, period: int) -> datetime:
    start = datetime.fromtimestamp(_epoch(stamp) // period * period, tz=UTC)
    return start if stamp.tzinfo else start.replace(tzinfo=None)


def _series_key(datum: Any) -> tuple[Any, ...]:
    """The metric a datapoint belongs to: namespace, name and dimensions."""
    return (datum.namespace, datum.name, tuple(sorted((d.name, d.value) for d in datum.dimensions)))


def _bucket_key(datum: Any, stamp: datetime, period: int) -> tuple[Any, ...]:
    return (*_series_key(datum), datum.unit, period, _epoch(stamp) // period)


def _aggregate(bucket: _Bucket, shared: dict[tuple[Any, ...], list[Any]]) -> Any:
    from moto.cloudwatch.models import MetricAggregatedDatum

    t = bucket.first
    aggregate = MetricAggregatedDatum(
        namespace=t.namespace,
        name=t.name,
        min_stat=bucket.minimum,
        max_stat=bucket.maximum,
        sample_count=bucket.count,
        sum_stat=bucket.total,
        dimensions=[],
        timestamp=bucket.stamp,
        unit=t.unit,
    )
    aggregate.dimensions = shared.setdefault(_series_key(t), t.dimensions)
    return aggregate
