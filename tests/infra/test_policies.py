"""Each rule of the pack on hand-made args: a passing case, failing cases, and a value unknown
at preview (which must be reported, never passed). Props go through pulumi-policy's own
unknown-checking proxy, as the analyzer hands them to a rule."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pulumi_policy import (
    PolicyResource,
    PolicyResourceOptions,
    ResourceValidationArgs,
    StackValidationArgs,
)
from pulumi_policy.proxy import UNKNOWN_NUMBER_VALUE, UNKNOWN_STRING_VALUE, unknown_checking_proxy
from tts_policies import POLICIES, buckets, iam, images, scaling_plan

from tests.infra.conftest import OTHER_DIGEST, REFERENCE_DIGEST, REGISTRY_REPO
from tts_bench.artifacts.plan import PlanArtifact
from tts_bench.deployment import local_image_reference, metric_queries_from_pulumi
from tts_bench.planning.aws import metric_math

OPTS = PolicyResourceOptions(False, [], None, [], None, [], None)


def resource_args(type_: str, props: dict[str, Any]) -> ResourceValidationArgs:
    return ResourceValidationArgs(
        type_, unknown_checking_proxy(props), f"urn:{type_}::r", "r", OPTS, None
    )


def validate(policy: Any, args: Any) -> list[str]:
    violations: list[str] = []
    policy.validate(args, lambda message, urn=None: violations.append(message))
    return violations


class Stack:
    """Hand-made stack resources, linked by property dependencies as the engine links them."""

    def __init__(self) -> None:
        self.resources: list[PolicyResource] = []

    def add(
        self, type_: str, name: str, props: dict[str, Any], **deps: PolicyResource
    ) -> PolicyResource:
        resource = PolicyResource(
            type_, unknown_checking_proxy(props), f"urn:{name}", name, OPTS, None, None, [], {}
        )
        resource.property_dependencies.update({k: [v] for k, v in deps.items()})
        self.resources.append(resource)
        return resource

    def args(self, config: dict[str, Any] | None = None) -> StackValidationArgs:
        return StackValidationArgs(self.resources, config)


# --------------------------------------------------------------------------- measured plan

RID = "endpoint/speech/variant/AllTraffic"
DEPLOYMENT: dict[str, dict[str, Any]] = {
    "model": {
        "primaryContainer": {
            "image": f"{REGISTRY_REPO}@{REFERENCE_DIGEST}",
            "environment": {"MAX_QUEUE_DEPTH": "50"},
        },
        "tags": {"tts-bench:model": "kokoro-82m", "tts-bench:image-digest": REFERENCE_DIGEST},
    },
    "config": {
        "productionVariants": [
            {
                "variantName": "AllTraffic",
                "instanceType": "ml.g5.xlarge",
                "modelName": UNKNOWN_STRING_VALUE,
            }
        ]
    },
    "endpoint": {"name": "speech", "endpointConfigName": UNKNOWN_STRING_VALUE},
    "target": {
        "serviceNamespace": "sagemaker",
        "scalableDimension": "sagemaker:variant:DesiredInstanceCount",
        "resourceId": RID,
        "minCapacity": 1.0,
        "maxCapacity": 20.0,
        "tags": {
            "tts-bench:plan-id": "d0b4a6baef69",
            "tts-bench:plan-rule": "published",
            "tts-bench:image-digest": REFERENCE_DIGEST,
            "tts-bench:operator-min-instances": "1",
            "tts-bench:operator-max-instances": "20",
        },
    },
    "tracking": {
        "name": "speech-AllTraffic-concurrency-target",
        "serviceNamespace": "sagemaker",
        "resourceId": RID,
        "policyType": "TargetTrackingScaling",
        "targetTrackingScalingPolicyConfiguration": {
            "targetValue": 37.5,
            "scaleOutCooldown": 30.0,
            "disableScaleIn": True,
            "predefinedMetricSpecification": {
                "predefinedMetricType": "SageMakerVariantConcurrentRequestsPerModelHighResolution"
            },
        },
    },
    "step": {
        "name": "speech-AllTraffic-scale-in",
        "serviceNamespace": "sagemaker",
        "resourceId": RID,
        "policyType": "StepScaling",
        "stepScalingPolicyConfiguration": {
            "adjustmentType": "ChangeInCapacity",
            "cooldown": 960.0,
            "metricAggregationType": "Maximum",
            "stepAdjustments": [{"metricIntervalUpperBound": "0", "scalingAdjustment": -1.0}],
        },
    },
    "alarm": {
        "name": "speech-AllTraffic-low-concurrency",
        "metricName": "ConcurrentRequestsPerModel",
        "threshold": 25.0,
        "statistic": "Maximum",
        "period": 10.0,
        "evaluationPeriods": 3.0,
        "comparisonOperator": "LessThanOrEqualToThreshold",
        "treatMissingData": "breaching",
    },
}


def deployment(changes: Callable[[dict[str, dict[str, Any]]], None] | None = None) -> Stack:
    props = copy.deepcopy(DEPLOYMENT)
    if changes:
        changes(props)
    stack = Stack()
    model = stack.add("aws:sagemaker/model:Model", "model", props["model"])
    config = stack.add(
        "aws:sagemaker/endpointConfiguration:EndpointConfiguration",
        "config",
        props["config"],
        productionVariants=model,
    )
    stack.add(
        "aws:sagemaker/endpoint:Endpoint", "endpoint", props["endpoint"], endpointConfigName=config
    )
    stack.add("aws:appautoscaling/target:Target", "target", props["target"])
    stack.add("aws:appautoscaling/policy:Policy", "tracking", props["tracking"])
    stack.add("aws:appautoscaling/policy:Policy", "step", props["step"])
    stack.add("aws:cloudwatch/metricAlarm:MetricAlarm", "alarm", props["alarm"])
    if "scale_in" in props:  # the fleet rule's third policy, with its alarm
        stack.add("aws:appautoscaling/policy:Policy", "scale_in", props["scale_in"])
        stack.add(
            "aws:cloudwatch/metricAlarm:MetricAlarm", "scale_in_alarm", props["scale_in_alarm"]
        )
    return stack


def _set(path: str, value: Any) -> Callable[[dict[str, dict[str, Any]]], None]:
    def change(props: dict[str, dict[str, Any]]) -> None:
        *head, last = path.split(".")
        node: Any = props
        for key in head:
            node = node[int(key)] if key.isdigit() else node[key]
        node[last] = value

    return change


def _edit_query(
    index: int, key: str, old: str, new: str
) -> Callable[[dict[str, dict[str, Any]]], None]:
    """A hand edit of the scale-in alarm's query `index`."""

    def change(props: dict[str, dict[str, Any]]) -> None:
        query = props["scale_in_alarm"]["metricQueries"][index]
        assert old in query[key]
        query[key] = query[key].replace(old, new)

    return change


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (None, None),
        (
            _set("tracking.targetTrackingScalingPolicyConfiguration.targetValue", 50.0),
            "target value 50.0 != the plan's 37.5",
        ),
        (
            _set("tracking.targetTrackingScalingPolicyConfiguration.scaleOutCooldown", 60.0),
            "scale-out cooldown 60.0",
        ),
        (
            _set("step.stepScalingPolicyConfiguration.cooldown", 300.0),
            "scale-in cooldown 300.0 != the plan's 960",
        ),
        (
            _set("step.stepScalingPolicyConfiguration.stepAdjustments.0.scalingAdjustment", -5.0),
            "scale-in steps [(None, 0.0, -5.0)] != the plan's [(None, 0.0, -1)]",
        ),
        (
            _set("alarm.evaluationPeriods", 1.0),
            "scale-in alarm evaluationPeriods 1.0 != the plan's 3",
        ),
        (_set("alarm.treatMissingData", "notBreaching"), "treatMissingData notBreaching"),
        (_set("step.name", "speech-AllTraffic-other"), "no step scale-in policy"),
        (
            _set("tracking.targetTrackingScalingPolicyConfiguration.disableScaleIn", False),
            "target tracking must not scale in",
        ),
        # The fleet plan of this image gates now, and the published shape is not its shape.
        (
            _set("target.tags.tts-bench:plan-rule", "fleet"),
            "scaling policy speech-AllTraffic-concurrency-target is not in the plan",
        ),
        # A metric-math alarm where the plan's scale-in alarm reads one metric.
        (
            _set("alarm.metricQueries", [{"id": "e", "expression": "m1", "returnData": True}]),
            "scale-in alarm is a metric-math alarm, the plan's reads ConcurrentRequestsPerModel "
            "Maximum over 10 s alone",
        ),
        (_set("target.tags.tts-bench:plan-rule", "guess"), "tag is 'guess', not a plan rule"),
        (_set("alarm.threshold", 30.0), "scale-in alarm threshold 30.0 != the plan's 25.0"),
        # The right value in the wrong statistic, or over the wrong period, is another number.
        (
            _set("alarm.statistic", "Average"),
            "scale-in alarm evaluates Average over 10.0 s, the plan's threshold is in Maximum "
            "over 10 s units",
        ),
        (
            _set("alarm.period", 60.0),
            "scale-in alarm evaluates Maximum over 60.0 s",
        ),
        (_set("alarm.statistic", UNKNOWN_STRING_VALUE), "statistic is unknown at preview"),
        (
            _set("model.primaryContainer.environment", {}),
            "MAX_QUEUE_DEPTH None != the plan's queue bound 50",
        ),
        (
            _set("target.maxCapacity", 280.0),
            "maxCapacity 280.0 != the plan's, clamped into the operator bounds (20)",
        ),
        (
            _set("target.tags.tts-bench:plan-id", "000000000000"),
            "the matching plan is d0b4a6baef69",
        ),
        (
            _set("model.primaryContainer.image", f"{REGISTRY_REPO}@{OTHER_DIGEST}"),
            "missing plan: no plan for this image",
        ),
        (
            _set("config.productionVariants.0.instanceType", "ml.g6.xlarge"),
            "missing plan: no plan in",
        ),
        (
            _set("model.primaryContainer.image", f"{REGISTRY_REPO}:latest"),
            "missing plan: its Model needs",
        ),
        (_set("endpoint.name", "another"), "missing plan: no SageMaker endpoint named speech"),
        (
            _set(
                "tracking.targetTrackingScalingPolicyConfiguration.targetValue",
                UNKNOWN_NUMBER_VALUE,
            ),
            "targetValue is unknown at preview",
        ),
        (_set("target.resourceId", UNKNOWN_STRING_VALUE), ".resourceId is unknown at preview"),
    ],
)
def test_scaling_needs_the_measured_plan(change: Any, expected: str | None) -> None:
    violations = validate(scaling_plan.POLICY, deployment(change).args())
    if expected is None:
        assert violations == []
    else:
        assert any(expected in v for v in violations), violations


