"""Deploy what the Pulumi program records for a stack, through boto3, against moto.

`record_stack` runs the program under mocks (`tts-bench preview`'s recorder) with the stack's
config and any overrides. `deployment_from_recording` turns the recorded SageMaker, Application
Auto Scaling and CloudWatch resources into API requests, pure: the same names and values, the
image replaced by the working tree's local digest (a model package by the one the cloud holds,
`local_overrides`), references between resources (unknown at
preview) resolved to what this deploy creates, a plan's scheduled actions included.
`apply_deployment` sends them. Other resource
types (S3, ECR, IAM, CodeBuild) are not deployed: the local instances read the offline weights.
"""

from __future__ import annotations

import os
import secrets
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tts_bench.deployment import DEFAULT_VARIANT, local_package_arn, metric_queries_from_pulumi
from tts_bench.infra.preview import record
from tts_bench.infra.preview_recorder import RecordedResource, Recording
from tts_bench.infra.stack_config import MODEL_PACKAGE_KEY, project_name, stack_file, stack_values
from tts_bench.local_cloud.errors import DeployError
from tts_bench.local_cloud.settings import ACCOUNT
from tts_bench.telemetry import ENV_IMAGE_DIGEST, ENV_INSTANCE_TYPE

UNKNOWN = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"  # Pulumi's sentinel for a preview-time unknown
MODEL = "aws:sagemaker/model:Model"
CONFIG = "aws:sagemaker/endpointConfiguration:EndpointConfiguration"
ENDPOINT = "aws:sagemaker/endpoint:Endpoint"
TARGET = "aws:appautoscaling/target:Target"
POLICY = "aws:appautoscaling/policy:Policy"
SCHEDULED = "aws:appautoscaling/scheduledAction:ScheduledAction"
ALARM = "aws:cloudwatch/metricAlarm:MetricAlarm"
DASHBOARD = "aws:cloudwatch/dashboard:Dashboard"
ROLE = "aws:iam/role:Role"
# Container env that would make the fingerprint claim the stack's hardware and image: the
# local process reports its own (SPEC §11, honesty).
_NOT_FOR_LOCAL = (ENV_INSTANCE_TYPE, ENV_IMAGE_DIGEST)


@dataclass(frozen=True)
class Deployment:
    """What one deploy creates, as boto3 requests, plus what the control plane runs."""

    endpoint_name: str
    variant_name: str
    instance_type: str
    initial_count: int
    routing_strategy: str
    startup_timeout_s: float
    instance_env: dict[str, str]  # the Model's env as the local processes get it
    model: dict[str, Any]
    endpoint_config: dict[str, Any]
    endpoint_tags: list[dict[str, str]]
    scalable_target: dict[str, Any] | None
    policies: list[dict[str, Any]]  # put_scaling_policy requests
    alarms: list[tuple[dict[str, Any], list[str]]]  # (put_metric_alarm, policy names to act on)
    dashboards: list[dict[str, Any]] = field(default_factory=list)
    scheduled_actions: list[dict[str, Any]] = field(default_factory=list)  # PutScheduledAction

    @property
    def model_package(self) -> str | None:
        """The model package the Model names (the local cloud's own ARN), if it names one."""
        package = self.model["PrimaryContainer"].get("ModelPackageName")
        return str(package) if package else None

    @property
    def max_instances(self) -> int | None:
        return int(self.scalable_target["MaxCapacity"]) if self.scalable_target else None


# --------------------------------------------------------------------------- recording


def record_stack(program_dir: Path, stack: str, overrides: dict[str, object]) -> Recording:
    """The program's recording for `stack`, with `overrides` (un-namespaced keys) applied."""
    if not overrides:
        return record(program_dir, stack)
    with overridden_stack(program_dir, stack, overrides) as scratch:
        return record(scratch, stack)


