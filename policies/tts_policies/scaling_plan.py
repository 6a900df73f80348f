"""The measured-plan rule: SageMaker scaling resources exist only as a feasible plan says.

For each SageMaker scalable target in the stack, the rule finds the variant's Model (through
the endpoint and its configuration), reads the image digest, the model id tag and the instance
type from literals, applies the same gate as the program (`tts_bench.planning.gate`) to the plans
folder, and compares every deployed number with the plan's.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pulumi_policy import (
    EnforcementLevel,
    PolicyConfigSchema,
    PolicyResource,
    ReportViolation,
    StackValidationArgs,
    StackValidationPolicy,
)

from tts_bench.artifacts.schema import PlanArtifact
from tts_bench.deployment import (
    SCALABLE_DIMENSION,
    SERVICE_NAMESPACE,
    TAG_IMAGE_DIGEST,
    TAG_MAX_BOUND,
    TAG_MIN_BOUND,
    TAG_MODEL,
    TAG_PLAN_ID,
    TARGET_TRACKING_METRIC,
    TARGET_TRACKING_PERIOD_S,
    TARGET_TRACKING_STATISTIC,
    OperatorBounds,
    first_chunk_alarm_name,
    is_local_image,
    parse_resource_id,
    scale_in_alarm_name,
)
from tts_bench.planning.gate import GateQuery, evaluate, performance_env_of
from tts_bench.telemetry import ENV_MAX_QUEUE_DEPTH
from tts_policies.preview_values import read, unknowns_reported
from tts_policies.resource_types import (
    METRIC_ALARM,
    SAGEMAKER_ENDPOINT,
    SAGEMAKER_ENDPOINT_CONFIG,
    SAGEMAKER_MODEL,
    SCALABLE_TARGET,
    SCALING_POLICY,
)

NAME = "sagemaker-scaling-requires-measured-plan"
PACK_DIR = Path(__file__).resolve().parents[1]
DEFAULT_PLANS_DIR = "../measurements"  # relative to the pack


def plans_dir(config: Any) -> Path:
    """The plans folder from the policy's config (`plansDir`), relative paths against the pack."""
    folder = Path(str((config or {}).get("plansDir") or DEFAULT_PLANS_DIR))
    return folder if folder.is_absolute() else (PACK_DIR / folder).resolve()


def _same(a: Any, b: float) -> bool:
    return (
        isinstance(a, int | float) and not isinstance(a, bool) and math.isclose(a, b, abs_tol=1e-9)
    )


def _by_type(resources: Sequence[PolicyResource], type_: str) -> list[PolicyResource]:
    return [r for r in resources if r.resource_type == type_]


def _depends(resource: PolicyResource, prop: str, type_: str) -> list[PolicyResource]:
    return [d for d in resource.property_dependencies.get(prop, []) if d.resource_type == type_]


def _variant_model(
    resources: Sequence[PolicyResource], endpoint: str, variant: str
) -> tuple[PolicyResource | None, dict[str, Any] | None, str]:
    """(Model, production variant, why not) of `endpoint`/`variant`, followed through the
    endpoint's and the configuration's property dependencies."""
    endpoints = [
        e
        for e in _by_type(resources, SAGEMAKER_ENDPOINT)
        if read(e.props, "name", default=None) == endpoint
    ]
    if not endpoints:
        return None, None, f"no SageMaker endpoint named {endpoint} in this stack"
    configs = _depends(endpoints[0], "endpointConfigName", SAGEMAKER_ENDPOINT_CONFIG)
    if not configs:
        return None, None, f"endpoint {endpoint}'s configuration is not a resource of this stack"
    entries = read(configs[0].props, "productionVariants", default=[], deep=False)
    index = next(
        (
            i
            for i in range(len(entries))
            if read(entries, i, "variantName", default=None) == variant
        ),
        None,
    )
    if index is None:
        return None, None, f"endpoint {endpoint} has no variant {variant}"
    entry = {"instanceType": read(entries, index, "instanceType", default="")}
    models = _depends(configs[0], "productionVariants", SAGEMAKER_MODEL)
    if len(models) != 1:
        return None, entry, f"endpoint {endpoint} does not serve exactly one Model of this stack"
    return models[0], entry, ""