def _package(props: dict[str, dict[str, Any]]) -> None:
    """The deployment with the committed Kokoro plan, but a model package in place of its image."""
    props["model"]["primaryContainer"] = {"modelPackageName": PACKAGE, "environment": {}}
    props["model"]["enableNetworkIsolation"] = True
    props["model"]["tags"] = {"tts-bench:model": "kokoro-82m", "tts-bench:model-package": PACKAGE}
    del props["target"]["tags"]["tts-bench:image-digest"]
    props["target"]["tags"]["tts-bench:model-package"] = PACKAGE


def test_an_image_plan_never_gates_a_model_package() -> None:
    """Issue 39: the pack matches a package stack by its versioned ARN; the committed plan,
    measured on an image of the same model and instance type, does not gate it."""
    violations = validate(scaling_plan.POLICY, deployment(_package).args())
    assert any(
        "missing plan: no plan for this model package" in v and PACKAGE in v for v in violations
    ), violations


def test_an_infeasible_plan_is_refused(
    infeasible_plan: PlanArtifact, plans_dir: Callable[..., Path]
) -> None:
    config = {"plansDir": str(plans_dir(infeasible_plan))}
    violations = validate(scaling_plan.POLICY, deployment().args(config))
    assert any("missing plan" in v and "is infeasible" in v for v in violations), violations


