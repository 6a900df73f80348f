"""The reference plan deployed on curve instances, its clocks compressed 50-fold: the policy
scales out on the curve's own load through the deployed alarms, every stage readable through
the AWS APIs in the cloud's virtual time, and 50 instances serve on this machine.

One local cloud for the module: curve instances from the reference ladder at rate scale 1, the
reference plan (target tracking at 37.5, step scale-in at 25, cooldowns 30 / 960 s), start-up
along the reference ttotal, maxInstances 60, the default CloudWatch delay (5 s).
"""

from __future__ import annotations

import itertools
import json
import random
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.conftest import REFERENCE_PLAN, REFERENCE_QMAX
from tests.local_cloud.conftest import cloud_fixture, control_client, runtime_client
from tests.local_cloud.streams import ClosedLoop, events, rejoin, speech_request, stream
from tts_bench.aws.clock import CLOUDWATCH_DELAY_S
from tts_bench.local_cloud import LocalCloud, LocalCloudSettings
from tts_bench.local_cloud.settings import CurveInstances
from tts_bench.telemetry import CONCURRENT_REQUESTS_PER_MODEL, SAGEMAKER_NAMESPACE

pytestmark = pytest.mark.slow

TIME_SCALE = 50.0
TARGET = 37.5
# A stamp to the millisecond: CloudWatch Logs' creationTime and the APIs' timestamps carry no finer.
EXACT_S = 0.002
cloud = cloud_fixture(
    lambda _: LocalCloudSettings(
        curve=CurveInstances(qmax=REFERENCE_QMAX, plan=REFERENCE_PLAN, seed=2),
        time_scale=TIME_SCALE,
        stack_overrides={"maxInstances": 60},
    )
)


class OpenLoop:
    """Poisson arrivals at `rate_rps` from a thread, each request streamed on a pool."""

    def __init__(self, endpoint: str, rate_rps: float) -> None:
        self._endpoint, self._rate = endpoint, rate_rps
        self._stop = threading.Event()
        self._pool = ThreadPoolExecutor(96)
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.outcomes: list[str] = []

    def _one(self, index: int) -> None:
        try:
            data, _ = rejoin(stream(runtime_client(), self._endpoint, speech_request(f"o{index}")))
            self.outcomes.append(events(data)[-1]["type"])
        except Exception as exc:
            self.outcomes.append(type(exc).__name__)

    def _run(self) -> None:
        rng, due, index = random.Random(3), time.monotonic(), 0
        while not self._stop.is_set():
            due += rng.expovariate(self._rate)
            self._stop.wait(max(0.0, due - time.monotonic()))
            index += 1
            self._pool.submit(self._one, index)

    def __enter__(self) -> OpenLoop:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()
        self._pool.shutdown(wait=True)


def _activities(cloud: LocalCloud) -> list[dict[str, Any]]:
    answer = control_client("application-autoscaling").describe_scaling_activities(
        ServiceNamespace="sagemaker",
        ResourceId=f"endpoint/{cloud.endpoint_name}/variant/{cloud.variant_name}",
    )
    return list(reversed(answer["ScalingActivities"]))  # oldest first


def _state_changes(alarm_prefix: str) -> list[dict[str, Any]]:
    items = control_client("cloudwatch").describe_alarm_history(
        HistoryItemType="StateUpdate", ScanBy="TimestampAscending"
    )["AlarmHistoryItems"]
    return [i for i in items if i["AlarmName"].startswith(alarm_prefix)]


def _wait(what: str, check: Any, timeout_s: float) -> Any:
    deadline = time.time() + timeout_s
    while not (found := check()):
        assert time.time() < deadline, f"no {what} within {timeout_s:g} s"
        time.sleep(0.2)
    return found