@contextmanager
def overridden_stack(program_dir: Path, stack: str, overrides: dict[str, object]) -> Iterator[Path]:
    """A scratch program folder whose stack file is `stack`'s with `overrides` (un-namespaced
    keys) applied; the program itself is linked, not copied. Removed on exit."""
    project = project_name(program_dir)
    values = stack_values(program_dir, stack)
    for key, value in overrides.items():
        values[key if ":" in key else f"{project}:{key}"] = value
    with tempfile.TemporaryDirectory(prefix="tts-bench-local-cloud-") as tmp:
        scratch = Path(tmp)
        own_stack_file = stack_file(program_dir, stack).name
        for entry in program_dir.iterdir():
            if entry.name not in (own_stack_file, ".git") and not entry.name.startswith(".venv"):
                os.symlink(entry, scratch / entry.name)
        (scratch / own_stack_file).write_text(yaml.safe_dump({"config": values}), encoding="utf-8")
        yield scratch


def local_overrides(
    program_dir: Path, stack: str, image_digest: str, container_cmd: str | None
) -> dict[str, object]:
    """The stack's image repository pinned to the local digest, or its model package's ARN as
    the local cloud holds it (`local_package_arn`), and `localCloud` set, so the program's plan
    gate looks for plans of what actually runs here (an emulated plan may gate only this
    deploy; SPEC §11 honesty)."""
    package = require_command_for_package(program_dir, stack, container_cmd)
    if package is not None:
        return {MODEL_PACKAGE_KEY: local_package_arn(package), "localCloud": True}
    values = stack_values(program_dir, stack)
    image = str(values.get(f"{project_name(program_dir)}:image", "local/tts-server"))
    repository = image.split("@", 1)[0]
    return {"image": f"{repository}@{image_digest}", "localCloud": True}


def require_command_for_package(
    program_dir: Path, stack: str, container_cmd: str | None
) -> str | None:
    """The model package the stack deploys (None: an image). A package has no image to run
    here: its stack needs the command each instance runs in its place (`container_cmd`)."""
    package = stack_values(program_dir, stack).get(
        f"{project_name(program_dir)}:{MODEL_PACKAGE_KEY}"
    )
    if package is not None and container_cmd is None:
        raise DeployError(
            f"stack {stack} deploys a {MODEL_PACKAGE_KEY}, which has no image to run here; give "
            '--container-cmd "..." with what each instance runs in its place (e.g. "python '
            'tests/ladder/sonic3_standin.py" for the Sonic-3 stand-in)'
        )
    return None if package is None else str(package)


def stack_max_instances(program_dir: Path, stack: str, overrides: dict[str, object]) -> int:
    """The operator's `maxInstances` for the stack (what the emulated quota answers)."""
    project = project_name(program_dir)
    raw = overrides.get(
        "maxInstances", stack_values(program_dir, stack).get(f"{project}:maxInstances", 1)
    )
    return int(str(raw))


# --------------------------------------------------------------------------- translation


def _tags(tags: dict[str, str] | None) -> list[dict[str, str]]:
    return [{"Key": k, "Value": v} for k, v in sorted((tags or {}).items())]


def _one(resources: list[RecordedResource], kind: str) -> RecordedResource:
    found = [r for r in resources if r.type == kind]
    if len(found) != 1:
        raise DeployError(
            f"the recording holds {len(found)} {kind.split(':')[-1]} resources, not one; is "
            "deployEndpoint true for this stack?"
        )
    return found[0]


def deployment_from_recording(
    recording: Recording, image_digest: str, instances: int | None, suffix: str
) -> Deployment:
    """Pure: the recorded resources as API requests. `suffix` stands in for Pulumi's
    auto-naming of the Model and the endpoint config (a new pair on every deploy)."""
    resources = recording.resources
    model_r = _one(resources, MODEL)
    config_r = _one(resources, CONFIG)
    endpoint_r = _one(resources, ENDPOINT)
    model_name = _auto_name(model_r, suffix)
    model, environment = _model_request(recording, model_r, model_name, image_digest)
    variant = _variant_request(config_r, model_name, instances)
    endpoint_config = {
        "EndpointConfigName": _auto_name(config_r, suffix),
        "ProductionVariants": [variant.request],
        "Tags": _tags(config_r.properties.get("tags")),
    }
    policy_names = {r.urn: str(r.properties["name"]) for r in resources if r.type == POLICY}
    return Deployment(
        endpoint_name=str(endpoint_r.properties["name"]),
        variant_name=variant.name,
        instance_type=variant.instance_type,
        initial_count=variant.count,
        routing_strategy=variant.routing,
        startup_timeout_s=variant.startup_timeout_s,
        instance_env={k: v for k, v in environment.items() if k not in _NOT_FOR_LOCAL},
        model=model,
        endpoint_config=endpoint_config,
        endpoint_tags=_tags(endpoint_r.properties.get("tags")),
        scalable_target=_scalable_target(resources),
        policies=[_policy(r.properties) for r in resources if r.type == POLICY],
        alarms=[
            (_alarm(r.properties), [policy_names[u] for u in _action_urns(r) if u in policy_names])
            for r in resources
            if r.type == ALARM
        ],
        dashboards=[
            {
                "DashboardName": r.properties["dashboardName"],
                "DashboardBody": r.properties["dashboardBody"],
            }
            for r in resources
            if r.type == DASHBOARD
        ],
        scheduled_actions=[
            _scheduled_action(r.properties) for r in resources if r.type == SCHEDULED
        ],
    )


