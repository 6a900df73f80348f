"""The variant's SageMaker metrics, published to CloudWatch (moto) every 10 s.

`VariantMetrics` is the backend: the fleet reports every change of requests in flight and of
InService instances, the runtime every arrival and every finished invocation, each stamped with
its instant on the cloud's clock as it is reported. `close_window` turns one 10 s window into the
figures SageMaker publishes (pure data): exactly the samples whose instant falls in it, however
late the window is closed. (On a compressed clock the publisher's thread may close it tenths of a
wall second late, seconds of the cloud's; had the window taken whatever had arrived by then, a
datapoint would hold samples of the next period, and read back differently from what its alarm
evaluated.) `MetricsPublisher` calls it on each 10 s boundary of the cloud's clock and sends the
figures with `put_metric_data` once the CloudWatch delay has passed, then hands them to the
autoscaler, which reads the same history: an alarm sees a datapoint when a reader can.

ConcurrentRequestsPerModel: requests in flight at the containers (queued plus executing,
arrival to last byte), divided by the InService instances, the maximum over the window.
Invocations and InvocationsPerInstance count a request when it arrives (the simulator counts
it so too): each adds `request_weight`, and 1/N of it per instance, N the InService instances
when it came, whatever the container answers. The weight is 1 for real instances; a curve
instance's request stands for S × K requests of the fleet it models (`--rate-scale` S slows
its service S-fold, `--time-scale` K puts K of the cloud's seconds in one of the wall's), so
the count per instance per minute reads what that fleet's would at the same load per instance,
the units a plan's target is in.
"""

from __future__ import annotations

import contextlib
import math
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from tts_bench.aws.clock import ServiceClock
from tts_bench.telemetry import (
    CONCURRENT_REQUESTS_PER_MODEL,
    SAGEMAKER_4XX,
    SAGEMAKER_5XX,
    SAGEMAKER_INVOCATIONS,
    SAGEMAKER_INVOCATIONS_PER_INSTANCE,
    SAGEMAKER_NAMESPACE,
)

PERIOD_S = 10
MODEL_LATENCY = "ModelLatency"  # microseconds, as SageMaker publishes it
HISTORY_WINDOWS = 720  # two hours of 10 s windows, more than any alarm looks back


@dataclass(frozen=True)
class WindowFigures:
    start_s: float  # the window's start, a multiple of PERIOD_S
    concurrency_max: float
    invocations: float
    errors_4xx: int
    errors_5xx: int
    latency_us_sum: float
    latency_us_min: float
    latency_us_max: float
    invocations_per_instance: float = 0.0
    answered: int = 0  # invocations answered in the window (ModelLatency's sample count)


@dataclass(frozen=True)
class Samples:
    """What was reported, each item stamped on the cloud's clock: in-flight changes
    (instant, requests in flight per instance), arrivals (instant, weight, weight per instance)
    and answers (instant, latency in microseconds, status)."""

    changes: tuple[tuple[float, float], ...] = ()
    arrivals: tuple[tuple[float, float, float], ...] = ()
    answers: tuple[tuple[float, float, int], ...] = ()


def window_figures(start_s: float, carried: float, samples: Samples) -> WindowFigures:
    """Pure: the window from `start_s` over `samples` (all of them in it), the in-flight level
    at its start being `carried`. ConcurrentRequestsPerModel's Maximum is the highest level the
    step function held in the window: the carried one, or one a change set."""
    latencies = [latency for _, latency, _ in samples.answers]
    return WindowFigures(
        start_s=start_s,
        concurrency_max=max([carried, *(level for _, level in samples.changes)]),
        invocations=sum(weight for _, weight, _ in samples.arrivals),
        errors_4xx=sum(1 for *_, status in samples.answers if 400 <= status < 500),
        errors_5xx=sum(1 for *_, status in samples.answers if status >= 500),
        latency_us_sum=sum(latencies),
        latency_us_min=min(latencies, default=0.0),
        latency_us_max=max(latencies, default=0.0),
        invocations_per_instance=sum(per for *_, per in samples.arrivals),
        answered=len(latencies),
    )


