"""Each rung's `cloudwatch_ratio`: what SageMaker saw in flight against what the client held.

Per rung, CloudWatch's `ConcurrentRequestsPerModel` (10 s periods, Maximum) averaged over the
periods that start inside the rung's measure window, divided by the client's mean in-flight
(SPEC §4). Near 1 says the ladder measured the load it meant to; far from it says the client or
the routing did not hold N. `ratios_for` is the pure join; `read_concurrency` and
`await_concurrency` are the edge that reads the metric, waiting out its publication delay.

The fleet rule deploys `InvocationsPerInstance` (a standard metric: one Sum a minute, on the
clock's whole minutes). Its ratio has one definition, `invocations_ratio`: over the whole minutes
inside a hold that CloudWatch returned a Sum for, the Sums added up, divided by the requests the
client sent in those same minutes (the ladder pins one instance, and SageMaker counts a request
when it arrives, whatever the container answers). It needs at least `MIN_INVOCATION_MINUTES`
such minutes: a hold shorter than that gets no ratio, never a guess. A ladder rung's is recorded
in `cloudwatch_ratios` as `InvocationsPerInstance:Sum/60s` (`invocation_ratios_for`), a
verification rung's likewise (`verification`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final

from tts_bench.artifacts.cloudwatch import INVOCATIONS_RATIO_STAT
from tts_bench.artifacts.qmax import QmaxArtifact
from tts_bench.artifacts.rungs import LadderSettings
from tts_bench.aws.clock import CLOUDWATCH_DELAY_S, ServiceClock
from tts_bench.aws.session import AwsSession
from tts_bench.measure.samples import Sample
from tts_bench.telemetry import (
    CONCURRENT_REQUESTS_PER_MODEL,
    SAGEMAKER_INVOCATIONS_PER_INSTANCE,
    SAGEMAKER_NAMESPACE,
)

PERIOD_S: Final = 10
STATISTIC: Final = "Maximum"
INVOCATIONS_PERIOD_S: Final = INVOCATIONS_RATIO_STAT.period_s
INVOCATIONS_KEY: Final = INVOCATIONS_RATIO_STAT.key
# Whole minutes of InvocationsPerInstance a ratio is read over: one minute's count at a few
# requests a second moves by a request or two at its edges; two halve that, and a second point
# shows a minute that CloudWatch counted differently.
MIN_INVOCATION_MINUTES: Final = 2
# CloudWatch publishes high-resolution points within about a minute; wait at most this long.
DEFAULT_METRIC_WAIT_S: Final = 180.0
POLL_S: Final = 5.0


@dataclass(frozen=True, slots=True)
class MetricPoint:
    """One period's statistic: the period starts at `ts` (unix seconds)."""

    ts: float
    value: float


def window_mean(
    points: Sequence[MetricPoint], w0: float, w1: float, period_s: float = PERIOD_S
) -> float | None:
    """Mean of the points whose whole period lies inside [w0, w1]; None when there is none."""
    inside = [p.value for p in points if w0 <= p.ts and p.ts + period_s <= w1 + 1e-6]
    return sum(inside) / len(inside) if inside else None


def ladder_clock(ladder: LadderSettings) -> ServiceClock:
    """The clock the ladder's CloudWatch points were read on, as its settings record it."""
    return ServiceClock(scale=ladder.time_scale, origin_s=ladder.time_origin_s)


def cloud_window(
    ladder: LadderSettings, index: int, whole_hold: bool = False
) -> tuple[float, float]:
    """Rung `index`'s measure window (or with `whole_hold`, its hold) on CloudWatch's clock."""
    w0, w1 = ladder.measure_window(index)
    if whole_hold:
        w0 = w1 - ladder.rung_hold_s(index)
    clock = ladder_clock(ladder)
    return clock.to_virtual(w0), clock.to_virtual(w1)