def test_a_plan_whose_target_is_in_other_units_is_refused(
    make_plan: Callable[..., PlanArtifact], plans_dir: Callable[..., Path]
) -> None:
    """Target tracking evaluates the 10 s Maximum: a target in 60 s Average units is a number in
    the wrong units, however well it matches the deployed value."""
    units = {"statistic": "Average", "period_s": 60, "cw_ratio": 1.0, "ratio_rule": "ladder-rung"}
    plan = make_plan(target_units=units)
    # Its sources give other units, so the gate's custody refuses it first, naming the field;
    config = {"plansDir": str(plans_dir(plan))}
    violations = validate(scaling_plan.POLICY, deployment().args(config))
    assert any(
        'does not follow from its sources: target_units.statistic is "Average"' in v
        for v in violations
    ), violations
    # and the pack's own check of the deployed metric refuses such a plan as well.
    tracking = plan.deploy.policies[0]  # type: ignore[union-attr]
    deployed = Stack().add(
        "aws:appautoscaling/policy:Policy", "tracking", copy.deepcopy(DEPLOYMENT["tracking"])
    )
    problems = scaling_plan._tracking_problems(plan, tracking, deployed)  # type: ignore[arg-type]
    assert any(
        "the plan's target is in Average (60 s) units" in p and "Maximum (10 s)" in p
        for p in problems
    ), problems


FLEET_PLAN = (
    Path(__file__).resolve().parents[2]
    / "measurements"
    / ("plan-kokoro-82m-fleet-g5xlarge-8b1b96bc.json")
)