def _datapoints(cloud: LocalCloud, start: datetime, end: datetime) -> list[tuple[datetime, float]]:
    answer = control_client("cloudwatch").get_metric_data(
        MetricDataQueries=[
            {
                "Id": "c",
                "MetricStat": {
                    "Metric": {
                        "Namespace": SAGEMAKER_NAMESPACE,
                        "MetricName": CONCURRENT_REQUESTS_PER_MODEL,
                        "Dimensions": [
                            {"Name": "EndpointName", "Value": cloud.endpoint_name},
                            {"Name": "VariantName", "Value": cloud.variant_name},
                        ],
                    },
                    "Period": 10,
                    "Stat": "Maximum",
                },
            }
        ],
        StartTime=start,
        EndTime=end,
        ScanBy="TimestampAscending",
    )["MetricDataResults"][0]
    return list(zip(answer["Timestamps"], answer["Values"], strict=True))


def _markers(cloud: LocalCloud, stream_name: str) -> tuple[float, dict[str, float]]:
    logs = control_client("logs")
    group = f"/aws/sagemaker/Endpoints/{cloud.endpoint_name}"
    created = logs.describe_log_streams(logGroupName=group, logStreamNamePrefix=stream_name)
    events_ = logs.get_log_events(logGroupName=group, logStreamName=stream_name, startFromHead=True)
    markers = {}
    for event in events_["events"]:
        line = json.loads(event["message"])
        if line.get("msg") == "startup_marker":
            markers[line["marker"]] = float(line["ts"])
    return created["logStreams"][0]["creationTime"] / 1000, markers


@pytest.fixture(scope="module")
def scaled_out(cloud: LocalCloud) -> Iterator[list[dict[str, Any]]]:
    """25 requests/s on one instance that serves 17.9: the deployed policy scales it out; the
    load stays until the first instance it asked for serves."""
    with OpenLoop(cloud.endpoint_name, 25.0) as load:
        _wait("a second instance in service", lambda: len(cloud.fleet.in_service()) >= 2, 90)
    assert load.outcomes.count("done") > 0.5 * len(load.outcomes)
    yield _activities(cloud)


