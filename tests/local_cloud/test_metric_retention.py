"""The local cloud's CloudWatch keeps datapoints as CloudWatch's retention does (issue 40's soak:
a compressed cloud's moto grew by every 10 s datapoint it was ever given).

Driven on a clock the test moves, through the CloudWatch API: eight hours of the cloud's clock of
one 10 s datapoint each. Cost: one moto server in this process, about a second.
"""

from __future__ import annotations

import gc
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import pytest

from tests.local_cloud.test_moto_accounts import client
from tts_bench.aws.clock import ServiceClock
from tts_bench.local_cloud.cloudwatch.metric_retention import roll_up
from tts_bench.local_cloud.control_plane.moto_host import MotoHost
from tts_bench.local_cloud.settings import REGION

START = datetime(2026, 12, 1, tzinfo=UTC)
DIMENSIONS = [{"Name": "EndpointName", "Value": "e"}, {"Name": "VariantName", "Value": "v"}]
NAMESPACE = "AWS/SageMaker"
NAME = {"MetricName": "ConcurrentRequestsPerModel"}


class MovedClock:
    """The cloud's clock, where the test puts it."""

    def __init__(self) -> None:
        self.at = START

    def now_datetime(self) -> datetime:
        return self.at


def value_at(i: int) -> float:
    return float(i % 7)


def stored(host: MotoHost) -> list[Any]:
    from moto.cloudwatch.models import cloudwatch_backends

    return cloudwatch_backends[host.account][REGION].metric_data


def query(host: MotoHost, start: datetime, end: datetime, period: int, stat: str) -> list[float]:
    answer = client(host, "cloudwatch").get_metric_data(
        MetricDataQueries=[
            {"Id": "m", "MetricStat": {
                "Metric": {"Namespace": NAMESPACE, **NAME, "Dimensions": DIMENSIONS}, "Period": period, "Stat": stat
            }}
        ],
        StartTime=start, EndTime=end, ScanBy="TimestampAscending",
    )  # fmt: skip
    return [float(v) for v in answer["MetricDataResults"][0]["Values"]]


@pytest.fixture
def host() -> Any:
    clock = MovedClock()
    moto = MotoHost(clock=cast(ServiceClock, clock))
    moto.start()
    try:
        yield moto, clock
    finally:
        moto.stop()


def put_hours(moto: MotoHost, clock: MovedClock, hours: int) -> None:
    """`hours` of one 10 s datapoint each, put 60 at a time (every 10 minutes of the cloud's
    clock, as a backlog would be), the clock moved along."""
    cloudwatch = client(moto, "cloudwatch")
    cloudwatch.meta.config.disable_request_compression = True  # the guard reads JSON bodies only
    batch = 60
    for first in range(0, hours * 360, batch):
        data = [
            {**NAME, "Dimensions": DIMENSIONS, "Timestamp": START + timedelta(seconds=10 * i),
             "Value": value_at(i), "StorageResolution": 1}
            for i in range(first, first + batch)
        ]  # fmt: skip
        clock.at = START + timedelta(seconds=10 * (first + batch))
        cloudwatch.put_metric_data(Namespace=NAMESPACE, MetricData=data)


def test_datapoints_roll_up_past_three_hours_and_read_the_same_at_a_minute(host: Any) -> None:
    moto, clock = host
    hours = 8
    put_hours(moto, clock, hours)

    # Bounded: at most 3 h 10 min of 10 s datapoints plus one per older minute (2,880 unrolled).
    assert len(stored(moto)) <= (3 * 360 + 60) + (hours - 3) * 60
    now = clock.at
    # The last 10 minutes read at 10 s, each datapoint as it was put.
    recent = query(moto, now - timedelta(minutes=10), now, 10, "Maximum")
    assert recent == [value_at(i) for i in range(hours * 360 - 60, hours * 360)]
    # Hour 1 to 2 (rolled up) reads at 60 s what its 10 s datapoints would give.
    first_minute = 360
    for stat, expect in (
        ("Maximum", lambda v: max(v)),
        ("Sum", lambda v: sum(v)),
        ("SampleCount", lambda v: float(len(v))),
        ("Average", lambda v: sum(v) / len(v)),
    ):
        got = query(moto, START + timedelta(hours=1), START + timedelta(hours=2), 60, stat)
        minutes = [
            [value_at(i) for i in range(first_minute + 6 * m, first_minute + 6 * m + 6)]
            for m in range(60)
        ]
        assert got == pytest.approx([expect(v) for v in minutes]), stat


def test_a_datapoint_past_fifteen_months_is_dropped() -> None:
    from moto.cloudwatch.models import MetricDatum

    old = MetricDatum("ns", "m", 1.0, DIMENSIONS, datetime(2024, 1, 1))
    young = MetricDatum("ns", "m", 2.0, DIMENSIONS, datetime(2026, 1, 1, 0, 0, 10))
    now = datetime(2026, 1, 1, 0, 1)
    assert roll_up([old, young], now) == [young]
    assert roll_up([young], now) is None  # nothing aged: moto's list stays as it is


def test_what_the_roll_up_removes_is_freed(host: Any) -> None:
    """moto kept every model object it ever made in a class list for its dashboard, so a
    rolled-up datapoint stayed in memory (the soak's curve cloud: +2.7 MiB a wall minute)."""
    from moto.cloudwatch.models import MetricAggregatedDatum, MetricDatum

    moto, clock = host
    put_hours(moto, clock, 8)
    gc.collect()
    alive = sum(isinstance(o, MetricDatum | MetricAggregatedDatum) for o in gc.get_objects())
    # A put's worth of slack: moto may still hold the last request's parsed datapoints.
    assert alive <= len(stored(moto)) + 60
    assert len(stored(moto)) < 8 * 360


def test_the_aggregates_of_one_metric_share_one_dimension_list(host: Any) -> None:
    """An aggregate is held for 15 days and more; its own Dimension objects were half its cost
    (the soak's curve cloud still grew 0.6 MiB a wall minute at --time-scale 60)."""
    from moto.cloudwatch.models import MetricAggregatedDatum

    moto, clock = host
    put_hours(moto, clock, 8)
    aggregates = [d for d in stored(moto) if isinstance(d, MetricAggregatedDatum)]
    assert len(aggregates) >= 5 * 60
    assert len({id(d.dimensions) for d in aggregates}) == 1
    assert [(d.name, d.value) for d in aggregates[0].dimensions] == [
        (d["Name"], d["Value"]) for d in DIMENSIONS
    ]
