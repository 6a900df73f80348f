"""The local cloud stamps what it models at the instant its model says, not when its thread gets
there (issue 36, item 1): on a clock 30-50 times the wall's, a loaded machine's tenth of a
second would otherwise be seconds of what a measurement reads. Each test acts late on purpose
and checks the stamp did not move.

Cost: one moto server (about a second), one curve instance on an event loop; no instance process.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any, cast

import boto3
import numpy as np
import pytest
from botocore.config import Config

from tests.conftest import REFERENCE_QMAX, REFERENCE_TTOTAL
from tests.local_cloud.idle_server import IdleServer
from tts_bench.artifacts.files import load_artifact
from tts_bench.artifacts.qmax import QmaxArtifact
from tts_bench.artifacts.ttotal import TtotalArtifact
from tts_bench.aws.clock import ServiceClock
from tts_bench.local_cloud.cloudwatch.logs import LogShipper
from tts_bench.local_cloud.cloudwatch.metrics import MetricsPublisher, VariantMetrics
from tts_bench.local_cloud.control_plane.moto_host import MotoHost
from tts_bench.local_cloud.instances.curve_instance import CurveHost, CurveIdentity, CurveServer
from tts_bench.local_cloud.instances.curve_model import CurveModel, StartupTimeline
from tts_bench.local_cloud.instances.fleet import Fleet
from tts_bench.local_cloud.modelled_time import HEADER, modelled_at

START = 1_800_000_000.0  # a window boundary
GROUP = "/aws/sagemaker/Endpoints/e"


class SetClock:
    """A clock the test sets: the instant each sample is reported."""

    def __init__(self, now: float) -> None:
        self.t = now

    def now(self) -> float:
        return self.t

    def to_wall(self, virtual_s: float) -> float:
        return virtual_s


def test_a_window_closed_late_holds_only_the_samples_stamped_before_its_end() -> None:
    clock = SetClock(START + 1)
    metrics = VariantMetrics(clock=cast(ServiceClock, clock))
    metrics.observe_concurrency(2, 1)
    metrics.record_arrival()
    clock.t = START + 9.9
    metrics.observe_concurrency(3, 1)
    # The window's end has passed, its publisher not yet there: these are the next window's.
    clock.t = START + 10.2
    metrics.observe_concurrency(9, 1)
    metrics.record_arrival()
    metrics.record_invocation(0.1, 500)
    first = metrics.close_window(START)
    assert (first.concurrency_max, first.invocations, first.answered) == (3, 1, 0)
    second = metrics.close_window(START + 10)
    assert (second.concurrency_max, second.invocations, second.errors_5xx) == (9, 1, 1)
    # Nothing changed in the third: the level in flight at its start is its Maximum.
    assert metrics.close_window(START + 20).concurrency_max == 9


class WokenEarlyThenStopped:
    """The publisher's stop event: its first wait returns before the timeout, its second stops."""

    def __init__(self) -> None:
        self.waits = 0

    def wait(self, timeout: float) -> bool:
        self.waits += 1
        return self.waits > 1


def test_a_publisher_woken_before_a_windows_end_does_not_close_it() -> None:
    """A sample may still be stamped before the end: closing early would put it in the next."""
    clock = SetClock(START + 5)
    metrics = VariantMetrics(clock=cast(ServiceClock, clock))
    publisher = MetricsPublisher(metrics, lambda _: None, "e", "v", clock=cast(ServiceClock, clock))
    stop = WokenEarlyThenStopped()
    publisher._stop = stop  # type: ignore[assignment]
    publisher._run()
    assert stop.waits == 2 and metrics.windows() == []


@pytest.fixture(scope="module")
def host() -> Iterator[MotoHost]:
    started = MotoHost(ServiceClock.starting_now(50.0))
    started.start()
    yield started
    started.stop()


def client(host: MotoHost, service: str, stamping: bool = True) -> Any:
    made = boto3.client(
        service, endpoint_url=host.url, region_name="us-east-1", aws_access_key_id="testing",
        aws_secret_access_key="testing", config=Config(retries={"max_attempts": 1}),
    )  # fmt: skip
    if stamping:
        made.meta.events.register("before-sign", host.stamping())
    return made


def created_s(host: MotoHost, stream: str) -> float:
    found = client(host, "logs").describe_log_streams(
        logGroupName=GROUP, logStreamNamePrefix=stream
    )
    return float(found["logStreams"][0]["creationTime"]) / 1000