def test_the_alarm_fires_a_delay_after_its_third_datapoint_and_scales_out_at_once(
    cloud: LocalCloud, scaled_out: list[dict[str, Any]]
) -> None:
    first = scaled_out[0]
    assert first["Description"] == "Setting desired instance count to 2."
    high = "TargetTracking-endpoint/"
    assert f"monitor alarm {high}" in first["Cause"] and "-AlarmHigh-" in first["Cause"]
    fired = next(c for c in _state_changes(high) if c["HistorySummary"].endswith("to ALARM"))
    # One evaluation sets the alarm and the capacity, both stamped at its modelled instant
    # (however late the cloud's thread got there): the same instant.
    assert abs((first["StartTime"] - fired["Timestamp"]).total_seconds()) < EXACT_S
    # The alarm saw its third breaching datapoint CLOUDWATCH_DELAY_S after that period ended.
    start = datetime.fromtimestamp((fired["Timestamp"].timestamp() // 10 - 12) * 10, tz=UTC)
    period = timedelta(seconds=10)
    points = _datapoints(cloud, start, fired["Timestamp"])
    breaching = [v > TARGET for _, v in points]
    third = next(i for i in range(2, len(points)) if all(breaching[i - 2 : i + 1]))
    # Exactly: each datapoint holds the samples stamped in its period, however late the
    # publisher closed it, so what is read back is what the alarm evaluated; the evaluation is
    # stamped at that period's end plus the delay, not when its thread got there.
    delay = (fired["Timestamp"] - (points[third][0] + period)).total_seconds()
    assert delay == pytest.approx(CLOUDWATCH_DELAY_S, abs=EXACT_S)
    # Every timestamp is the cloud's virtual time, far ahead of the wall clock by now.
    assert fired["Timestamp"].timestamp() - time.time() > 60


def test_the_new_instance_starts_along_the_ttotal_stages_and_the_activity_completes(
    cloud: LocalCloud, scaled_out: list[dict[str, Any]]
) -> None:
    first = scaled_out[0]
    started = first["StartTime"].timestamp()
    # An activity completes when the endpoint serves its count (or a later one overrides it).
    done = _wait(
        "a completed activity",
        lambda: [a for a in _activities(cloud) if a["StatusCode"] in ("Successful", "Overridden")],
        40,
    )
    assert all(a["EndTime"] >= a["StartTime"] for a in done)
    assert first["StatusCode"] in ("Successful", "Overridden")
    first_new = min(
        (i for i in cloud.fleet.instances() if i.spawned_at > cloud.clock.to_wall(started) - 1),
        key=lambda i: i.spawned_at,
    )
    created, markers = _markers(cloud, first_new.log_stream)
    # The autoscaler asked for the count at the activity's instant (its request to moto says
    # so), the provisioning runs 180.8 s from it, and the stream is stamped at its end, however
    # late the fleet's thread opened it: exact (beside two burners a stamp as the thread got
    # there came 7-14 s late at K = 50: test-time.md).
    assert created - started == pytest.approx(180.8, abs=EXACT_S)
    # The instance's markers follow its stream's creation along the reference's stages, each
    # stamped at its stage from the launch, not when the instance's loop got to it: exact.
    offsets = {m: t - created for m, t in markers.items()}
    expected = {"container_started": 3.7, "framework_init": 3.7, "weights_ready": 10.2}
    expected |= {"warmup_done": 11.2, "ready": 11.2}
    assert offsets == pytest.approx(expected, abs=EXACT_S)


def test_a_scale_out_asked_for_while_updating_fails_and_is_tried_again(
    cloud: LocalCloud, scaled_out: list[dict[str, Any]]
) -> None:
    """[SM-update, CW-actions] While the first scale-out launches, the endpoint is Updating: the
    alarm, still in ALARM, invokes target tracking again once a minute after its 30 s cooldown,
    and SageMaker refuses each capacity change; Application Auto Scaling records a Failed
    activity with SageMaker's message and no cooldown, and acts again at the next minute."""
    first = scaled_out[0]
    failed = [a for a in scaled_out if a["StatusCode"] == "Failed"]
    assert failed, [a["StatusCode"] for a in scaled_out]
    assert all(a["StartTime"] > first["StartTime"] for a in failed)
    assert all("Cannot update in-progress endpoint" in a["StatusMessage"] for a in failed)
    # The first asked for more than the launch under way (later ones may come while a scale-in
    # drains: the scale-out ended the step scale-in's cooldown, AWS as documented).
    assert failed[0]["Description"] != first["Description"]
    # Once a minute of the cloud's clock while the alarm stays in ALARM, not every 10 s
    # evaluation: two attempts less than a minute apart have the alarm re-enter ALARM between.
    autoscaler = cloud._autoscaler
    assert autoscaler is not None
    refused = [when for when, policy, *_ in autoscaler.refusals if "concurrency" in policy]
    assert refused
    # Each Failed activity is stamped at its evaluation's instant: its window's end + the delay.
    evaluations = {when + CLOUDWATCH_DELAY_S for when, *_ in autoscaler.refusals}
    for activity in failed:
        at = activity["StartTime"].timestamp()
        assert any(abs(at - t) < EXACT_S for t in evaluations), (at, sorted(evaluations))
    entered = [
        when
        for when, alarm, state in autoscaler.transitions
        if "-AlarmHigh-" in alarm and state == "ALARM"
    ]
    for earlier, later in itertools.pairwise(refused):
        if later - earlier < 60 - 1e-6:
            assert any(earlier < t <= later for t in entered), (earlier, later, entered)


def test_without_load_the_step_policy_scales_in(
    cloud: LocalCloud, scaled_out: list[dict[str, Any]]
) -> None:
    scale_in = _wait(
        "a scale-in",
        lambda: [a for a in _activities(cloud) if "low-concurrency" in a["Cause"]],
        40,
    )[0]
    assert "-low-concurrency in state ALARM" in scale_in["Cause"]
    low = [c["HistorySummary"] for c in _state_changes(f"{cloud.endpoint_name}-")]
    assert "Alarm updated from OK to ALARM" in low


def _scalable_target(cloud: LocalCloud) -> dict[str, str]:
    return {
        "ServiceNamespace": "sagemaker",
        "ResourceId": f"endpoint/{cloud.endpoint_name}/variant/{cloud.variant_name}",
        "ScalableDimension": "sagemaker:variant:DesiredInstanceCount",
    }


def _suspend_scaling(cloud: LocalCloud, suspended: bool) -> None:
    control_client("application-autoscaling").register_scalable_target(
        **_scalable_target(cloud),
        SuspendedState={
            "DynamicScalingInSuspended": suspended,
            "DynamicScalingOutSuspended": suspended,
        },
    )


def _set_desired(cloud: LocalCloud, count: int) -> None:
    """As `tts-bench qmax`'s freeze does: SageMaker refuses a capacity change while the
    endpoint is Updating (a scale-in the policy began before it was suspended), so wait."""
    sm = control_client("sagemaker")

    def accepted() -> bool:
        if sm.describe_endpoint(EndpointName=cloud.endpoint_name)["EndpointStatus"] != "InService":
            return False
        try:
            sm.update_endpoint_weights_and_capacities(
                EndpointName=cloud.endpoint_name,
                DesiredWeightsAndCapacities=[
                    {"VariantName": cloud.variant_name, "DesiredInstanceCount": count}
                ],
            )
        except ClientError as exc:
            if "in-progress" not in exc.response["Error"]["Message"]:
                raise
            return False
        return True

    _wait("the endpoint to accept a capacity change", accepted, 60)


def test_fifty_instances_serve_on_this_machine(
    cloud: LocalCloud, scaled_out: list[dict[str, Any]]
) -> None:
    _suspend_scaling(cloud, True)
    sm = control_client("sagemaker")
    try:
        _set_desired(cloud, 50)

        def fifty() -> bool:
            described = sm.describe_endpoint(EndpointName=cloud.endpoint_name)
            variant = described["ProductionVariants"][0]
            return (
                described["EndpointStatus"] == "InService" and variant["CurrentInstanceCount"] == 50
            )

        _wait("50 instances in service", fifty, 90)
        with ThreadPoolExecutor(25) as pool:
            body = speech_request("fifty")
            done = list(
                pool.map(
                    lambda _: events(
                        rejoin(stream(runtime_client(), cloud.endpoint_name, body))[0]
                    )[-1]["type"],
                    range(200),
                )
            )
        assert done == ["done"] * 200
        assert len({i.url for i in cloud.fleet.in_service()}) == 50
    finally:
        _suspend_scaling(cloud, False)


def test_suspended_the_metric_is_the_users_in_flight_and_resumed_it_scales_out(
    cloud: LocalCloud, scaled_out: list[dict[str, Any]]
) -> None:
    """40 closed-loop users on one instance: with scaling suspended, each window's Maximum of
    ConcurrentRequestsPerModel is the users in flight (counted neither short nor twice) and the
    desired count stays; resumed, target tracking scales out on the alarm those windows raised.
    Last in the module: it leaves the fleet as the policy does."""
    sm = control_client("sagemaker")

    def desired() -> int:
        variant = sm.describe_endpoint(EndpointName=cloud.endpoint_name)["ProductionVariants"][0]
        return int(variant["DesiredInstanceCount"])

    users = 40
    _suspend_scaling(cloud, True)
    try:
        _set_desired(cloud, 1)
        _wait("one instance serving", lambda: len(cloud.fleet.in_service()) == 1, 60)
        with ClosedLoop(runtime_client(), cloud.endpoint_name, users):
            # The first whole window after the ramp's, then two more, as published.
            start = datetime.fromtimestamp((cloud.clock.now() // 10 + 2) * 10, tz=UTC)
            end = start + timedelta(seconds=30)

            def three_windows() -> list[float] | None:
                found = [v for t, v in _datapoints(cloud, start, end) if t < end]
                return found[:3] if len(found) >= 3 else None

            values = _wait("three windows of the load", three_windows, 30)
            assert all(v <= users + 0.5 for v in values), values  # never counted twice
            assert sum(abs(v - users) <= 0.5 for v in values) >= 2, values  # nor short
            assert desired() == 1
            resumed = cloud.clock.now_datetime()
            _suspend_scaling(cloud, False)
            out = _wait(
                "a scale-out once resumed",
                lambda: [
                    a
                    for a in _activities(cloud)
                    if a["StartTime"] >= resumed - timedelta(seconds=1)
                    and "-AlarmHigh-" in a["Cause"]
                ],
                30,
            )
        assert out[0]["Description"].startswith("Setting desired instance count to ")
        assert desired() >= 2
    finally:
        _suspend_scaling(cloud, False)