def _auto_name(resource: RecordedResource, suffix: str) -> str:
    return str(resource.properties.get("name") or f"{resource.name}-{suffix}")


def _model_request(
    recording: Recording, model_r: RecordedResource, model_name: str, image_digest: str
) -> tuple[dict[str, Any], dict[str, str]]:
    """CreateModel's request, its image pinned to `image_digest` (or, for a vendor's package,
    naming the package, network-isolated as recorded), and the container's env."""
    by_urn = {r.urn: r for r in recording.resources}
    container = dict(model_r.properties.get("primaryContainer") or {})
    environment = {str(k): str(v) for k, v in (container.get("environment") or {}).items()}
    role_urns = model_r.property_dependencies.get("executionRoleArn", [])
    role = by_urn.get(role_urns[0]) if role_urns else None
    model = {
        "ModelName": model_name,
        "ExecutionRoleArn": f"arn:aws:iam::{ACCOUNT}:role/{role.name if role else 'sagemaker'}",
        "PrimaryContainer": _container_request(container, environment, image_digest),
        "Tags": _tags(model_r.properties.get("tags")),
    }
    if model_r.properties.get("enableNetworkIsolation"):
        model["EnableNetworkIsolation"] = True
    return model, environment


def _container_request(
    container: dict[str, Any], environment: dict[str, str], image_digest: str
) -> dict[str, Any]:
    """The Model's PrimaryContainer: the recorded package, or the image at the local digest."""
    package = container.get("modelPackageName")
    if package:  # the vendor's container reads none of this project's env
        return {"ModelPackageName": str(package), "Environment": environment}
    stack_image = str(container.get("image", ""))
    repository = stack_image.split("@", 1)[0].split(":", 1)[0] if stack_image else "local"
    return {
        "Image": f"{repository}@{image_digest}",
        "Environment": {**environment, ENV_IMAGE_DIGEST: image_digest},
    }


@dataclass(frozen=True)
class _VariantRequest:
    """The endpoint config's one production variant, as recorded and as requested."""

    name: str
    instance_type: str
    count: int
    routing: str
    startup_timeout_s: float
    request: dict[str, Any]


def _variant_request(
    config_r: RecordedResource, model_name: str, instances: int | None
) -> _VariantRequest:
    variants = config_r.properties.get("productionVariants") or []
    if len(variants) != 1:
        raise DeployError(f"the endpoint config has {len(variants)} variants; one is supported")
    variant = variants[0]
    variant_name = str(variant.get("variantName", DEFAULT_VARIANT))
    count = int(instances if instances is not None else variant.get("initialInstanceCount", 1))
    routing = [str(r.get("routingStrategy")) for r in variant.get("routingConfigs") or [] if r] or [
        "LEAST_OUTSTANDING_REQUESTS"
    ]
    startup_timeout_s = float(variant.get("containerStartupHealthCheckTimeoutInSeconds", 600))
    api_variant: dict[str, Any] = {
        "VariantName": variant_name,
        "ModelName": model_name,
        "InstanceType": str(variant["instanceType"]),
        "InitialInstanceCount": count,
        "InitialVariantWeight": 1.0,
        "RoutingConfig": {"RoutingStrategy": routing[0]},
        "ContainerStartupHealthCheckTimeoutInSeconds": int(startup_timeout_s),
    }
    if "modelDataDownloadTimeoutInSeconds" in variant:
        api_variant["ModelDataDownloadTimeoutInSeconds"] = int(
            variant["modelDataDownloadTimeoutInSeconds"]
        )
    return _VariantRequest(
        variant_name,
        str(variant["instanceType"]),
        count,
        routing[0],
        startup_timeout_s,
        api_variant,
    )


