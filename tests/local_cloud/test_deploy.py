"""Deploying the program's recording: the same names and values, the local image, moto's gaps
bridged (the recording is made once per module: the program runs under mocks)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest

from tts_bench.deployment import (
    INVOCATIONS_TRACKING_METRIC,
    TARGET_TRACKING_METRIC,
    policy_name,
    resource_id,
    scale_in_alarm_name,
    scale_in_policy_name,
    step_alarm_name,
    target_tracking_policy_name,
)
from tts_bench.infra.preview_recorder import Recording
from tts_bench.local_cloud.control_plane.deploy import (
    Deployment,
    apply_deployment,
    deployment_from_recording,
    local_overrides,
    record_stack,
)
from tts_bench.local_cloud.control_plane.moto_host import MotoHost
from tts_bench.local_cloud.errors import DeployError
from tts_bench.local_cloud.settings import REGION, REPO_ROOT
from tts_bench.planning.aws import metric_math
from tts_bench.telemetry import ENV_IMAGE_DIGEST, ENV_INSTANCE_TYPE, ENV_MAX_QUEUE_DEPTH

pytestmark = pytest.mark.slow

DIGEST = "sha256:" + "ab" * 32
ENDPOINT = "speech-kokoro-82m"


@pytest.fixture(scope="module")
def recording() -> Recording:
    return record_stack(REPO_ROOT, "dev", {})


@pytest.fixture(scope="module")
def deployment(recording: Recording) -> Deployment:
    return deployment_from_recording(recording, DIGEST, None, "abc1234")


def _props(recording: Recording, kind: str) -> dict[str, Any]:
    (found,) = [r.properties for r in recording.resources if r.type == kind]
    return found


def test_endpoint_values_are_the_recorded_ones(
    recording: Recording, deployment: Deployment
) -> None:
    model = _props(recording, "aws:sagemaker/model:Model")
    variant = _props(recording, "aws:sagemaker/endpointConfiguration:EndpointConfiguration")[
        "productionVariants"
    ][0]
    assert deployment.endpoint_name == ENDPOINT
    assert deployment.instance_type == variant["instanceType"] == "ml.g5.xlarge"
    assert deployment.initial_count == int(variant["initialInstanceCount"])
    assert deployment.routing_strategy == "LEAST_OUTSTANDING_REQUESTS"
    api_variant = deployment.endpoint_config["ProductionVariants"][0]
    assert api_variant["ModelName"] == deployment.model["ModelName"]
    recorded_env = model["primaryContainer"]["environment"]
    assert deployment.model["PrimaryContainer"]["Image"].endswith("@" + DIGEST)
    assert deployment.model["PrimaryContainer"]["Environment"] == {
        **recorded_env,
        ENV_IMAGE_DIGEST: DIGEST,
    }
    # The local processes report their own hardware and build.
    assert ENV_INSTANCE_TYPE not in deployment.instance_env
    assert ENV_IMAGE_DIGEST not in deployment.instance_env
    assert deployment.instance_env[ENV_MAX_QUEUE_DEPTH] == recorded_env[ENV_MAX_QUEUE_DEPTH]


def test_scaling_values_are_the_recorded_ones(recording: Recording, deployment: Deployment) -> None:
    """The dev stack deploys the fleet plan: target tracking on invocations with scale-in
    disabled, the burst step (PercentChangeInCapacity, at least three instances) on its alarm,
    and the scale-in step on its metric-math alarm (PutMetricAlarm's `Metrics`)."""
    target = _props(recording, "aws:appautoscaling/target:Target")
    assert deployment.scalable_target == {
        "ServiceNamespace": "sagemaker",
        "ResourceId": resource_id(ENDPOINT),
        "ScalableDimension": "sagemaker:variant:DesiredInstanceCount",
        "MinCapacity": int(target["minCapacity"]),
        "MaxCapacity": int(target["maxCapacity"]),
    }
    policies = {p["PolicyName"]: p for p in deployment.policies}
    tracking = policies[policy_name(ENDPOINT, "AllTraffic", "invocations-target")][
        "TargetTrackingScalingPolicyConfiguration"
    ]
    assert tracking["PredefinedMetricSpecification"]["PredefinedMetricType"] == (
        INVOCATIONS_TRACKING_METRIC
    )
    # Target tracking keeps its own scale-in (for small fleets), with the plan's cooldown.
    assert tracking["DisableScaleIn"] is False and tracking["ScaleInCooldown"] == 300
    burst = policies[policy_name(ENDPOINT, "AllTraffic", "burst")]["StepScalingPolicyConfiguration"]
    assert burst["AdjustmentType"] == "PercentChangeInCapacity"
    assert burst["MinAdjustmentMagnitude"] == 3
    assert burst["StepAdjustments"][0]["MetricIntervalLowerBound"] == 0.0
    alarms = {a["AlarmName"]: (a, actions) for a, actions in deployment.alarms}
    burst_alarm, actions = alarms[step_alarm_name(ENDPOINT, "AllTraffic", "burst")]
    assert actions == [policy_name(ENDPOINT, "AllTraffic", "burst")]
    assert (burst_alarm["Period"], burst_alarm["EvaluationPeriods"]) == (10, 1)
    scale_in = policies[scale_in_policy_name(ENDPOINT)]["StepScalingPolicyConfiguration"]
    assert scale_in["AdjustmentType"] == "PercentChangeInCapacity"
    assert scale_in["StepAdjustments"][0]["ScalingAdjustment"] == -1
    scale_in_alarm, actions = alarms[scale_in_alarm_name(ENDPOINT)]
    assert actions == [scale_in_policy_name(ENDPOINT)]
    assert not {"MetricName", "Namespace", "Statistic", "Period", "Dimensions"} & set(
        scale_in_alarm
    )
    parsed = metric_math.parse(scale_in_alarm["Metrics"])
    assert parsed == (metric_math.FleetMath(20), 60)
    assert metric_math.same(
        scale_in_alarm["Metrics"],
        metric_math.queries(
            parsed[0], scale_in_alarm["Threshold"], ENDPOINT, "AllTraffic", parsed[1]
        ),
    )
    assert (scale_in_alarm["EvaluationPeriods"], scale_in_alarm["ComparisonOperator"]) == (
        3, "LessThanThreshold",
    )  # fmt: skip


def test_the_published_rules_scaling_is_recorded_when_the_stack_asks_for_it() -> None:
    deployment = deployment_from_recording(
        record_stack(REPO_ROOT, "dev", {"planRule": "published"}), DIGEST, None, "abc1234"
    )
    policies = {p["PolicyName"]: p for p in deployment.policies}
    tracking = policies[target_tracking_policy_name(ENDPOINT)][
        "TargetTrackingScalingPolicyConfiguration"
    ]
    assert (
        tracking["PredefinedMetricSpecification"]["PredefinedMetricType"] == TARGET_TRACKING_METRIC
    )
    assert tracking["DisableScaleIn"] is True
    step = policies[scale_in_policy_name(ENDPOINT)]["StepScalingPolicyConfiguration"]
    assert step["StepAdjustments"] == [{"ScalingAdjustment": -1, "MetricIntervalUpperBound": 0.0}]
    alarms = {a["AlarmName"]: actions for a, actions in deployment.alarms}
    assert alarms[scale_in_alarm_name(ENDPOINT)] == [scale_in_policy_name(ENDPOINT)]


def test_no_scaling_resources_where_the_gate_disables_scaling() -> None:
    recording = record_stack(REPO_ROOT, "dev", {"minInstances": 2, "maxInstances": 2})
    deployment = deployment_from_recording(recording, DIGEST, None, "abc1234")
    assert deployment.scalable_target is None
    assert deployment.policies == []
    assert scale_in_alarm_name(ENDPOINT) not in {a["AlarmName"] for a, _ in deployment.alarms}
    assert deployment.initial_count == 2


class _Seen:
    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    def endpoint_created(self, endpoint_name: str) -> None:
        self.calls.append(("created", endpoint_name))

    def capacity_requested(self, endpoint_name: str, desired: dict[str, int]) -> None:
        self.calls.append(("capacity", desired))


@pytest.fixture
def moto() -> Iterator[MotoHost]:
    host = MotoHost()
    host.start()
    yield host
    host.stop()


def test_apply_creates_it_in_moto_and_hands_capacity_changes_over(
    moto: MotoHost, deployment: Deployment
) -> None:
    seen = _Seen()
    moto.listen(seen)

    def client(service: str) -> Any:
        return boto3.client(
            service,
            region_name=REGION,
            endpoint_url=moto.url,
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )

    apply_deployment(deployment, client, endpoint_exists=False, switch_config=lambda _: None)
    assert seen.calls == [("created", ENDPOINT)]
    sm = client("sagemaker")
    config = sm.describe_endpoint_config(
        EndpointConfigName=deployment.endpoint_config["EndpointConfigName"]
    )
    assert config["ProductionVariants"][0]["InstanceType"] == "ml.g5.xlarge"  # moto's list patched
    policies = client("application-autoscaling").describe_scaling_policies(
        ServiceNamespace="sagemaker"
    )["ScalingPolicies"]
    assert {p["PolicyName"] for p in policies} == {p["PolicyName"] for p in deployment.policies}
    burst_alarm = step_alarm_name(ENDPOINT, "AllTraffic", "burst")
    alarms = client("cloudwatch").describe_alarms()["MetricAlarms"]
    (alarm,) = [a for a in alarms if a["AlarmName"] == burst_alarm]
    arns = {p["PolicyName"]: p["PolicyARN"] for p in policies}
    assert alarm["AlarmActions"] == [arns[policy_name(ENDPOINT, "AllTraffic", "burst")]]
    # The scale-in alarm reaches moto as metric math, and reads back as what `queries` writes.
    (math_alarm,) = [a for a in alarms if a["AlarmName"] == scale_in_alarm_name(ENDPOINT)]
    assert math_alarm["AlarmActions"] == [arns[scale_in_policy_name(ENDPOINT)]]
    assert metric_math.parse(math_alarm["Metrics"]) == (metric_math.FleetMath(20), 60)

    sm.update_endpoint_weights_and_capacities(
        EndpointName=ENDPOINT,
        DesiredWeightsAndCapacities=[{"VariantName": "AllTraffic", "DesiredInstanceCount": 3}],
    )
    assert seen.calls[-1] == ("capacity", {"AllTraffic": 3})
    variant = sm.describe_endpoint(EndpointName=ENDPOINT)["ProductionVariants"][0]
    # moto would jump to 3 at once; the count stays what runs until the fleet says otherwise.
    assert (variant["DesiredInstanceCount"], variant["CurrentInstanceCount"]) == (3, 1)


def test_a_scheduled_plans_actions_are_deployed_and_a_plan_without_removes_them(
    moto: MotoHost, tmp_path
) -> None:
    """The program's scheduled actions for a `--schedule` plan go to moto as recorded (where
    the cloud's Autoscaler runs them); a redeploy of a plan without a schedule removes them."""
    from tests.infra.conftest import copy_program
    from tts_bench.artifacts.files import load_artifact
    from tts_bench.artifacts.plan import PlanArtifact
    from tts_bench.infra.preview import record
    from tts_bench.planning.schedule.attach import with_schedule

    fleet = load_artifact(
        REPO_ROOT / "measurements" / "plan-kokoro-82m-fleet-g5xlarge-8b1b96bc.json", PlanArtifact
    )
    plan = with_schedule(fleet, "a day", [10.0] * 60 + [300.0] * 20 + [10.0] * 80)
    program = copy_program(tmp_path, [plan], planRule="fleet", maxInstances=20)
    deployment = deployment_from_recording(record(program, "dev"), DIGEST, None, "abc1234")
    assert [
        (a["ScheduledActionName"], a["Schedule"], a["Timezone"], a["ScalableTargetAction"])
        for a in sorted(deployment.scheduled_actions, key=lambda a: a["ScheduledActionName"])
    ] == [
        (f"{ENDPOINT}-AllTraffic-schedule-0000", "cron(0 0 * * ? *)", "Etc/UTC",
         {"MinCapacity": 1, "MaxCapacity": 20}),
        (f"{ENDPOINT}-AllTraffic-schedule-0021", "cron(21 0 * * ? *)", "Etc/UTC",
         {"MinCapacity": 20, "MaxCapacity": 20}),
        (f"{ENDPOINT}-AllTraffic-schedule-0139", "cron(39 1 * * ? *)", "Etc/UTC",
         {"MinCapacity": 1, "MaxCapacity": 20}),
    ]  # fmt: skip

    def client(service: str) -> Any:
        return boto3.client(
            service, region_name=REGION, endpoint_url=moto.url,
            aws_access_key_id="testing", aws_secret_access_key="testing",
        )  # fmt: skip

    def deployed() -> list[str]:
        return sorted(
            a["ScheduledActionName"]
            for a in client("application-autoscaling").describe_scheduled_actions(
                ServiceNamespace="sagemaker"
            )["ScheduledActions"]
        )

    apply_deployment(deployment, client, endpoint_exists=False, switch_config=lambda _: None)
    assert deployed() == sorted(a["ScheduledActionName"] for a in deployment.scheduled_actions)
    (tmp_path / "plain").mkdir()
    plain = deployment_from_recording(
        record(copy_program(tmp_path / "plain", [fleet], planRule="fleet", maxInstances=20), "dev"),
        DIGEST, None, "abc1235",
    )  # fmt: skip
    assert plain.scheduled_actions == []
    apply_deployment(plain, client, endpoint_exists=True, switch_config=lambda _: None)
    assert deployed() == []


STANDIN_STACK = "sonic3-standin"  # the committed Pulumi.sonic3-standin.yaml


def test_a_model_package_stack_needs_the_command_each_instance_runs(tmp_path: Path) -> None:
    """Issue 39: a package has no image for the local cloud to run; without --container-cmd
    its stack is refused in one line saying what to give. (The package Model read back
    isolated, its package described: tests/local_cloud/test_container_command.py.)"""
    with pytest.raises(
        DeployError, match="stack sonic3-standin deploys a modelPackageArn"
    ) as caught:
        local_overrides(REPO_ROOT, STANDIN_STACK, DIGEST, None)
    assert "\n" not in str(caught.value) and 'give --container-cmd "..."' in str(caught.value)
    overrides = local_overrides(REPO_ROOT, STANDIN_STACK, DIGEST, "python serve.py")
    assert overrides == {
        "modelPackageArn": "arn:aws:sagemaker:us-east-1:000000000000:model-package/"
        "sonic-3-standin/1",
        "localCloud": True,
    }


def test_a_4_hourly_plans_crons_list_every_recurrence_and_deploy(moto: MotoHost, tmp_path) -> None:
    """A day that repeats every 4 h: the program records each step as one cron listing its six
    hours, and moto takes them as the cloud's Autoscaler will read them."""
    from tests.infra.conftest import copy_program
    from tts_bench.artifacts.files import load_artifact
    from tts_bench.artifacts.plan import PlanArtifact
    from tts_bench.infra.preview import record
    from tts_bench.planning.schedule.attach import with_schedule

    fleet = load_artifact(
        REPO_ROOT / "measurements" / "plan-kokoro-82m-fleet-g5xlarge-8b1b96bc.json", PlanArtifact
    )
    day = [10.0] * 60 + [300.0] * 20 + [10.0] * 160
    plan = with_schedule(fleet, "a 4 h day", day, period_s=14_400)
    program = copy_program(tmp_path, [plan], planRule="fleet", maxInstances=20)
    deployment = deployment_from_recording(record(program, "dev"), DIGEST, None, "abc1234")
    assert sorted(a["Schedule"] for a in deployment.scheduled_actions) == [
        "cron(0 0,4,8,12,16,20 * * ? *)",
        "cron(21 0,4,8,12,16,20 * * ? *)",
        "cron(39 1,5,9,13,17,21 * * ? *)",
    ]

    def client(service: str) -> Any:
        return boto3.client(
            service, region_name=REGION, endpoint_url=moto.url,
            aws_access_key_id="testing", aws_secret_access_key="testing",
        )  # fmt: skip

    apply_deployment(deployment, client, endpoint_exists=False, switch_config=lambda _: None)
    read = client("application-autoscaling").describe_scheduled_actions(
        ServiceNamespace="sagemaker"
    )["ScheduledActions"]
    assert sorted(a["Schedule"] for a in read) == sorted(
        a["Schedule"] for a in deployment.scheduled_actions
    )