def _fleet(props: dict[str, dict[str, Any]]) -> None:
    """The stack as the program builds it for the reference fleet plan, from its deploy shape."""
    from tts_bench.artifacts.files import load_artifact

    plan = load_artifact(FLEET_PLAN, PlanArtifact)
    tracking, scale_in, burst = plan.deploy.policies  # type: ignore[union-attr]
    props["target"]["tags"].update(
        {"tts-bench:plan-id": plan.plan_id, "tts-bench:plan-rule": "fleet"}
    )
    props["tracking"] |= {
        "name": "speech-AllTraffic-invocations-target",
        "targetTrackingScalingPolicyConfiguration": {
            "targetValue": tracking.target_value,
            "scaleOutCooldown": float(tracking.scale_out_cooldown_s),
            "scaleInCooldown": float(tracking.scale_in_cooldown_s or 0),
            "disableScaleIn": False,
            "predefinedMetricSpecification": {"predefinedMetricType": tracking.predefined_metric},
        },
    }
    props["step"] |= {
        "name": "speech-AllTraffic-burst",
        "stepScalingPolicyConfiguration": {
            "adjustmentType": "PercentChangeInCapacity",
            "cooldown": float(burst.cooldown_s),
            "metricAggregationType": "Maximum",
            "minAdjustmentMagnitude": float(burst.min_adjustment_magnitude or 0),
            "stepAdjustments": [
                {
                    "metricIntervalLowerBound": f"{step.lower:.15g}",
                    **(
                        {}
                        if step.upper is None
                        else {"metricIntervalUpperBound": f"{step.upper:.15g}"}
                    ),
                    "scalingAdjustment": float(step.adjustment),
                }
                for step in burst.steps
            ],
        },
    }
    props["alarm"] = {
        "name": "speech-AllTraffic-burst-concurrency",
        "metricName": "ConcurrentRequestsPerModel",
        "threshold": burst.alarm.threshold,
        "statistic": "Maximum",
        "period": 10.0,
        "evaluationPeriods": 1.0,
        "comparisonOperator": "GreaterThanOrEqualToThreshold",
        "treatMissingData": "missing",
    }
    props["scale_in"] = {
        "name": "speech-AllTraffic-scale-in",
        "serviceNamespace": "sagemaker",
        "resourceId": RID,
        "policyType": "StepScaling",
        "stepScalingPolicyConfiguration": {
            "adjustmentType": "PercentChangeInCapacity",
            "cooldown": float(scale_in.cooldown_s),
            "metricAggregationType": "Average",
            "stepAdjustments": [
                {
                    **(
                        {}
                        if step.lower is None
                        else {"metricIntervalLowerBound": f"{step.lower:.15g}"}
                    ),
                    "metricIntervalUpperBound": f"{step.upper:.15g}",
                    "scalingAdjustment": float(step.adjustment),
                }
                for step in scale_in.steps
            ],
        },
    }
    alarm = scale_in.alarm
    math = metric_math.of(alarm.after_one_less)
    queries = metric_math.queries(math, alarm.threshold, "speech", "AllTraffic", alarm.period_s)
    props["scale_in_alarm"] = {
        "name": "speech-AllTraffic-low-concurrency",
        "metricQueries": _pulumi_queries(queries),
        "threshold": alarm.threshold,
        "evaluationPeriods": 3.0,
        "comparisonOperator": "LessThanThreshold",
        "treatMissingData": "missing",
    }


def _pulumi_queries(metrics: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """PutMetricAlarm's `Metrics` as the provider holds `metricQueries` (camelCase, dimensions a
    map, numbers as floats), the inverse of `deployment.metric_queries_from_pulumi`."""
    queries = []
    for q in metrics:
        query = {"id": q["Id"], "returnData": q["ReturnData"]}
        query |= {"expression": q["Expression"], "label": q["Label"]} if "Expression" in q else {}
        if "MetricStat" in q:
            stat = q["MetricStat"]
            query["metric"] = {
                "namespace": stat["Metric"]["Namespace"],
                "metricName": stat["Metric"]["MetricName"],
                "dimensions": {d["Name"]: d["Value"] for d in stat["Metric"]["Dimensions"]},
                "period": float(stat["Period"]),
                "stat": stat["Stat"],
            }
        queries.append(query)
    assert metric_queries_from_pulumi(queries) == metrics  # the two spellings agree
    return queries


def _then(*changes: Callable[[dict[str, dict[str, Any]]], None]) -> Callable[..., None]:
    def change(props: dict[str, dict[str, Any]]) -> None:
        for c in changes:
            c(props)

    return change


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (None, None),
        (
            _set(
                "tracking.targetTrackingScalingPolicyConfiguration.predefinedMetricSpecification",
                {
                    "predefinedMetricType": "SageMakerVariantConcurrentRequestsPerModelHighResolution"
                },
            ),
            "target tracking metric SageMakerVariantConcurrentRequestsPerModelHighResolution",
        ),
        (
            _set("tracking.targetTrackingScalingPolicyConfiguration.disableScaleIn", True),
            "target tracking must scale in (the plan's own scale-in is part of it)",
        ),
        (
            _set("tracking.targetTrackingScalingPolicyConfiguration.scaleInCooldown", 60.0),
            "target tracking's scale-in cooldown 60.0 != the plan's 300",
        ),
        (_set("scale_in.name", "speech-AllTraffic-other"), "no step scale-in policy"),
        (
            _set("scale_in.stepScalingPolicyConfiguration.cooldown", 60.0),
            "scale-in cooldown 60.0 != the plan's 300",
        ),
        (
            _set("scale_in_alarm.evaluationPeriods", 1.0),
            "scale-in alarm evaluationPeriods 1.0 != the plan's 3",
        ),
        (
            _set("scale_in_alarm.threshold", 700.0),
            "scale-in alarm threshold 700.0 != the plan's 826.54426446",
        ),
        # The expression hand-edited: another min fleet, another threshold inside it (what a
        # small fleet reads), another period, another variant.
        (
            _edit_query(3, "expression", "n >= 20", "n >= 10"),
            "scale-in alarm's metric queries (IF(n >= 10, m1 / (n - 1), 826.54426446), 60 s, on "
            "speech/AllTraffic) != the plan's (IF(n >= 20, m1 / (n - 1), 826.54426446), 60 s, on "
            "speech/AllTraffic)",
        ),
        (
            _edit_query(3, "expression", "826.54426446)", "1000.0)"),
            "scale-in alarm's metric queries (IF(n >= 20, m1 / (n - 1), 1000.0)",
        ),
        (
            _then(
                *(_set(f"scale_in_alarm.metricQueries.{i}.metric.period", 300.0) for i in (0, 1))
            ),
            "scale-in alarm's metric queries (IF(n >= 20, m1 / (n - 1), 826.54426446), 300 s, on "
            "speech/AllTraffic) != the plan's",
        ),
        (
            _then(
                *(
                    _set(f"scale_in_alarm.metricQueries.{i}.metric.dimensions.VariantName", "B")
                    for i in (0, 1)
                )
            ),
            "60 s, on speech/B) != the plan's",
        ),
        (
            _edit_query(3, "expression", "m1 / (n - 1)", "m2 / (n - 1)"),
            "scale-in alarm's metric queries are not the fleet-aware expression (returned "
            "'IF(n >= 20, m2 / (n - 1)",
        ),
        (
            _set("scale_in_alarm.metricQueries.1.metric.stat", "Average"),
            "scale-in alarm's metric queries are not the fleet-aware expression",
        ),
        (
            _set("scale_in_alarm.metricQueries.2.returnData", True),
            "scale-in alarm's metric queries are not the fleet-aware expression",
        ),
        # A plain alarm where the plan has the fleet-aware one.
        (
            _then(
                _set("scale_in_alarm.metricQueries", None),
                _set("scale_in_alarm.metricName", "InvocationsPerInstance"),
                _set("scale_in_alarm.statistic", "Sum"),
                _set("scale_in_alarm.period", 60.0),
            ),
            "scale-in alarm reads InvocationsPerInstance alone, the plan's is the metric-math "
            "expression IF(n >= 20, m1 / (n - 1), 826.54426446)",
        ),
        (
            _set("scale_in_alarm.metricQueries.3.expression", UNKNOWN_STRING_VALUE),
            ".metricQueries.3.expression is unknown at preview",
        ),
        (_set("alarm.threshold", 5.0), "burst alarm threshold 5.0"),
        (
            _set("step.stepScalingPolicyConfiguration.minAdjustmentMagnitude", 1.0),
            "burst minAdjustmentMagnitude 1.0 != the plan's 3",
        ),
        (_set("alarm.period", 60.0), "burst alarm evaluates Maximum over 60.0 s"),
        (
            _set("step.stepScalingPolicyConfiguration.adjustmentType", "ChangeInCapacity"),
            "burst adjustmentType ChangeInCapacity != the plan's PercentChangeInCapacity",
        ),
        (
            _set("step.stepScalingPolicyConfiguration.minAdjustmentMagnitude", None),
            "burst minAdjustmentMagnitude None != the plan's 3",
        ),
    ],
)
def test_the_fleet_rules_constructs_are_checked(change: Any, expected: str | None) -> None:
    stack = deployment(_then(_fleet, change) if change else _fleet)
    violations = validate(scaling_plan.POLICY, stack.args())
    if expected is None:
        assert violations == []
    else:
        assert any(expected in v for v in violations), violations