def test_moto_stamps_the_clouds_own_request_at_its_modelled_instant_and_no_one_elses(
    host: MotoHost,
) -> None:
    logs = client(host, "logs")
    logs.create_log_group(logGroupName=GROUP)
    modelled = START + 123.456
    with modelled_at(modelled):
        logs.create_log_stream(logGroupName=GROUP, logStreamName="v/modelled")
    logs.create_log_stream(logGroupName=GROUP, logStreamName="v/unmodelled")
    assert created_s(host, "v/modelled") == pytest.approx(modelled, abs=0.001)
    assert abs(created_s(host, "v/unmodelled") - host.now_s()) < 60
    # A client outside the cloud cannot backdate: it does not know the host's token.
    foreign = client(host, "logs", stamping=False)
    foreign.meta.events.register(
        "before-sign", lambda request, **_: request.headers.__setitem__(HEADER, f"x:{START}")
    )
    foreign.create_log_stream(logGroupName=GROUP, logStreamName="v/foreign")
    assert abs(created_s(host, "v/foreign") - host.now_s()) < 60
    # An alarm's state time, as the autoscaler sets it, is its evaluation's.
    cloudwatch = client(host, "cloudwatch")
    cloudwatch.put_metric_alarm(
        AlarmName="a", Namespace="n", MetricName="m", Statistic="Maximum", Period=10,
        EvaluationPeriods=1, Threshold=1.0, ComparisonOperator="GreaterThanThreshold",
    )  # fmt: skip
    with modelled_at(modelled):
        cloudwatch.set_alarm_state(AlarmName="a", StateValue="ALARM", StateReason="test")
    (alarm,) = cloudwatch.describe_alarms(AlarmNames=["a"])["MetricAlarms"]
    assert alarm["StateUpdatedTimestamp"].timestamp() == pytest.approx(modelled, abs=0.001)


class Shipper:
    def __init__(self) -> None:
        self.opened: list[tuple[str, float | None]] = []

    def open_stream(self, endpoint: str, stream: str, at_s: float | None = None) -> None:
        self.opened.append((stream, at_s))

    def ship(self, endpoint: str, stream: str, line: str) -> None:
        pass


def test_an_instance_is_visible_and_launched_its_provisioning_after_its_count_was_asked_for() -> (
    None
):
    """The count was asked for 40 s of the cloud's clock ago (a control thread that got to it
    late): the stream is stamped, and the server launched, at that instant + the provisioning."""
    clock = ServiceClock.starting_now(50.0)
    shipper, server = Shipper(), IdleServer()
    fleet = Fleet(
        "e", "v", cast(LogShipper, shipper), [], {}, lambda _: None, lambda: None,
        launch=lambda *_: server, stream_at_spawn=False, clock=clock,
    )  # fmt: skip
    asked = clock.now() - 40.0
    instance = fleet.spawn({}, 0, 60.0 / clock.scale, 5.0, asked)
    deadline = time.time() + 10
    while server.at_s is None and time.time() < deadline:
        time.sleep(0.01)
    assert shipper.opened == [(instance.log_stream, pytest.approx(asked + 60.0))]
    assert server.at_s == pytest.approx(asked + 60.0)
    fleet.stop_all(timeout_s=5)


def test_a_curve_instance_launched_late_stamps_each_marker_at_its_stage_from_the_launch() -> None:
    clock = ServiceClock.starting_now(50.0)
    qmax = load_artifact(REFERENCE_QMAX, QmaxArtifact)
    timeline = StartupTimeline.from_ttotal(load_artifact(REFERENCE_TTOTAL, TtotalArtifact))
    fp = qmax.fingerprint
    assert fp is not None
    identity = CurveIdentity(fp.model, fp.instance_type, fp.image_digest, fp.performance_env, 1.0)
    lines: list[dict[str, Any]] = []
    host = CurveHost()
    server = CurveServer(
        host, CurveModel.from_qmax(qmax), identity, timeline, clock, None,
        np.random.default_rng(1), lambda line: lines.append(json.loads(line)),
    )  # fmt: skip
    launched = clock.now() - 100.0  # its thread got here 2 wall seconds late
    try:
        server.start(launched)
        server.wait_ready(10)
        markers = {r["marker"]: r["ts"] - launched for r in lines if r["msg"] == "startup_marker"}
        expected = {s.event: s.at_s for s in timeline.steps if s.event != "in_service"}
        assert markers == pytest.approx(expected, abs=1e-6)
        assert expected["weights_ready"] == pytest.approx(10.2)  # the reference's stages
    finally:
        server.kill()
        host.stop()
