"""The measured-plan rule: SageMaker scaling resources exist only as a feasible plan says.

For each SageMaker scalable target in the stack, the rule finds the variant's Model (through
the endpoint and its configuration), reads the image digest, the model id tag and the instance
type from literals, applies the same gate as the program (`tts_bench.custody.gate`: the plan
selected, then re-derived from the qmax and ttotal it names) to the plans folder, and compares
every deployed number with the plan's, its scheduled actions included: exactly the plan's
schedule (`planning.deploy.scheduled_actions_of`), none for a plan without one.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
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

from tts_bench.artifacts.fingerprint import OWN_CONTRACT
from tts_bench.artifacts.plan import (
    AfterOneLess,
    AlarmSpec,
    PlanArtifact,
    StepSpec,
    TargetTrackingSpec,
)
from tts_bench.custody.gate import evaluate
from tts_bench.deployment import (
    SCALABLE_DIMENSION,
    SERVICE_NAMESPACE,
    TAG_CONTRACT,
    TAG_IMAGE_DIGEST,
    TAG_MAX_BOUND,
    TAG_MIN_BOUND,
    TAG_MODEL,
    TAG_MODEL_PACKAGE,
    TAG_PLAN_ID,
    TAG_PLAN_RULE,
    OperatorBounds,
    first_chunk_alarm_name,
    is_local_image,
    is_local_package,
    metric_queries_from_pulumi,
    parse_resource_id,
    policy_name,
    step_alarm_name,
)
from tts_bench.planning.aws import metric_math
from tts_bench.planning.aws.scaling import PREDEFINED_METRICS
from tts_bench.planning.deploy import deploy_shape_of, scheduled_actions_of
from tts_bench.planning.gate import GateQuery, GateResult, performance_env_of
from tts_bench.telemetry import ENV_MAX_QUEUE_DEPTH
from tts_policies.preview_values import read, unknowns_reported
from tts_policies.resource_types import (
    METRIC_ALARM,
    SAGEMAKER_ENDPOINT,
    SAGEMAKER_ENDPOINT_CONFIG,
    SAGEMAKER_MODEL,
    SCALABLE_TARGET,
    SCALING_POLICY,
    SCHEDULED_ACTION,
)

NAME = "sagemaker-scaling-requires-measured-plan"
PACK_DIR = Path(__file__).resolve().parents[1]
DEFAULT_PLANS_DIR = "../measurements"  # relative to the pack
# The scale-in step's messages keep the published rule's words; a burst step is named so.
_STEP_WORDS = {"scale-in": "scale-in", "burst": "burst"}


def plans_dir(config: Any) -> Path:
    """The plans folder from the policy's config (`plansDir`), relative paths against the pack."""
    folder = Path(str((config or {}).get("plansDir") or DEFAULT_PLANS_DIR))
    return folder if folder.is_absolute() else (PACK_DIR / folder).resolve()