@pytest.mark.parametrize(
    ("image", "expected"),
    [
        (f"{REGISTRY_REPO}@{REFERENCE_DIGEST}", "never gates a stack whose image is not a local"),
        (local_image_reference(REFERENCE_DIGEST), None),
    ],
)
def test_an_emulated_plan_gates_only_a_local_image(
    image: str,
    expected: str | None,
    emulated_plan: PlanArtifact,
    plans_dir: Callable[..., Path],
) -> None:
    config = {"plansDir": str(plans_dir(emulated_plan))}

    def deployed_as(props: dict[str, dict[str, Any]]) -> None:
        _set("model.primaryContainer.image", image)(props)
        _set("target.tags.tts-bench:plan-id", emulated_plan.plan_id)(props)

    stack = deployment(deployed_as)
    violations = validate(scaling_plan.POLICY, stack.args(config))
    if expected is None:
        assert violations == []
    else:
        assert any("missing plan" in v and expected in v for v in violations), violations


def test_plans_folder_comes_from_config_relative_to_the_pack(tmp_path: Path) -> None:
    assert scaling_plan.plans_dir(None) == (Path(scaling_plan.__file__).parents[2] / "measurements")
    assert scaling_plan.plans_dir({"plansDir": str(tmp_path)}) == tmp_path
    violations = validate(scaling_plan.POLICY, deployment().args({"plansDir": str(tmp_path)}))
    assert any("missing plan: no plan in" in v for v in violations), violations


def test_a_scaling_policy_without_a_planned_target_is_refused() -> None:
    stack = Stack()
    stack.add("aws:appautoscaling/policy:Policy", "guess", DEPLOYMENT["tracking"])
    violations = validate(scaling_plan.POLICY, stack.args())
    assert violations and "missing plan" in violations[0]


def test_a_target_without_endpoint_or_model_is_refused() -> None:
    stack = Stack()
    stack.add("aws:appautoscaling/target:Target", "target", DEPLOYMENT["target"])
    violations = validate(scaling_plan.POLICY, stack.args())
    assert violations and "missing plan: no SageMaker endpoint named speech" in violations[0]


# --------------------------------------------------------------------------- images

PACKAGE = "arn:aws:sagemaker:us-east-1:865070037744:model-package/sonic-3-standin/2"