def rung_mean(points: Sequence[MetricPoint], ladder: LadderSettings, index: int) -> float | None:
    """Over the rung's measure window; a window shorter than a period falls back to its hold
    (the same N), so a partial period never mixes in the next rung's load. Both on the clock
    the points were read on (`cloud_window`)."""
    mean = window_mean(points, *cloud_window(ladder, index))
    return mean if mean is not None else window_mean(points, *cloud_window(ladder, index, True))


def ratios_for(artifact: QmaxArtifact, points: Sequence[MetricPoint]) -> QmaxArtifact:
    """The artifact with each rung's `cloudwatch_ratio` set (None where nothing can be said)."""
    if artifact.ladder is None or artifact.ladder.start_epoch is None:
        return artifact
    rungs = []
    for index, rung in enumerate(artifact.rungs):
        mean = rung_mean(points, artifact.ladder, index)
        ratio = (
            round(mean / rung.client_mean_in_flight, 3)
            if mean and rung.client_mean_in_flight > 0
            else None
        )
        rungs.append(rung.model_copy(update={"cloudwatch_ratio": ratio}))
    data = artifact.model_dump(mode="json")
    data["rungs"] = [r.model_dump(mode="json") for r in rungs]
    return QmaxArtifact.model_validate(data)


def whole_minutes(w0: float, w1: float) -> int:
    """How many of the clock's whole minutes lie inside [w0, w1]."""
    first = math.ceil(w0 / INVOCATIONS_PERIOD_S - 1e-9) * INVOCATIONS_PERIOD_S
    return max(0, math.floor((w1 - first) / INVOCATIONS_PERIOD_S + 1e-9))


def invocations_ratio(
    points: Sequence[MetricPoint], samples: Sequence[Sample], ladder: LadderSettings, index: int
) -> float | None:
    """InvocationsPerInstance's minute Sums inside rung `index`'s hold over the requests the
    client sent in the same minutes, both on the clock the Sums were read on; None with fewer
    than `MIN_INVOCATION_MINUTES` minutes read or no request sent (the one definition: ladder
    and verification rungs both use it)."""
    w0, w1 = cloud_window(ladder, index, whole_hold=True)
    minutes = [p for p in points if w0 <= p.ts and p.ts + INVOCATIONS_PERIOD_S <= w1 + 1e-6]
    if len(minutes) < MIN_INVOCATION_MINUTES:
        return None
    clock = ladder_clock(ladder)
    starts = [clock.to_virtual(s.start) for s in samples]
    sent = sum(
        1 for start in starts if any(p.ts <= start < p.ts + INVOCATIONS_PERIOD_S for p in minutes)
    )
    counted = sum(p.value for p in minutes)
    return round(counted / sent, 3) if sent and counted > 0 else None


def invocation_ratios_for(
    artifact: QmaxArtifact, points: Sequence[MetricPoint], samples: Sequence[Sample]
) -> QmaxArtifact:
    """The artifact with each rung's InvocationsPerInstance ratio over the whole minutes of its
    hold, where `MIN_INVOCATION_MINUTES` fit."""
    if artifact.ladder is None or artifact.ladder.start_epoch is None:
        return artifact
    rungs = []
    for index, rung in enumerate(artifact.rungs):
        ratio = invocations_ratio(points, samples, artifact.ladder, index)
        ratios = dict(rung.cloudwatch_ratios)
        if ratio is not None:
            ratios[INVOCATIONS_KEY] = ratio
        rungs.append(rung.model_copy(update={"cloudwatch_ratios": ratios}))
    data = artifact.model_dump(mode="json")
    data["rungs"] = [r.model_dump(mode="json") for r in rungs]
    return QmaxArtifact.model_validate(data)