def _scalable_target(resources: list[RecordedResource]) -> dict[str, Any] | None:
    """RegisterScalableTarget's request for the recorded target, if there is one."""
    targets = [r for r in resources if r.type == TARGET]
    if not targets:
        return None
    p = targets[0].properties
    return {
        "ServiceNamespace": p["serviceNamespace"],
        "ResourceId": p["resourceId"],
        "ScalableDimension": p["scalableDimension"],
        "MinCapacity": int(p["minCapacity"]),
        "MaxCapacity": int(p["maxCapacity"]),
    }


def _action_urns(resource: RecordedResource) -> list[str]:
    return resource.property_dependencies.get("alarmActions", [])


def _policy(p: dict[str, Any]) -> dict[str, Any]:
    request: dict[str, Any] = {
        "PolicyName": p["name"],
        "ServiceNamespace": p["serviceNamespace"],
        "ResourceId": p["resourceId"],
        "ScalableDimension": p["scalableDimension"],
        "PolicyType": p["policyType"],
    }
    if "targetTrackingScalingPolicyConfiguration" in p:
        c = p["targetTrackingScalingPolicyConfiguration"]
        tracking: dict[str, Any] = {
            "TargetValue": float(c["targetValue"]),
            "DisableScaleIn": bool(c.get("disableScaleIn", False)),
        }
        if "predefinedMetricSpecification" in c:
            tracking["PredefinedMetricSpecification"] = {
                "PredefinedMetricType": c["predefinedMetricSpecification"]["predefinedMetricType"]
            }
        for key in ("scaleOutCooldown", "scaleInCooldown"):
            if key in c:
                tracking[key[0].upper() + key[1:]] = int(c[key])
        request["TargetTrackingScalingPolicyConfiguration"] = tracking
    if "stepScalingPolicyConfiguration" in p:
        c = p["stepScalingPolicyConfiguration"]
        steps = []
        for s in c.get("stepAdjustments", []):
            step: dict[str, Any] = {"ScalingAdjustment": int(s["scalingAdjustment"])}
            for key in ("metricIntervalLowerBound", "metricIntervalUpperBound"):
                if key in s:
                    step[key[0].upper() + key[1:]] = float(s[key])
            steps.append(step)
        step_config: dict[str, Any] = {
            "AdjustmentType": c["adjustmentType"],
            "StepAdjustments": steps,
        }
        if "cooldown" in c:
            step_config["Cooldown"] = int(c["cooldown"])
        if "metricAggregationType" in c:
            step_config["MetricAggregationType"] = c["metricAggregationType"]
        if "minAdjustmentMagnitude" in c:
            step_config["MinAdjustmentMagnitude"] = int(c["minAdjustmentMagnitude"])
        request["StepScalingPolicyConfiguration"] = step_config
    return request


def _scheduled_action(p: dict[str, Any]) -> dict[str, Any]:
    target = p.get("scalableTargetAction") or {}
    request: dict[str, Any] = {
        "ScheduledActionName": p["name"],
        "ServiceNamespace": p["serviceNamespace"],
        "ResourceId": p["resourceId"],
        "ScalableDimension": p["scalableDimension"],
        "Schedule": p["schedule"],
        "ScalableTargetAction": {
            api: int(target[key])
            for key, api in (("minCapacity", "MinCapacity"), ("maxCapacity", "MaxCapacity"))
            if target.get(key) is not None
        },
    }
    if p.get("timezone"):
        request["Timezone"] = p["timezone"]
    return request