@pytest.mark.parametrize(
    ("props", "expected"),
    [
        ({"primaryContainer": {"image": f"{REGISTRY_REPO}@{REFERENCE_DIGEST}"}}, None),
        ({"containers": [{"image": f"{REGISTRY_REPO}@{REFERENCE_DIGEST}"}]}, None),
        ({"primaryContainer": {"image": f"{REGISTRY_REPO}:latest"}}, "is not pinned by digest"),
        ({"containers": [{"image": f"{REGISTRY_REPO}"}]}, "containers.0.image"),
        ({"primaryContainer": {"image": UNKNOWN_STRING_VALUE}}, "image is unknown at preview"),
        (
            {"primaryContainer": {"modelPackageName": PACKAGE}, "enableNetworkIsolation": True},
            None,
        ),
        (
            {"primaryContainer": {"modelPackageName": PACKAGE}},
            f"model package {PACKAGE} needs enableNetworkIsolation: true",
        ),
    ],
)
def test_images_are_pinned_by_digest(props: dict[str, Any], expected: str | None) -> None:
    violations = validate(images.POLICY, resource_args("aws:sagemaker/model:Model", props))
    assert (violations == []) if expected is None else any(expected in v for v in violations), (
        violations
    )


def test_image_rule_ignores_other_resources() -> None:
    assert (
        validate(images.POLICY, resource_args("aws:s3/bucket:Bucket", {"image": "x:latest"})) == []
    )


# --------------------------------------------------------------------------- buckets

BLOCK_ALL = dict.fromkeys(buckets.PUBLIC_ACCESS_FLAGS, True)
KMS = {"rules": [{"applyServerSideEncryptionByDefault": {"sseAlgorithm": "aws:kms"}}]}


def bucket_stack(
    encryption: dict[str, Any] | None, block: dict[str, Any] | None, by_name: bool = False
) -> Stack:
    stack = Stack()
    bucket = stack.add("aws:s3/bucket:Bucket", "weights", {"bucket": "weights"})
    link = {} if by_name else {"bucket": bucket}
    if encryption is not None:
        props = {**encryption, "bucket": "weights" if by_name else UNKNOWN_STRING_VALUE}
        stack.add(buckets.S3_ENCRYPTION, "enc", props, **link)
    if block is not None:
        props = {**block, "bucket": "weights" if by_name else UNKNOWN_STRING_VALUE}
        stack.add(buckets.S3_PUBLIC_ACCESS_BLOCK, "pab", props, **link)
    return stack


@pytest.mark.parametrize(
    ("stack", "policy", "expected"),
    [
        (bucket_stack(KMS, BLOCK_ALL), buckets.ENCRYPTION_POLICY, None),
        (bucket_stack(KMS, BLOCK_ALL, by_name=True), buckets.PUBLIC_ACCESS_POLICY, None),
        (
            bucket_stack(None, BLOCK_ALL),
            buckets.ENCRYPTION_POLICY,
            "has no BucketServerSideEncryptionConfiguration",
        ),
        (
            bucket_stack({"rules": []}, BLOCK_ALL),
            buckets.ENCRYPTION_POLICY,
            "sets no default algorithm",
        ),
        (bucket_stack(KMS, None), buckets.PUBLIC_ACCESS_POLICY, "has no BucketPublicAccessBlock"),
        (
            bucket_stack(KMS, {**BLOCK_ALL, "ignorePublicAcls": False}),
            buckets.PUBLIC_ACCESS_POLICY,
            "leaves ignorePublicAcls off",
        ),
        (
            bucket_stack(KMS, {**BLOCK_ALL, "blockPublicPolicy": UNKNOWN_STRING_VALUE}),
            buckets.PUBLIC_ACCESS_POLICY,
            "blockPublicPolicy is unknown at preview",
        ),
    ],
)
def test_buckets_are_encrypted_and_private(stack: Stack, policy: Any, expected: str | None) -> None:
    violations = validate(policy, stack.args())
    assert (violations == []) if expected is None else any(expected in v for v in violations), (
        violations
    )


# --------------------------------------------------------------------------- IAM


def doc(*statements: dict[str, Any]) -> str:
    return json.dumps({"Version": "2012-10-17", "Statement": list(statements)})


SCOPED = {"Effect": "Allow", "Action": ["s3:GetObject"], "Resource": ["arn:aws:s3:::weights/*"]}
TOKEN = {"Effect": "Allow", "Action": "ecr:GetAuthorizationToken", "Resource": "*"}
ASSUME = {
    "Effect": "Allow",
    "Principal": {"Service": "sagemaker.amazonaws.com"},
    "Action": "sts:AssumeRole",
}


