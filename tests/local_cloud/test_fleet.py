"""The fleet of process instances through the control plane: capacity changes, markers, logs.

One local cloud for the module: the dev stack's recorded resources with an emulated published
plan for this working tree's image, made from synthetic raw data with the reference ladder's
figures (target tracking at 37.5, the step scale-in policy at 25 and its alarm), onnx
instances, the policies' cooldowns and alarm periods × 0.01. Alarm periods cannot go below the
10 s metric period, so the alarms are as deployed (3 × 10 s); the scale-in cooldown is 9.6 s
instead of 960 s, so each scale-in step takes one window.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest

from tests.local_cloud.conftest import (
    ONNX,
    READY_TIMEOUT_S,
    cloud_fixture,
    control_client,
    emulated_plan_dir,
    read_log_events,
)
from tts_bench.local_cloud import LocalCloud, LocalCloudSettings
from tts_bench.local_cloud.instances.fleet import InstanceState
from tts_bench.telemetry import STARTUP_MARKERS

pytestmark = pytest.mark.slow

cloud = cloud_fixture(
    lambda folder: LocalCloudSettings(
        server_args=ONNX,
        instances=1,
        scaling_time_scale=0.01,
        stack_overrides={
            "measurementsDir": str(emulated_plan_dir(folder, ONNX)),
            "planRule": "published",  # the emulated plan is a published-rule plan
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
    # Draining an idle instance may end between two polls of a busy machine: the Updating it
    # passes through is then not seen, and the count of one says the scale-in happened.
    assert _statuses_until_in_service(cloud, 1, 60) in (["Updating", "InService"], ["InService"])
    (drained,) = [i for i in cloud.fleet.instances() if i.state == InstanceState.STOPPED]
    assert drained.exit_code == 0
    time.sleep(1.0)
    drained_log = [json.loads(x).get("msg") for x in read_log_events(cloud, drained.log_stream)]
    assert drained_log.index("draining") < drained_log.index("drained")