class VariantMetrics:
    """Thread-safe: the fleet and the runtime report, the publisher closes windows. Each sample
    is stamped under the lock, so one reported after a window was closed (at or after its end)
    is stamped at or after its end too, and lands in a later window."""

    def __init__(self, request_weight: float = 1.0, clock: ServiceClock | None = None) -> None:
        self.request_weight = request_weight
        self._clock = clock or ServiceClock()
        self._lock = threading.Lock()
        # requests in flight per InService instance at the start of the oldest window not closed
        self._carried = 0.0
        self._in_service = 0
        # the samples in no window yet, as `Samples` holds them
        self._changes: list[tuple[float, float]] = []
        self._arrivals: list[tuple[float, float, float]] = []
        self._answers: list[tuple[float, float, int]] = []
        self.history: list[WindowFigures] = []

    def observe_concurrency(self, in_flight_total: int, in_service: int) -> None:
        with self._lock:
            self._in_service = in_service
            level = in_flight_total / in_service if in_service else 0.0
            self._changes.append((self._clock.now(), level))

    def record_arrival(self) -> None:
        """One invocation arrived at an instance (before the container admits or refuses it)."""
        with self._lock:
            per = self.request_weight / self._in_service if self._in_service else 0.0
            self._arrivals.append((self._clock.now(), self.request_weight, per))

    def record_invocation(self, latency_s: float, status: int) -> None:
        """One invocation answered: `status` is what the client got (200, or the container's)."""
        with self._lock:
            self._answers.append((self._clock.now(), latency_s * 1e6, status))

    def close_window(self, start_s: float) -> WindowFigures:
        """The window from `start_s`: every sample not yet in a window and stamped before its
        end (`start_s` + 10 s) of the cloud's clock, whenever this is called."""
        end_s = start_s + PERIOD_S
        with self._lock:
            inside = Samples(
                tuple(_take(self._changes, end_s)),
                tuple(_take(self._arrivals, end_s)),
                tuple(_take(self._answers, end_s)),
            )
            figures = window_figures(start_s, self._carried, inside)
            if inside.changes:  # the level at the end carries into the next window
                self._carried = inside.changes[-1][1]
            self.history.append(figures)
            del self.history[:-HISTORY_WINDOWS]
            return figures

    def windows(self) -> list[WindowFigures]:
        with self._lock:
            return list(self.history)


def _take(items: list[Any], end_s: float) -> list[Any]:
    """Remove and return the items of `items` stamped before `end_s`, in order."""
    taken = [i for i in items if i[0] < end_s]
    items[:] = [i for i in items if i[0] >= end_s]
    return taken


def metric_data(figures: WindowFigures, endpoint: str, variant: str) -> list[dict[str, Any]]:
    """Pure: one window as `put_metric_data` entries in AWS/SageMaker."""
    stamp = datetime.fromtimestamp(figures.start_s, tz=UTC)
    dimensions = [
        {"Name": "EndpointName", "Value": endpoint},
        {"Name": "VariantName", "Value": variant},
    ]

    def datum(name: str, unit: str, **value: Any) -> dict[str, Any]:
        return {
            "MetricName": name,
            "Dimensions": dimensions,
            "Timestamp": stamp,
            "Unit": unit,
            "StorageResolution": 1,
            **value,
        }

    data = [
        datum(CONCURRENT_REQUESTS_PER_MODEL, "None", Value=figures.concurrency_max),
        datum(SAGEMAKER_INVOCATIONS, "None", Value=float(figures.invocations)),
        datum(SAGEMAKER_INVOCATIONS_PER_INSTANCE, "None", Value=figures.invocations_per_instance),
        datum(SAGEMAKER_4XX, "None", Value=float(figures.errors_4xx)),
        datum(SAGEMAKER_5XX, "None", Value=float(figures.errors_5xx)),
    ]
    if figures.answered:
        data.append(
            datum(
                MODEL_LATENCY,
                "Microseconds",
                StatisticValues={
                    "SampleCount": float(figures.answered),
                    "Sum": figures.latency_us_sum,
                    "Minimum": figures.latency_us_min,
                    "Maximum": figures.latency_us_max,
                },
            )
        )
    return data


class MetricsPublisher:
    """A thread that closes a window on every 10 s boundary of `clock` and publishes it
    `delay_s` (the clock's seconds) after the window's end."""

    def __init__(
        self,
        metrics: VariantMetrics,
        client: Callable[[str], Any],
        endpoint: str,
        variant: str,
        on_window: Callable[[WindowFigures], None] | None = None,
        clock: ServiceClock | None = None,
        delay_s: float = 0.0,
    ) -> None:
        self._metrics = metrics
        self._cw = client("cloudwatch")
        self._endpoint = endpoint
        self._variant = variant
        self._on_window = on_window
        self._clock = clock or ServiceClock()
        self._delay_s = delay_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="local-cloud-metrics", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        clock = self._clock
        window_start = math.floor(clock.now() / PERIOD_S) * PERIOD_S
        closed: deque[WindowFigures] = deque()  # waiting out the delay, oldest first
        while True:
            close_at = window_start + PERIOD_S
            publish_at = closed[0].start_s + PERIOD_S + self._delay_s if closed else math.inf
            at = min(close_at, publish_at)
            if self._stop.wait(max(0.0, clock.to_wall(at) - time.time())):
                return
            if clock.now() < at:  # woken a hair early: a sample may still be stamped before it
                continue
            if close_at <= at:
                closed.append(self._metrics.close_window(window_start))
                window_start += PERIOD_S
            if closed and publish_at <= at:
                self._publish(closed.popleft())

    def _publish(self, figures: WindowFigures) -> None:
        with contextlib.suppress(Exception):  # a lost datapoint must not stop the metrics
            self._cw.put_metric_data(
                Namespace=SAGEMAKER_NAMESPACE,
                MetricData=metric_data(figures, self._endpoint, self._variant),
            )
        if self._on_window is not None:
            self._on_window(figures)