@pytest.mark.parametrize(
    ("type_", "props", "policy", "expected"),
    [
        (
            "aws:iam/rolePolicy:RolePolicy",
            {"policy": doc(SCOPED, TOKEN)},
            iam.NO_WILDCARD_ACTIONS,
            None,
        ),
        (
            "aws:iam/rolePolicy:RolePolicy",
            {"policy": doc(SCOPED, TOKEN)},
            iam.RESOURCE_STAR_ONLY_UNSCOPABLE,
            None,
        ),
        (
            "aws:iam/role:Role",
            {"assumeRolePolicy": doc(ASSUME)},
            iam.RESOURCE_STAR_ONLY_UNSCOPABLE,
            None,
        ),
        (
            "aws:iam/policy:Policy",
            {"policy": doc({**SCOPED, "Action": "s3:*"})},
            iam.NO_WILDCARD_ACTIONS,
            "action 's3:*' is a wildcard",
        ),
        (
            "aws:iam/rolePolicy:RolePolicy",
            {"policy": doc({**SCOPED, "Action": "*"})},
            iam.NO_WILDCARD_ACTIONS,
            "action '*' is a wildcard",
        ),
        (
            "aws:iam/role:Role",
            {
                "inlinePolicies": [
                    {"policy": doc({"Effect": "Allow", "NotAction": "iam:*", "Resource": "*"})}
                ]
            },
            iam.NO_WILDCARD_ACTIONS,
            "NotAction",
        ),
        (
            "aws:iam/rolePolicy:RolePolicy",
            {"policy": doc({**SCOPED, "Resource": "*"})},
            iam.RESOURCE_STAR_ONLY_UNSCOPABLE,
            "can be scoped: s3:GetObject",
        ),
        (
            "aws:iam/rolePolicy:RolePolicy",
            {"policy": "{not json"},
            iam.NO_WILDCARD_ACTIONS,
            "policy: not JSON",
        ),
        (
            "aws:iam/rolePolicy:RolePolicy",
            {"policy": UNKNOWN_STRING_VALUE},
            iam.NO_WILDCARD_ACTIONS,
            ".policy is unknown at preview",
        ),
    ],
)
def test_iam_least_privilege(
    type_: str, props: dict[str, Any], policy: Any, expected: str | None
) -> None:
    violations = validate(policy, resource_args(type_, props))
    assert (violations == []) if expected is None else any(expected in v for v in violations), (
        violations
    )


def test_the_pack_lists_every_rule_once_with_a_kebab_case_name() -> None:
    names = [p.name for p in POLICIES]
    assert len(names) == len(set(names)) == 6
    assert all(n == n.lower() and " " not in n for n in names)


SCHEDULED_ACTION = "aws:appautoscaling/scheduledAction:ScheduledAction"


def _scheduled_stack(
    plan: PlanArtifact, actions: list[dict[str, Any]] | None = None, plan_id: str | None = None
) -> Stack:
    """The fleet stack for `plan` (its id on the target) with `actions` as scheduled actions,
    by default those the program deploys for it."""
    from tts_bench.deployment import OperatorBounds
    from tts_bench.planning.deploy import scheduled_actions_of

    stack = deployment(
        _then(_fleet, _set("target.tags.tts-bench:plan-id", plan_id or plan.plan_id))
    )
    if actions is None:
        bounds = OperatorBounds(min_instances=1, max_instances=20)
        actions = [
            {
                "name": a.name,
                "serviceNamespace": "sagemaker",
                "scalableDimension": "sagemaker:variant:DesiredInstanceCount",
                "resourceId": RID,
                "schedule": a.schedule,
                "timezone": a.timezone,
                "scalableTargetAction": {
                    "minCapacity": float(a.min_capacity or 0),
                    "maxCapacity": float(a.max_capacity or 0),
                },
            }
            for a in scheduled_actions_of(plan, bounds, "speech")
        ]
    for index, props in enumerate(actions):
        stack.add(SCHEDULED_ACTION, f"schedule-{index}", props)
    return stack


def _edited(index: int, path: str, value: Any) -> Callable[[list[dict[str, Any]]], None]:
    def change(actions: list[dict[str, Any]]) -> None:
        _set(path, value)({"a": actions[index]})  # type: ignore[dict-item]

    return change


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (None, None),
        (
            _edited(1, "a.scalableTargetAction.minCapacity", 12.0),
            "scheduled action speech-AllTraffic-schedule-0021 minCapacity 12.0 != the plan's, "
            "clamped into the operator bounds (20)",
        ),
        (
            _edited(1, "a.schedule", "cron(30 0 * * ? *)"),
            "schedule-0021 schedule cron(30 0 * * ? *) != the plan's cron(21 0 * * ? *)",
        ),
        (_edited(2, "a.timezone", "Europe/Paris"), "timezone Europe/Paris != the plan's Etc/UTC"),
        (_edited(0, "a.endTime", "2027-01-01T00:00:00Z"), "schedule-0000 endTime 2027-01-01"),
        (lambda a: a.pop(2), "no scheduled action speech-AllTraffic-schedule-0139"),
        (
            _edited(2, "a.name", "speech-AllTraffic-schedule-2300"),
            "scheduled action speech-AllTraffic-schedule-2300 is not in the plan",
        ),
    ],
    ids=["as-planned", "min", "time", "zone", "end", "missing", "extra"],
)
def test_scheduled_actions_are_the_plans_schedule(
    change: Any,
    expected: str | None,
    scheduled_fleet_plan: PlanArtifact,
    plans_dir: Callable[..., Path],
) -> None:
    config = {"plansDir": str(plans_dir(scheduled_fleet_plan))}
    planned = _scheduled_stack(scheduled_fleet_plan).resources
    actions = [dict(copy.deepcopy(r.props)) for r in planned if r.resource_type == SCHEDULED_ACTION]
    assert len(actions) == 3
    if change:
        change(actions)
    violations = validate(
        scaling_plan.POLICY, _scheduled_stack(scheduled_fleet_plan, actions).args(config)
    )
    if expected is None:
        assert violations == []
    else:
        assert any(expected in v for v in violations), violations