def read_concurrency(
    session: AwsSession,
    endpoint: str,
    variant: str,
    start: float,
    end: float,
    metric: str = CONCURRENT_REQUESTS_PER_MODEL,
) -> list[MetricPoint]:
    """ConcurrentRequestsPerModel, 10 s Maximum (or `metric` as the join reads it: the
    invocations' one-minute Sum), for the variant over [start, end]."""
    period, stat = (
        (INVOCATIONS_PERIOD_S, "Sum")
        if metric == SAGEMAKER_INVOCATIONS_PER_INSTANCE
        else (PERIOD_S, STATISTIC)
    )
    response = session.call(
        "cloudwatch",
        "get_metric_data",
        resource=f"{metric} of endpoint {endpoint}",
        MetricDataQueries=[
            {
                "Id": "metric",
                "MetricStat": {
                    "Metric": {
                        "Namespace": SAGEMAKER_NAMESPACE,
                        "MetricName": metric,
                        "Dimensions": [
                            {"Name": "EndpointName", "Value": endpoint},
                            {"Name": "VariantName", "Value": variant},
                        ],
                    },
                    "Period": period,
                    "Stat": stat,
                },
                "ReturnData": True,
            }
        ],
        StartTime=datetime.fromtimestamp(start, UTC),
        EndTime=datetime.fromtimestamp(end, UTC),
        ScanBy="TimestampAscending",
    )
    points: list[MetricPoint] = []
    for result in response.get("MetricDataResults", []):
        for stamp, value in zip(
            result.get("Timestamps", []), result.get("Values", []), strict=False
        ):
            points.append(MetricPoint(stamp.timestamp(), float(value)))
    return sorted(points, key=lambda p: p.ts)


def await_concurrency(
    session: AwsSession,
    endpoint: str,
    variant: str,
    start: float,
    end: float,
    *,
    wait_s: float = DEFAULT_METRIC_WAIT_S,
    log: Callable[[str], None] = lambda _line: None,
) -> list[MetricPoint]:
    """Read the metric once its last period before `end` is published, or after `wait_s`."""
    deadline = time.time() + wait_s
    last_period = end - 2 * PERIOD_S
    # Whole periods on CloudWatch's own boundaries, so each point is one period of the metric.
    first = (start // PERIOD_S - 1) * PERIOD_S
    final = (end // PERIOD_S + 1) * PERIOD_S
    while True:
        points = read_concurrency(session, endpoint, variant, first, final)
        if any(p.ts >= last_period for p in points) or time.time() >= deadline:
            return points
        log(f"waiting for CloudWatch {CONCURRENT_REQUESTS_PER_MODEL} up to the last window")
        time.sleep(POLL_S)


def await_minutes(
    session: AwsSession,
    endpoint: str,
    variant: str,
    start: float,
    end: float,
    *,
    wait_s: float = DEFAULT_METRIC_WAIT_S,
    log: Callable[[str], None] = lambda _line: None,
) -> list[MetricPoint]:
    """InvocationsPerInstance's minute Sums over [start, end], read on the clock's whole minutes
    (CloudWatch bins a 60 s period from the query's start), once the last whole minute before
    `end` is in, or after `wait_s`."""
    deadline = time.time() + wait_s
    first = math.floor(start / INVOCATIONS_PERIOD_S) * INVOCATIONS_PERIOD_S
    final = math.ceil(end / INVOCATIONS_PERIOD_S) * INVOCATIONS_PERIOD_S
    last_minute = math.floor(end / INVOCATIONS_PERIOD_S) * INVOCATIONS_PERIOD_S
    last_minute -= INVOCATIONS_PERIOD_S
    metric = SAGEMAKER_INVOCATIONS_PER_INSTANCE
    # A minute's Sum grows while its periods are published: read it once its end has passed by
    # the publication delay on the cloud's clock (virtual on a compressed local cloud).
    clock = ServiceClock.from_environment()
    ready_at = clock.to_wall(last_minute + INVOCATIONS_PERIOD_S + CLOUDWATCH_DELAY_S)
    time.sleep(max(0.0, min(ready_at, deadline) - time.time()))
    while True:
        points = read_concurrency(session, endpoint, variant, first, final, metric)
        whole = [p for p in points if p.ts + INVOCATIONS_PERIOD_S <= end + 1e-6]
        if last_minute < first or any(p.ts >= last_minute for p in whole):
            return whole
        if time.time() >= deadline:
            return whole
        log(f"waiting for CloudWatch {metric} up to the last whole minute")
        time.sleep(POLL_S)