def _same(a: Any, b: float | None) -> bool:
    return (
        b is not None
        and isinstance(a, int | float)
        and not isinstance(a, bool)
        and math.isclose(a, b, abs_tol=1e-9)
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


@dataclass(frozen=True)
class Deployed:
    """One scalable target and what it scales, as the stack declares them."""

    rid: str
    endpoint: str
    variant: str
    digest: str
    target: PolicyResource
    model: PolicyResource
    resources: Sequence[PolicyResource]
    bounds: OperatorBounds
    model_package: str | None = None  # then `digest` holds the package's ARN


def _deployed(
    target: PolicyResource, resources: Sequence[PolicyResource], report: Callable[[str], None]
) -> tuple[Deployed, GateQuery] | None:
    """The target's variant, Model and image, and the gate query they make; None (reported)
    when they cannot be read."""
    rid = read(target.props, "resourceId")
    parsed = parse_resource_id(rid)
    if (
        parsed is None
        or read(target.props, "scalableDimension", default=None) != SCALABLE_DIMENSION
    ):
        report(f"scalable target {rid}: not a SageMaker variant's DesiredInstanceCount")
        return None
    endpoint, variant = parsed
    tags = read(target.props, "tags", default={})
    model, entry, why = _variant_model(resources, endpoint, variant)
    if model is None or entry is None:
        report(f"{rid}: missing plan: {why}, so no measured plan can be matched to its image")
        return None
    image = read(model.props, "primaryContainer", "image", default="")
    digest = image.partition("@")[2]
    # A vendor's model package (issue 39) is matched by its versioned ARN, never by a digest.
    package = read(model.props, "primaryContainer", "modelPackageName", default=None)
    model_tags = read(model.props, "tags", default={})
    model_id = model_tags.get(TAG_MODEL)
    try:
        bounds = OperatorBounds(
            min_instances=int(tags[TAG_MIN_BOUND]), max_instances=int(tags[TAG_MAX_BOUND])
        )
    except (KeyError, ValueError):
        report(f"{rid}: missing plan: the target lacks valid {TAG_MIN_BOUND}/{TAG_MAX_BOUND} tags")
        return None
    if not model_id or not (package or digest.startswith("sha256:")):
        report(
            f"{rid}: missing plan: its Model needs a {TAG_MODEL} tag and an image pinned by digest "
            f"(image {image or '(none)'})"
        )
        return None
    rule = tags.get(TAG_PLAN_RULE)
    if rule not in ("published", "fleet"):
        report(
            f"{rid}: missing plan: the target's {TAG_PLAN_RULE} tag is {rule!r}, not a plan rule"
        )
        return None
    env = read(model.props, "primaryContainer", "environment", default={})
    try:
        query = GateQuery(
            model=model_id,
            instance_type=read(entry, "instanceType", default=""),
            image_digest=None if package else digest,
            model_package=package,
            image_is_local=is_local_image(image) or is_local_package(package or ""),
            performance_env=performance_env_of(dict(env)),
            bounds=bounds,
            rule=rule,
            contract=model_tags.get(TAG_CONTRACT, OWN_CONTRACT),
        )
    except ValueError as exc:
        report(f"{rid}: missing plan: cannot form the plan query ({exc})")
        return None
    deployed = Deployed(
        rid, endpoint, variant, package or digest, target, model, resources, bounds, package
    )
    return deployed, query


def _check_target(
    target: PolicyResource,
    resources: Sequence[PolicyResource],
    folder: Path,
    report: Callable[[str], None],
) -> None:
    found = _deployed(target, resources, report)
    if found is None:
        return
    deployed, query = found
    gate = evaluate(folder, query)
    if not gate.enabled or gate.plan is None:
        report(f"{deployed.rid}: missing plan: {gate.reason}")
        return
    plan: PlanArtifact = gate.plan
    for problem in _compare(plan, gate, deployed):
        report(
            f"{deployed.rid}: {problem} (plan {plan.plan_id}, {Path(gate.plan_path or '').name})"
        )


def _compare(plan: PlanArtifact, gate: GateResult, deployed: Deployed) -> list[str]:
    """Every deployed number and construct against the plan's."""
    return [
        *_tag_problems(plan, deployed),
        *_capacity_problems(gate, deployed),
        *_policy_problems(plan, deployed),
        *_schedule_problems(plan, deployed),
        *_container_problems(plan, deployed),
    ]


def _tag_problems(plan: PlanArtifact, deployed: Deployed) -> list[str]:
    tags = read(deployed.target.props, "tags", default={})
    problems = []
    deployed_tag = TAG_MODEL_PACKAGE if deployed.model_package else TAG_IMAGE_DIGEST
    for tag, want in ((TAG_PLAN_ID, plan.plan_id), (deployed_tag, deployed.digest)):
        if tags.get(tag) != want:
            what = {TAG_PLAN_ID: "the matching plan", TAG_IMAGE_DIGEST: "the model image"}.get(
                tag, "the model package"
            )
            problems.append(f"target tag {tag} is {tags.get(tag)!r}, {what} is {want}")
    return problems


def _capacity_problems(gate: GateResult, deployed: Deployed) -> list[str]:
    problems = []
    for prop, want in (("minCapacity", gate.deployed_min), ("maxCapacity", gate.deployed_max)):
        got = read(deployed.target.props, prop, default=None)
        if want is None or not _same(got, want):
            problems.append(
                f"{prop} {got} != the plan's, clamped into the operator bounds ({want})"
            )
    return problems


def _policy_problems(plan: PlanArtifact, deployed: Deployed) -> list[str]:
    """Each policy of the plan's deploy shape, found by its name, and no other."""
    policies = {
        read(p.props, "name", default=None): p
        for p in _by_type(deployed.resources, SCALING_POLICY)
        if read(p.props, "resourceId", default=None) == deployed.rid
    }
    problems: list[str] = []
    planned = set()
    for spec in deploy_shape_of(plan).policies:
        name = policy_name(deployed.endpoint, deployed.variant, spec.role)
        planned.add(name)
        policy = policies.get(name)
        if isinstance(spec, TargetTrackingSpec):
            problems += _tracking_problems(plan, spec, policy)
        else:
            problems += _step_problems(spec, policy, deployed)
    problems += [f"scaling policy {n} is not in the plan" for n in policies if n not in planned]
    return problems


def _schedule_problems(plan: PlanArtifact, deployed: Deployed) -> list[str]:
    """The target's scheduled actions, found by name: the plan's schedule exactly, no other."""
    actions = {
        read(a.props, "name", default=None): a
        for a in _by_type(deployed.resources, SCHEDULED_ACTION)
        if read(a.props, "resourceId", default=None) == deployed.rid
    }
    planned = scheduled_actions_of(plan, deployed.bounds, deployed.endpoint, deployed.variant)
    problems = []
    for spec in planned:
        action = actions.get(spec.name)
        if action is None:
            problems.append(f"no scheduled action {spec.name} ({spec.schedule}) of the plan")
            continue
        props = action.props
        for key, value, want in (
            ("schedule", read(props, "schedule", default=None), spec.schedule),
            ("timezone", read(props, "timezone", default=None) or "UTC", spec.timezone),
            ("startTime", read(props, "startTime", default=None), None),
            ("endTime", read(props, "endTime", default=None), None),
        ):
            if value != want:
                problems.append(f"scheduled action {spec.name} {key} {value} != the plan's {want}")
        for key, want in (("minCapacity", spec.min_capacity), ("maxCapacity", spec.max_capacity)):
            value = read(props, "scalableTargetAction", key, default=None)
            if want is None or not _same(value, want):
                problems.append(
                    f"scheduled action {spec.name} {key} {value} != the plan's, clamped into "
                    f"the operator bounds ({want})"
                )
    names = {spec.name for spec in planned}
    why = "" if plan.schedule else " (the plan has no schedule)"
    return problems + [
        f"scheduled action {n} is not in the plan{why}" for n in actions if n not in names
    ]


def _tracking_problems(
    plan: PlanArtifact, spec: TargetTrackingSpec, policy: PolicyResource | None
) -> list[str]:
    if policy is None or read(policy.props, "policyType", default="") != "TargetTrackingScaling":
        return [f"no target-tracking policy on {spec.predefined_metric}"]
    cfg = read(policy.props, "targetTrackingScalingPolicyConfiguration", default={})
    problems = []
    for key, want, words in (
        ("targetValue", spec.target_value, "target value"),
        ("scaleOutCooldown", spec.scale_out_cooldown_s, "scale-out cooldown"),
        ("scaleInCooldown", spec.scale_in_cooldown_s, "target tracking's scale-in cooldown"),
    ):
        value = read(cfg, key, default=None)
        if (value, want) != (None, None) and not _same(value, want):
            problems.append(f"{words} {value} != the plan's {want}")
    if bool(read(cfg, "disableScaleIn", default=False)) != spec.disable_scale_in:
        problems.append(
            "target tracking must not scale in (the step policy does)"
            if spec.disable_scale_in
            else "target tracking must scale in (the plan's own scale-in is part of it)"
        )
    metric = read(cfg, "predefinedMetricSpecification", "predefinedMetricType", default=None)
    if metric != spec.predefined_metric:
        problems.append(f"target tracking metric {metric} != {spec.predefined_metric}")
    # The predefined metric is evaluated as AWS evaluates it: a target in other units is a
    # number in the wrong units.
    evaluated = PREDEFINED_METRICS[spec.predefined_metric]
    units = plan.target_units
    if (units.metric, units.statistic, units.period_s) != (
        evaluated.metric, evaluated.statistic, evaluated.period_s,
    ):  # fmt: skip
        problems.append(
            f"the plan's target is in {units.statistic} ({units.period_s} s) units, but "
            f"{spec.predefined_metric} is evaluated as {evaluated.statistic} "
            f"({evaluated.period_s} s)"
        )
    return problems


def _step_problems(spec: StepSpec, policy: PolicyResource | None, deployed: Deployed) -> list[str]:
    words = _STEP_WORDS[spec.role]
    if policy is None or read(policy.props, "policyType", default="") != "StepScaling":
        return [f"no step {words} policy"]
    cfg = read(policy.props, "stepScalingPolicyConfiguration", default={})
    problems = []
    cooldown = read(cfg, "cooldown", default=None)
    if not _same(cooldown, spec.cooldown_s):
        problems.append(f"{words} cooldown {cooldown} != the plan's {spec.cooldown_s}")
    for key, want in (
        ("adjustmentType", spec.adjustment_type),
        ("metricAggregationType", spec.metric_aggregation_type),
        ("minAdjustmentMagnitude", spec.min_adjustment_magnitude),
    ):
        value = read(cfg, key, default=None)
        if value != want and not (want is not None and _same(value, want)):  # type: ignore[arg-type]
            problems.append(f"{words} {key} {value} != the plan's {want}")
    steps = [
        (
            _bound(read(s, "metricIntervalLowerBound", default=None)),
            _bound(read(s, "metricIntervalUpperBound", default=None)),
            read(s, "scalingAdjustment", default=None),
        )
        for s in read(cfg, "stepAdjustments", default=[])
    ]
    planned = [(s.lower, s.upper, s.adjustment) for s in spec.steps]
    if steps != planned:
        problems.append(f"{words} steps {steps} != the plan's {planned}")
    alarms = {
        read(a.props, "name", default=None): a for a in _by_type(deployed.resources, METRIC_ALARM)
    }
    alarm = alarms.get(step_alarm_name(deployed.endpoint, deployed.variant, spec.role))
    return problems + _alarm_problems(words, spec.alarm, alarm, deployed)


def _bound(value: Any) -> float | None:
    """A step bound as the provider holds it (text) or as a number; None when open."""
    return None if value is None else float(value)


def _alarm_problems(
    words: str, spec: AlarmSpec, alarm: PolicyResource | None, deployed: Deployed
) -> list[str]:
    props = alarm.props if alarm else {}
    threshold = read(props, "threshold", default=None)
    problems = []
    if not _same(threshold, spec.threshold):
        problems.append(f"{words} alarm threshold {threshold} != the plan's {spec.threshold}")
    if spec.after_one_less is not None:
        problems += _math_problems(words, spec, spec.after_one_less, props, deployed)
    elif read(props, "metricQueries", default=None):
        problems.append(
            f"{words} alarm is a metric-math alarm, the plan's reads {spec.metric} "
            f"{spec.statistic} over {spec.period_s} s alone"
        )
    else:
        problems += _metric_problems(words, spec, props)
    evaluation = read(props, "evaluationPeriods", default=None)
    datapoints = read(props, "datapointsToAlarm", default=evaluation)
    for key, value, want in (
        ("evaluationPeriods", evaluation, spec.evaluation_periods),
        ("datapointsToAlarm", datapoints, spec.datapoints_to_alarm),
        ("comparisonOperator", read(props, "comparisonOperator", default=None), spec.comparison),
        (
            "treatMissingData",
            read(props, "treatMissingData", default="missing"),
            spec.treat_missing_data,
        ),
    ):
        if value != want and not (isinstance(want, int) and _same(value, want)):
            problems.append(f"{words} alarm {key} {value} != the plan's {want}")
    return problems


def _metric_problems(words: str, spec: AlarmSpec, props: Any) -> list[str]:
    """A plain alarm's metric: the threshold is a number in one statistic's units, so the alarm
    must read that statistic over that period."""
    problems = []
    statistic = read(props, "statistic", default=None)
    period = read(props, "period", default=None)
    if statistic != spec.statistic or not _same(period, spec.period_s):
        problems.append(
            f"{words} alarm evaluates {statistic} over {period} s, the plan's threshold is in "
            f"{spec.statistic} over {spec.period_s} s units"
        )
    metric = read(props, "metricName", default=None)
    if metric != spec.metric:
        problems.append(f"{words} alarm metricName {metric} != the plan's {spec.metric}")
    return problems


def _math_problems(
    words: str, spec: AlarmSpec, plan_math: AfterOneLess, props: Any, deployed: Deployed
) -> list[str]:
    """The fleet-aware alarm: exactly the queries `metric_math` writes for the plan's numbers."""
    math = metric_math.of(plan_math)
    wanted = metric_math.queries(
        math, spec.threshold, deployed.endpoint, deployed.variant, spec.period_s
    )
    planned = metric_math.expression(math, spec.threshold)
    queries = read(props, "metricQueries", default=None)
    if not queries:
        return [
            f"{words} alarm reads {read(props, 'metricName', default=None)} alone, the plan's "
            f"is the metric-math expression {planned}"
        ]
    metrics = metric_queries_from_pulumi(queries)
    if metric_math.same(metrics, wanted):
        return []
    parsed = metric_math.parse(metrics)
    returned = metric_math.returned_expression(metrics)
    if parsed is None:
        return [
            f"{words} alarm's metric queries are not the fleet-aware expression (returned "
            f"{returned!r}), the plan's is {planned} over {spec.statistic} {spec.period_s} s"
        ]
    return [
        f"{words} alarm's metric queries ({returned}, {parsed[1]} s, on "
        f"{metric_math.dimensions_of(metrics)}) != the plan's ({planned}, {spec.period_s} s, "
        f"on {metric_math.dimensions_of(wanted)})"
    ]


def _container_problems(plan: PlanArtifact, deployed: Deployed) -> list[str]:
    problems = []
    alarms = {
        read(a.props, "name", default=None): a for a in _by_type(deployed.resources, METRIC_ALARM)
    }
    # The latency alarm is observability, not scaling: checked when present, not required.
    latency = alarms.get(first_chunk_alarm_name(deployed.endpoint, deployed.variant))
    latency_threshold = read(latency.props, "threshold", default=None) if latency else None
    if latency and not _same(latency_threshold, plan.first_chunk_alarm_ms):
        problems.append(
            f"first-chunk alarm threshold {latency_threshold} != the plan's {plan.first_chunk_alarm_ms}"
        )
    bound = read(deployed.model.props, "primaryContainer", "environment", default={}).get(
        ENV_MAX_QUEUE_DEPTH
    )
    # A vendor's container reads no bound of ours: it refuses past its own (the contract's
    # `admits`), which the ladder measured as it is.
    if deployed.model_package is None and bound != str(plan.queue_max_depth):
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
    for kind, words in ((SCALING_POLICY, "scaling policy"), (SCHEDULED_ACTION, "scheduled action")):
        for resource in _by_type(args.resources, kind):
            with unknowns_reported(report_violation, f"{words} {resource.name}", resource.urn):
                if read(resource.props, "serviceNamespace", default=None) != SERVICE_NAMESPACE:
                    continue
                rid = read(resource.props, "resourceId")
                if rid not in target_ids:
                    report_violation(
                        f"{words} {resource.name} on {rid}: missing plan: no scalable target of "
                        "this stack carries a measured plan for it",
                        resource.urn,
                    )


POLICY = StackValidationPolicy(
    name=NAME,
    description=(
        "Requires SageMaker scaling resources to follow a feasible measured plan for the deployed "
        "image and the stack's plan rule, re-derived from the artifacts it names: every policy of its deploy shape (type, metric, "
        "target, steps, cooldowns), every alarm (metric, statistic, period or its metric-math queries, datapoints, "
        "threshold), its scheduled actions (none without a schedule), the queue bound and "
        "clamped min/max."
    ),
    enforcement_level=EnforcementLevel.MANDATORY,
    validate=validate,
    config_schema=PolicyConfigSchema(
        properties={
            "plansDir": {"type": "string", "description": "plans folder, relative to the pack"}
        }
    ),
)