def _check_target(
    target: PolicyResource,
    resources: Sequence[PolicyResource],
    folder: Path,
    report: Callable[[str], None],
) -> None:
    rid = read(target.props, "resourceId")
    parsed = parse_resource_id(rid)
    if (
        parsed is None
        or read(target.props, "scalableDimension", default=None) != SCALABLE_DIMENSION
    ):
        report(f"scalable target {rid}: not a SageMaker variant's DesiredInstanceCount")
        return
    endpoint, variant = parsed
    tags = read(target.props, "tags", default={})
    model, entry, why = _variant_model(resources, endpoint, variant)
    if model is None or entry is None:
        report(f"{rid}: missing plan: {why}, so no measured plan can be matched to its image")
        return
    image = read(model.props, "primaryContainer", "image", default="")
    digest = image.partition("@")[2]
    model_tags = read(model.props, "tags", default={})
    model_id = model_tags.get(TAG_MODEL)
    try:
        bounds = OperatorBounds(
            min_instances=int(tags[TAG_MIN_BOUND]), max_instances=int(tags[TAG_MAX_BOUND])
        )
    except (KeyError, ValueError):
        report(f"{rid}: missing plan: the target lacks valid {TAG_MIN_BOUND}/{TAG_MAX_BOUND} tags")
        return
    if not model_id or not digest.startswith("sha256:"):
        report(
            f"{rid}: missing plan: its Model needs a {TAG_MODEL} tag and an image pinned by digest "
            f"(image {image or '(none)'})"
        )
        return
    env = read(model.props, "primaryContainer", "environment", default={})
    try:
        query = GateQuery(
            model=model_id,
            instance_type=read(entry, "instanceType", default=""),
            image_digest=digest,
            image_is_local=is_local_image(image),
            performance_env=performance_env_of(dict(env)),
            bounds=bounds,
        )
    except ValueError as exc:
        report(f"{rid}: missing plan: cannot form the plan query ({exc})")
        return
    gate = evaluate(folder, query)
    if not gate.enabled or gate.plan is None:
        report(f"{rid}: missing plan: {gate.reason}")
        return
    plan: PlanArtifact = gate.plan
    problems = _compare(
        plan,
        gate.deployed_min,
        gate.deployed_max,
        target,
        model,
        resources,
        endpoint,
        variant,
        rid,
        digest,
    )
    for problem in problems:
        report(f"{rid}: {problem} (plan {plan.plan_id}, {Path(gate.plan_path or '').name})")