def _alarm(p: dict[str, Any]) -> dict[str, Any]:
    request: dict[str, Any] = {
        "AlarmName": p["name"],
        "EvaluationPeriods": int(p["evaluationPeriods"]),
        "Threshold": float(p["threshold"]),
        "ComparisonOperator": p["comparisonOperator"],
        "Tags": _tags(p.get("tags")),
    }
    optional = {
        "statistic": "Statistic",
        "extendedStatistic": "ExtendedStatistic",
        "treatMissingData": "TreatMissingData",
        "alarmDescription": "AlarmDescription",
    }
    request.update({api: p[key] for key, api in optional.items() if key in p})
    if p.get("metricQueries"):  # a metric-math alarm: its queries name the metrics it reads
        metrics = metric_queries_from_pulumi(p["metricQueries"])
        for query in metrics:
            if "MetricStat" in query:
                query["MetricStat"]["Period"] = int(query["MetricStat"]["Period"])
        request["Metrics"] = metrics
    else:
        request |= {
            "Namespace": p["namespace"],
            "MetricName": p["metricName"],
            "Dimensions": [{"Name": k, "Value": v} for k, v in sorted(p["dimensions"].items())],
            "Period": int(p["period"]),
        }
    if "datapointsToAlarm" in p:
        request["DatapointsToAlarm"] = int(p["datapointsToAlarm"])
    return request


# --------------------------------------------------------------------------- applying


def _apply_scheduled(aas: Any, wanted: list[dict[str, Any]]) -> None:
    """The deployment's scheduled actions, and none a previous deploy made that it lacks."""
    names = {a["ScheduledActionName"] for a in wanted}
    for old in aas.describe_scheduled_actions(ServiceNamespace="sagemaker")["ScheduledActions"]:
        if old["ScheduledActionName"] not in names:
            aas.delete_scheduled_action(
                ServiceNamespace=old["ServiceNamespace"],
                ScheduledActionName=old["ScheduledActionName"],
                ResourceId=old["ResourceId"],
                ScalableDimension=old["ScalableDimension"],
            )
    for action in wanted:
        aas.put_scheduled_action(**action)


def new_suffix() -> str:
    return secrets.token_hex(4)[:7]


def apply_deployment(
    deployment: Deployment,
    client: Callable[[str], Any],
    endpoint_exists: bool,
    switch_config: Callable[[str], None],
) -> None:
    """Create the Model and endpoint config, then the endpoint (or switch an existing one to the
    new config through `switch_config`, moto having no UpdateEndpoint), then scaling and alarms;
    scaling resources a previous deploy made and this one lacks are removed."""
    sm = client("sagemaker")
    sm.create_model(**deployment.model)
    sm.create_endpoint_config(**deployment.endpoint_config)
    config_name = deployment.endpoint_config["EndpointConfigName"]
    if endpoint_exists:
        switch_config(config_name)
    else:
        sm.create_endpoint(
            EndpointName=deployment.endpoint_name,
            EndpointConfigName=config_name,
            Tags=deployment.endpoint_tags,
        )
    aas = client("application-autoscaling")
    cw = client("cloudwatch")
    wanted = {p["PolicyName"] for p in deployment.policies}
    for old in aas.describe_scaling_policies(ServiceNamespace="sagemaker")["ScalingPolicies"]:
        if old["PolicyName"] not in wanted:
            aas.delete_scaling_policy(
                PolicyName=old["PolicyName"],
                ServiceNamespace=old["ServiceNamespace"],
                ResourceId=old["ResourceId"],
                ScalableDimension=old["ScalableDimension"],
            )
    if deployment.scalable_target is None:
        for old in aas.describe_scalable_targets(ServiceNamespace="sagemaker")["ScalableTargets"]:
            aas.deregister_scalable_target(
                ServiceNamespace=old["ServiceNamespace"],
                ResourceId=old["ResourceId"],
                ScalableDimension=old["ScalableDimension"],
            )
    else:
        aas.register_scalable_target(**deployment.scalable_target)
    arns = {p["PolicyName"]: aas.put_scaling_policy(**p)["PolicyARN"] for p in deployment.policies}
    _apply_scheduled(aas, deployment.scheduled_actions)
    for request, policy_names in deployment.alarms:
        cw.put_metric_alarm(**request, AlarmActions=[arns[n] for n in policy_names if n in arns])
    for dashboard in deployment.dashboards:
        cw.put_dashboard(**dashboard)
