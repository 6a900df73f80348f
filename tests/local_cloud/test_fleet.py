"""The fleet through the control plane: capacity changes, metrics under load, autoscaling.

One local cloud for the module: the dev stack's recorded resources with the reference plan as
an emulated plan for this working tree's image (target tracking at the plan's target, the step
scale-in policy and its alarm), onnx instances, the policies' cooldowns and alarm periods × 0.01.
Alarm periods cannot go below the 10 s metric period, so the alarms are as deployed (3 × 10 s);
the scale-in cooldown is 9.6 s instead of 960 s, so each scale-in step takes one window.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from tests.local_cloud.conftest import (
    ONNX,
    READY_TIMEOUT_S,
    cloud_fixture,
    control_client,
    emulated_plan_dir,
    read_log_events,
    runtime_client,
)
from tests.local_cloud.streams import ClosedLoop
from tts_bench.local_cloud import LocalCloud, LocalCloudSettings
from tts_bench.local_cloud.fleet import InstanceState
from tts_bench.telemetry import CONCURRENT_REQUESTS_PER_MODEL, SAGEMAKER_NAMESPACE, STARTUP_MARKERS

pytestmark = pytest.mark.slow

cloud = cloud_fixture(
    lambda folder: LocalCloudSettings(
        server_args=ONNX,
        instances=1,
        scaling_time_scale=0.01,
        stack_overrides={
            "measurementsDir": str(emulated_plan_dir(folder, ONNX)),
            "planRule": "published",  # the emulated plan is the published reference plan
        },
    )
)


def _describe(cloud: LocalCloud) -> dict:
    return control_client("sagemaker").describe_endpoint(EndpointName=cloud.endpoint_name)


def _set_desired(cloud: LocalCloud, count: int) -> None:
    control_client("sagemaker").update_endpoint_weights_and_capacities(
        EndpointName=cloud.endpoint_name,
        DesiredWeightsAndCapacities=[
            {"VariantName": cloud.variant_name, "DesiredInstanceCount": count}
        ],
    )


def _statuses_until_in_service(cloud: LocalCloud, count: int, timeout_s: float) -> list[str]:
    """describe_endpoint polled until InService with `count` instances; statuses de-duplicated."""
    seen: list[str] = []
    deadline = time.time() + timeout_s
    while True:
        described = _describe(cloud)
        status = described["EndpointStatus"]
        if not seen or seen[-1] != status:
            seen.append(status)
        variant = described["ProductionVariants"][0]
        if status == "InService" and variant["CurrentInstanceCount"] == count:
            return seen
        assert time.time() < deadline, f"not InService with {count} instances: {seen}"
        time.sleep(0.1)


def _markers(lines: list[str]) -> list[str]:
    found = []
    for line in lines:
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if entry.get("msg") == "startup_marker":
            found.append(entry["marker"])
    return found


def _suspend_scaling(cloud: LocalCloud, suspended: bool) -> None:
    """As `ttotal` freezes the policies around a forced capacity change."""
    control_client("application-autoscaling").register_scalable_target(
        ServiceNamespace="sagemaker",
        ResourceId=f"endpoint/{cloud.endpoint_name}/variant/{cloud.variant_name}",
        ScalableDimension="sagemaker:variant:DesiredInstanceCount",
        SuspendedState={
            "DynamicScalingInSuspended": suspended,
            "DynamicScalingOutSuspended": suspended,
            "ScheduledScalingSuspended": suspended,
        },
    )


@pytest.fixture
def frozen(cloud: LocalCloud) -> Iterator[None]:
    _suspend_scaling(cloud, True)
    yield
    _suspend_scaling(cloud, False)


def test_desired_one_two_one(cloud: LocalCloud, frozen: None) -> None:
    first = {i.instance_id for i in cloud.fleet.in_service()}
    _set_desired(cloud, 2)
    assert _describe(cloud)["EndpointStatus"] == "Updating"  # at once, as on SageMaker
    assert _statuses_until_in_service(cloud, 2, READY_TIMEOUT_S) == ["Updating", "InService"]
    (second,) = [i for i in cloud.fleet.in_service() if i.instance_id not in first]
    streams = control_client("logs").describe_log_streams(
        logGroupName=f"/aws/sagemaker/Endpoints/{cloud.endpoint_name}"
    )["logStreams"]
    assert second.log_stream in {s["logStreamName"] for s in streams}
    time.sleep(1.0)  # the shipper sends every 0.2 s
    markers = _markers(read_log_events(cloud, second.log_stream))
    assert [m for m in STARTUP_MARKERS if m in markers] == list(STARTUP_MARKERS)
    assert sorted(markers, key=STARTUP_MARKERS.index) == markers  # in order

    _set_desired(cloud, 1)
    assert _statuses_until_in_service(cloud, 1, 60) == ["Updating", "InService"]
    (drained,) = [i for i in cloud.fleet.instances() if i.state == InstanceState.STOPPED]
    assert drained.exit_code == 0
    time.sleep(1.0)
    drained_log = [json.loads(x).get("msg") for x in read_log_events(cloud, drained.log_stream)]
    assert drained_log.index("draining") < drained_log.index("drained")


def _boundary(moment: datetime, up: bool) -> datetime:
    """The 10 s boundary at or after (`up`) or at or before `moment`."""
    seconds = moment.timestamp()
    edge = (math.ceil if up else math.floor)(seconds / 10) * 10
    return datetime.fromtimestamp(edge, tz=UTC)


def _max_concurrency(cloud: LocalCloud, start: datetime, end: datetime) -> list[float]:
    """The published per-window Maximum of ConcurrentRequestsPerModel in [start, end)."""
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
    )["MetricDataResults"][0]
    return answer["Values"]


def _steady_windows(cloud: LocalCloud, began: datetime, count: int, timeout_s: float) -> list:
    """The first `count` whole windows after the one the load began in (its ramp), as
    published: each window is published as it closes, so this waits about count + 1 windows."""
    start = _boundary(began, up=True) + timedelta(seconds=10)
    end = start + timedelta(seconds=10 * count)
    deadline = time.time() + timeout_s
    values = _max_concurrency(cloud, start, end)
    while len(values) < count and time.time() < deadline:
        time.sleep(0.5)
        values = _max_concurrency(cloud, start, end)
    return values


def test_the_metric_follows_the_load_and_above_target_scales_out_then_in(cloud: LocalCloud) -> None:
    """40 closed-loop users on one instance: first, scaling suspended, ConcurrentRequestsPerModel
    (the Maximum of each 10 s window) is the users in flight; then, scaling resumed, the dev
    plan's target of 37.5 in flight per instance is breached: scale-out, then, with no load,
    scale-in back to one."""
    users = 40
    assert len(cloud.fleet.in_service()) == 1
    _suspend_scaling(cloud, True)
    try:
        # 40 requests queued on one instance wait long on a loaded machine: some reach the 60 s
        # invocation ceiling and fail; their users send the next at once, so stay in flight.
        with ClosedLoop(runtime_client(), cloud.endpoint_name, users):
            began = datetime.now(UTC)
            values = _steady_windows(cloud, began, 3, timeout_s=90)
            assert len(values) >= 3, values
            # Every user holds one request (queued or executing) at the one instance: the
            # window's maximum is exactly the users, counted neither short nor twice.
            assert all(abs(v - users) <= 0.5 for v in values), values
            assert _describe(cloud)["ProductionVariants"][0]["DesiredInstanceCount"] == 1
            _suspend_scaling(cloud, False)
            deadline = time.time() + 60  # the alarm's 3 windows are above already
            while _describe(cloud)["ProductionVariants"][0]["DesiredInstanceCount"] < 2:
                assert time.time() < deadline, "no scale-out"
                time.sleep(1)
            # Checked under load: once it ends (its queue takes long to drain on a loaded
            # machine) the scale-in may already have stopped the new instance again.
            deadline = time.time() + 5
            while len([i for i in cloud.fleet.instances() if i.state != InstanceState.STOPPED]) < 2:
                assert time.time() < deadline, "no second instance spawned"
                time.sleep(0.1)
    finally:
        _suspend_scaling(cloud, False)
    said = "\n".join(cloud.said)  # type: ignore[attr-defined]
    assert "concurrency-target: TargetTracking-" in said and "desired 1 → 2" in said
    # No load: the scale-in alarm (Average <= 25 over 3 periods) removes one again (the
    # new one if it is not serving yet, as it is the cheapest to lose).
    # Tracking may have added more than one while the first was starting (the metric still
    # averaged over one InService instance); each scale-in waits out the 9.6 s cooldown.
    deadline = time.time() + 300
    while _describe(cloud)["ProductionVariants"][0]["DesiredInstanceCount"] > 1:
        assert time.time() < deadline, "no scale-in: " + "\n".join(cloud.said[-15:])  # type: ignore[attr-defined]
        time.sleep(1)
    _statuses_until_in_service(cloud, 1, 60)
    assert "scale-in: speech-kokoro-82m-AllTraffic-low-concurrency" in "\n".join(cloud.said)  # type: ignore[attr-defined]
