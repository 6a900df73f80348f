"""A `DeployedSnapshot` carrying exactly the values a plan deploys: the pure side of `drift`
and `validate`, without an emulator (a model package's Model included, whose network isolation
plain moto drops)."""

from __future__ import annotations

from typing import Any

from tests.aws.emulated import IMAGE
from tts_bench.aws.deployed import (
    Alarm,
    DeployedSnapshot,
    ScalableTarget,
    ScalingPolicy,
    SuspendedState,
    Variant,
)
from tts_bench.aws.validate import Setting
from tts_bench.deployment import (
    DEFAULT_VARIANT,
    resource_id,
    scale_in_alarm_name,
    scale_in_policy_name,
    target_tracking_policy_name,
)
from tts_bench.telemetry import ENV_MAX_QUEUE_DEPTH


def _runs(values: dict[Setting, Any]) -> dict[str, Any]:
    """A Variant's image, or model package and isolation, as `values` plan them."""
    if Setting.MODEL_PACKAGE in values:
        return {"model_package": values[Setting.MODEL_PACKAGE], "network_isolation": True}
    return {"image": f"{IMAGE.partition('@')[0]}@{values[Setting.IMAGE_DIGEST]}"}


def snapshot_for(values: dict[Setting, Any], endpoint: str = "e") -> DeployedSnapshot:
    """A snapshot carrying exactly `values`, shaped as the stack deploys them."""
    rid = resource_id(endpoint)
    tracking = ScalingPolicy(
        name=target_tracking_policy_name(endpoint),
        arn="arn:tracking",
        resource_id=rid,
        policy_type="TargetTrackingScaling",
        target_value=values[Setting.TARGET_VALUE],
        predefined_metric=values[Setting.TARGET_METRIC],
        scale_out_cooldown_s=int(values[Setting.SCALE_OUT_COOLDOWN]),
        scale_in_disabled=True,
    )
    step = ScalingPolicy(
        name=scale_in_policy_name(endpoint),
        arn="arn:step",
        resource_id=rid,
        policy_type="StepScaling",
        step_cooldown_s=int(values[Setting.SCALE_IN_COOLDOWN]),
        adjustment_type="ChangeInCapacity",
        step_adjustments=((None, 0.0, -1),),
    )
    alarm = Alarm(
        name=scale_in_alarm_name(endpoint),
        state="OK",
        state_updated_at=None,
        threshold=values[Setting.SCALE_IN_THRESHOLD],
        metric_name=None,
        statistic=values[Setting.SCALE_IN_STATISTIC],
        period_s=values[Setting.SCALE_IN_PERIOD],
        evaluation_periods=values[Setting.SCALE_IN_DATAPOINTS],
        actions=("arn:step",),
    )
    tracking_alarm = Alarm(
        name=f"TargetTracking-{rid}-AlarmHigh-0a1b",
        state="OK",
        state_updated_at=None,
        threshold=values[Setting.TARGET_VALUE],
        metric_name=None,
        statistic=values[Setting.TARGET_STATISTIC],
        period_s=values[Setting.TARGET_PERIOD],
        evaluation_periods=values[Setting.TARGET_DATAPOINTS],
        actions=("arn:tracking",),
    )
    return DeployedSnapshot(
        region="r",
        endpoint=endpoint,
        endpoint_status="InService",
        variants=(
            Variant(
                name=DEFAULT_VARIANT,
                desired_instance_count=1,
                current_instance_count=1,
                weight=1.0,
                instance_type="ml.g5.xlarge",
                model_name="m",
                environment=(
                    {ENV_MAX_QUEUE_DEPTH: str(values[Setting.QUEUE_MAX_DEPTH])}
                    if Setting.QUEUE_MAX_DEPTH in values
                    else {}
                ),
                **_runs(values),
            ),
        ),
        targets=(
            ScalableTarget(
                resource_id=rid,
                min_capacity=int(values[Setting.MIN_INSTANCES]),
                max_capacity=int(values[Setting.MAX_INSTANCES]),
                suspended=SuspendedState(),
            ),
        ),
        policies=(tracking, step),
        alarms=(alarm, tracking_alarm),
        other_endpoints={},
        read_at="2026-01-01T00:00:00Z",  # type: ignore[arg-type]
    )


# A Marketplace seller's package version (issue 39), as a plan measured on it names it.
PACKAGE = "arn:aws:sagemaker:us-east-1:865070037744:model-package/sonic-3-standin/2"
OTHER_DIGEST = "sha256:" + "ab" * 32
OTHER_IMAGE = f"{IMAGE.partition('@')[0]}@{OTHER_DIGEST}"


def running(snapshot: DeployedSnapshot, **model: Any) -> DeployedSnapshot:
    """`snapshot` with its variant's Model running `model` (image, model_package,
    network_isolation) in place of what it ran."""
    nothing = {"image": None, "model_package": None, "network_isolation": None}
    variant = snapshot.variants[0].model_copy(update=nothing | model)
    return snapshot.model_copy(update={"variants": (variant,)})