def test_a_4_hourly_schedule_is_its_crons_listing_every_recurrence(
    four_hourly_plan: PlanArtifact, plans_dir: Callable[..., Path]
) -> None:
    config = {"plansDir": str(plans_dir(four_hourly_plan))}
    planned = _scheduled_stack(four_hourly_plan).resources
    actions = [dict(copy.deepcopy(r.props)) for r in planned if r.resource_type == SCHEDULED_ACTION]
    assert [a["schedule"] for a in actions] == [
        "cron(0 0,4,8,12,16,20 * * ? *)",
        "cron(21 0,4,8,12,16,20 * * ? *)",
        "cron(39 1,5,9,13,17,21 * * ? *)",
    ]
    assert validate(scaling_plan.POLICY, _scheduled_stack(four_hourly_plan).args(config)) == []
    # Deployed daily, as a schedule of one period would have been before periods, it is refused.
    actions[1]["schedule"] = "cron(21 0 * * ? *)"
    violations = validate(
        scaling_plan.POLICY, _scheduled_stack(four_hourly_plan, actions).args(config)
    )
    assert any(
        "schedule-0021 schedule cron(21 0 * * ? *) != the plan's cron(21 0,4,8,12,16,20" in v
        for v in violations
    ), violations


def test_a_weekly_schedule_is_its_crons_naming_the_day(
    reference_plan_path: Path, plans_dir: Callable[..., Path]
) -> None:
    from tts_bench.artifacts.files import load_artifact
    from tts_bench.planning.schedule.attach import with_schedule

    fleet = load_artifact(
        reference_plan_path.parent / "plan-kokoro-82m-fleet-g5xlarge-8b1b96bc.json", PlanArtifact
    )
    day = [10.0] * 60 + [300.0] * 20 + [10.0] * 1360
    plan = with_schedule(fleet, "a week", day * 5 + [10.0] * 2880, period_s=7 * 86_400)
    config = {"plansDir": str(plans_dir(plan))}
    stack = _scheduled_stack(plan)
    actions = [dict(r.props) for r in stack.resources if r.resource_type == SCHEDULED_ACTION]
    assert [a["schedule"] for a in actions][:3] == [
        "cron(0 0 ? * MON *)",
        "cron(21 0 ? * MON *)",
        "cron(39 1 ? * MON *)",
    ]
    assert validate(scaling_plan.POLICY, stack.args(config)) == []


def test_a_plan_without_a_schedule_refuses_a_scheduled_action(
    scheduled_fleet_plan: PlanArtifact,
) -> None:
    """The committed fleet plan has no schedule: the scheduled plan's actions on its stack are
    refused, each by name."""
    from tts_bench.artifacts.files import load_artifact

    plain = load_artifact(FLEET_PLAN, PlanArtifact)
    scheduled = _scheduled_stack(scheduled_fleet_plan).resources
    actions = [dict(r.props) for r in scheduled if r.resource_type == SCHEDULED_ACTION]
    violations = validate(scaling_plan.POLICY, _scheduled_stack(plain, actions).args())
    assert sorted(v for v in violations if "scheduled action" in v) == [
        f"{RID}: scheduled action speech-AllTraffic-schedule-{hhmm} is not in the plan (the "
        f"plan has no schedule) (plan {plain.plan_id}, {FLEET_PLAN.name})"
        for hhmm in ("0000", "0021", "0139")
    ], violations
    assert validate(scaling_plan.POLICY, _scheduled_stack(plain).args()) == []


def test_a_scheduled_action_without_a_planned_target_is_refused() -> None:
    stack = Stack()
    stack.add(
        SCHEDULED_ACTION,
        "lone",
        {"serviceNamespace": "sagemaker", "resourceId": RID, "schedule": "cron(0 6 * * ? *)"},
    )
    violations = validate(scaling_plan.POLICY, stack.args())
    assert any("scheduled action lone on" in v and "missing plan" in v for v in violations)


def test_a_hand_edited_schedule_is_refused_by_the_pack(
    scheduled_fleet_plan: PlanArtifact, plans_dir: Callable[..., Path]
) -> None:
    """A plan whose step was edited (and the stack deployed from the edit) does not follow from
    its recorded day: the gate's custody refuses it, naming the field."""
    data = scheduled_fleet_plan.model_dump(mode="json")
    data["schedule"]["steps"][1]["min_capacity"] = 15
    edited = PlanArtifact.model_validate(data)
    config = {"plansDir": str(plans_dir(edited))}
    violations = validate(scaling_plan.POLICY, _scheduled_stack(edited).args(config))
    assert any("missing plan" in v and "schedule.steps[1].min_capacity" in v for v in violations), (
        violations
    )