def _compare(
    plan: PlanArtifact,
    deployed_min: int | None,
    deployed_max: int | None,
    target: PolicyResource,
    model: PolicyResource,
    resources: Sequence[PolicyResource],
    endpoint: str,
    variant: str,
    rid: str,
    digest: str,
) -> list[str]:
    problems: list[str] = []
    tags = read(target.props, "tags", default={})
    if tags.get(TAG_PLAN_ID) != plan.plan_id:
        problems.append(
            f"target tag {TAG_PLAN_ID} is {tags.get(TAG_PLAN_ID)!r}, the matching plan is {plan.plan_id}"
        )
    if tags.get(TAG_IMAGE_DIGEST) != digest:
        problems.append(
            f"target tag {TAG_IMAGE_DIGEST} is {tags.get(TAG_IMAGE_DIGEST)!r}, the model image is {digest}"
        )
    for prop, want in (("minCapacity", deployed_min), ("maxCapacity", deployed_max)):
        got = read(target.props, prop, default=None)
        if want is None or not _same(got, want):
            problems.append(
                f"{prop} {got} != the plan's, clamped into the operator bounds ({want})"
            )
    policies = [
        p
        for p in _by_type(resources, SCALING_POLICY)
        if read(p.props, "resourceId", default=None) == rid
    ]
    tracking = [
        p for p in policies if read(p.props, "policyType", default="") == "TargetTrackingScaling"
    ]
    steps = [p for p in policies if read(p.props, "policyType", default="") == "StepScaling"]
    if not tracking:
        problems.append("no target-tracking policy")
    for policy in tracking:
        cfg = read(policy.props, "targetTrackingScalingPolicyConfiguration", default={})
        value = read(cfg, "targetValue", default=None)
        if not _same(value, plan.scaling_target_value):
            problems.append(f"target value {value} != the plan's {plan.scaling_target_value}")
        cooldown = read(cfg, "scaleOutCooldown", default=None)
        if not _same(cooldown, plan.scale_out_cooldown_s):
            problems.append(
                f"scale-out cooldown {cooldown} != the plan's {plan.scale_out_cooldown_s}"
            )
        if read(cfg, "disableScaleIn", default=False) is not True:
            problems.append("target tracking must not scale in (the step policy does)")
        metric = read(cfg, "predefinedMetricSpecification", "predefinedMetricType", default=None)
        if metric != TARGET_TRACKING_METRIC:
            problems.append(f"target tracking metric {metric} != {TARGET_TRACKING_METRIC}")
        # The predefined metric is evaluated as its 10 s Maximum: a target in other units is
        # a number in the wrong units.
        units = plan.target_units
        if (units.statistic, units.period_s) != (
            TARGET_TRACKING_STATISTIC,
            TARGET_TRACKING_PERIOD_S,
        ):
            problems.append(
                f"the plan's target is in {units.statistic} ({units.period_s} s) units, but "
                f"{TARGET_TRACKING_METRIC} is evaluated as {TARGET_TRACKING_STATISTIC} "
                f"({TARGET_TRACKING_PERIOD_S} s)"
            )
    if not steps:
        problems.append("no step scale-in policy")
    for policy in steps:
        cooldown = read(policy.props, "stepScalingPolicyConfiguration", "cooldown", default=None)
        if not _same(cooldown, plan.scale_in_cooldown_s):
            problems.append(
                f"scale-in cooldown {cooldown} != the plan's {plan.scale_in_cooldown_s}"
            )
    alarms = {read(a.props, "name", default=None): a for a in _by_type(resources, METRIC_ALARM)}
    scale_in = alarms.get(scale_in_alarm_name(endpoint, variant))
    threshold = read(scale_in.props, "threshold", default=None) if scale_in else None
    if not _same(threshold, plan.scale_in_threshold):
        problems.append(
            f"scale-in alarm threshold {threshold} != the plan's {plan.scale_in_threshold}"
        )
    # The threshold is a number in one statistic's units: the alarm must read that statistic.
    units = plan.scale_in_units
    statistic = read(scale_in.props, "statistic", default=None) if scale_in else None
    period = read(scale_in.props, "period", default=None) if scale_in else None
    if statistic != units.statistic or not _same(period, units.period_s):
        problems.append(
            f"scale-in alarm evaluates {statistic} over {period} s, the plan's threshold is in "
            f"{units.statistic} over {units.period_s} s units"
        )
    # The latency alarm is observability, not scaling: checked when present, not required.
    latency = alarms.get(first_chunk_alarm_name(endpoint, variant))
    latency_threshold = read(latency.props, "threshold", default=None) if latency else None
    if latency and not _same(latency_threshold, plan.first_chunk_alarm_ms):
        problems.append(
            f"first-chunk alarm threshold {latency_threshold} != the plan's {plan.first_chunk_alarm_ms}"
        )
    bound = read(model.props, "primaryContainer", "environment", default={}).get(
        ENV_MAX_QUEUE_DEPTH
    )
    if bound != str(plan.queue_max_depth):
        problems.append(
            f"{ENV_MAX_QUEUE_DEPTH} {bound} != the plan's queue bound {plan.queue_max_depth}"
        )
    return problems


def validate(args: StackValidationArgs, report_violation: ReportViolation) -> None:
    folder = plans_dir(args.get_config())
    targets = [
        t
        for t in _by_type(args.resources, SCALABLE_TARGET)
        if read(t.props, "serviceNamespace", default=None) == SERVICE_NAMESPACE
    ]
    target_ids = set()
    for target in targets:
        with unknowns_reported(report_violation, f"scalable target {target.name}", target.urn):
            target_ids.add(read(target.props, "resourceId"))
            _check_target(
                target, args.resources, folder, lambda m, urn=target.urn: report_violation(m, urn)
            )
    for policy in _by_type(args.resources, SCALING_POLICY):
        with unknowns_reported(report_violation, f"scaling policy {policy.name}", policy.urn):
            if read(policy.props, "serviceNamespace", default=None) != SERVICE_NAMESPACE:
                continue
            rid = read(policy.props, "resourceId")
            if rid not in target_ids:
                report_violation(
                    f"scaling policy {policy.name} on {rid}: missing plan: no scalable target of this "
                    "stack carries a measured plan for it",
                    policy.urn,
                )


POLICY = StackValidationPolicy(
    name=NAME,
    description=(
        "Requires SageMaker scaling resources to follow a feasible measured plan for the deployed "
        "image: target value, scale-in threshold and the statistic and period its alarm "
        "evaluates, cooldowns, queue bound and clamped min/max."
    ),
    enforcement_level=EnforcementLevel.MANDATORY,
    validate=validate,
    config_schema=PolicyConfigSchema(
        properties={
            "plansDir": {"type": "string", "description": "plans folder, relative to the pack"}
        }
    ),
)
