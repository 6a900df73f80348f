"""The Pulumi program under mocks (a full run, preview=False), one process per program run."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.infra.conftest import OTHER_DIGEST, REFERENCE_DIGEST, REGISTRY_REPO, copy_program
from tts_bench.artifacts.plan import PlanArtifact
from tts_bench.deployment import (
    SCALE_IN_COMPARISON,
    SCALE_IN_EVALUATION_PERIODS,
    SCALE_IN_PERIOD_S,
    SCALE_IN_STATISTIC,
    TAG_CONTRACT,
    TAG_IMAGE_DIGEST,
    TAG_MAX_BOUND,
    TAG_MIN_BOUND,
    TAG_MODEL,
    TAG_MODEL_PACKAGE,
    TAG_PLAN_ID,
    TARGET_TRACKING_METRIC,
    first_chunk_alarm_name,
    scale_in_alarm_name,
)
from tts_bench.infra.preview import PreviewError, record
from tts_bench.infra.preview_recorder import Recording
from tts_bench.telemetry import ENV_MAX_QUEUE_DEPTH

SCALING_TYPES = {
    "aws:appautoscaling/target:Target",
    "aws:appautoscaling/policy:Policy",
    "aws:cloudwatch/metricAlarm:MetricAlarm",
    "aws:cloudwatch/dashboard:Dashboard",
}
ENDPOINT = "speech-kokoro-82m"

pytestmark = pytest.mark.slow  # one Python process per program run


def run(program: Path) -> Recording:
    return record(program, "dev", preview=False)


def one(recording: Recording, type_: str, name: str | None = None) -> dict[str, Any]:
    found = [r for r in recording.resources if r.type == type_ and (name is None or r.name == name)]
    assert len(found) == 1, f"expected one {type_} {name or ''}, found {[r.name for r in found]}"
    return found[0].properties


def warnings(recording: Recording) -> str:
    return "\n".join(log.message for log in recording.logs if log.level == "warning")


@pytest.fixture(scope="module")
def reference_run(tmp_path_factory: pytest.TempPathFactory) -> Recording:
    """The repo's program with bounds 1:300 and the committed reference plan."""
    return run(copy_program(tmp_path_factory.mktemp("reference")))


def test_every_scaling_and_alarm_value_is_the_plans(
    reference_run: Recording, reference_plan: PlanArtifact
) -> None:
    plan = reference_plan
    checked = 0
    target = one(reference_run, "aws:appautoscaling/target:Target")
    assert (target["minCapacity"], target["maxCapacity"]) == (
        plan.min_instances,
        plan.max_instances,
    )
    assert target["tags"][TAG_PLAN_ID] == plan.plan_id
    assert target["tags"][TAG_IMAGE_DIGEST] == plan.fingerprint.image_digest
    assert (target["tags"][TAG_MIN_BOUND], target["tags"][TAG_MAX_BOUND]) == ("1", "300")
    checked += 1

    tracking = one(reference_run, "aws:appautoscaling/policy:Policy", f"{ENDPOINT}-target-tracking")
    cfg = tracking["targetTrackingScalingPolicyConfiguration"]
    assert cfg["targetValue"] == plan.scaling_target_value == 37.5
    assert cfg["scaleOutCooldown"] == plan.scale_out_cooldown_s == 30
    assert cfg["disableScaleIn"] is True
    assert cfg["predefinedMetricSpecification"]["predefinedMetricType"] == TARGET_TRACKING_METRIC
    checked += 1

    step = one(reference_run, "aws:appautoscaling/policy:Policy", f"{ENDPOINT}-scale-in")
    step_cfg = step["stepScalingPolicyConfiguration"]
    assert step_cfg["cooldown"] == plan.scale_in_cooldown_s == 960
    assert step_cfg["stepAdjustments"][0]["scalingAdjustment"] == -1
    checked += 1

    alarm = one(
        reference_run, "aws:cloudwatch/metricAlarm:MetricAlarm", f"{ENDPOINT}-scale-in-alarm"
    )
    assert alarm["name"] == scale_in_alarm_name(ENDPOINT)
    assert alarm["threshold"] == plan.scale_in_threshold == 25.0
    # The alarm reads the metric in the units its threshold's ratio was measured in.
    assert (alarm["statistic"], alarm["period"], alarm["evaluationPeriods"]) == (
        plan.scale_in_units.statistic,
        plan.scale_in_units.period_s,
        SCALE_IN_EVALUATION_PERIODS,
    )
    assert (plan.scale_in_units.statistic, plan.scale_in_units.period_s) == (
        SCALE_IN_STATISTIC,
        SCALE_IN_PERIOD_S,
    )
    assert step_cfg["metricAggregationType"] == plan.scale_in_units.statistic
    assert alarm["comparisonOperator"] == SCALE_IN_COMPARISON
    checked += 1

    latency = one(
        reference_run, "aws:cloudwatch/metricAlarm:MetricAlarm", f"{ENDPOINT}-first-chunk-p95"
    )
    assert latency["name"] == first_chunk_alarm_name(ENDPOINT)
    assert latency["threshold"] == plan.first_chunk_alarm_ms == 65
    assert latency["extendedStatistic"] == "p95"
    checked += 1

    model = one(reference_run, "aws:sagemaker/model:Model")
    assert (
        model["primaryContainer"]["environment"][ENV_MAX_QUEUE_DEPTH]
        == str(plan.queue_max_depth)
        == "50"
    )
    assert model["tags"][TAG_PLAN_ID] == plan.plan_id
    # The server names itself from these: EMF dimensions and the fingerprint /ping reports.
    env = model["primaryContainer"]["environment"]
    assert env["ENDPOINT_NAME"] == ENDPOINT
    assert env["VARIANT_NAME"] == "AllTraffic"
    assert env["INSTANCE_TYPE"] == "ml.g5.xlarge"
    assert env["IMAGE_DIGEST"] == plan.fingerprint.image_digest
    checked += 1

    dashboard = json.loads(
        one(reference_run, "aws:cloudwatch/dashboard:Dashboard")["dashboardBody"]
    )
    lines = [
        a["value"]
        for w in dashboard["widgets"]
        for a in w["properties"].get("annotations", {}).get("horizontal", [])
    ]
    assert {plan.scaling_target_value, plan.scale_in_threshold, plan.first_chunk_alarm_ms} <= set(
        lines
    )
    checked += 1
    assert checked == 7


def test_the_image_is_pinned_by_digest_and_routing_is_least_outstanding(
    reference_run: Recording,
) -> None:
    model = one(reference_run, "aws:sagemaker/model:Model")
    assert model["primaryContainer"]["image"] == f"{REGISTRY_REPO}@{REFERENCE_DIGEST}"
    assert re.fullmatch(r"[^@]+@sha256:[0-9a-f]{64}", model["primaryContainer"]["image"])
    assert model["tags"][TAG_MODEL] == "kokoro-82m"
    variants = one(reference_run, "aws:sagemaker/endpointConfiguration:EndpointConfiguration")[
        "productionVariants"
    ]
    assert [v["routingConfigs"][0]["routingStrategy"] for v in variants] == [
        "LEAST_OUTSTANDING_REQUESTS"
    ]
    assert variants[0]["instanceType"] == "ml.g5.xlarge"
    assert one(reference_run, "aws:sagemaker/endpoint:Endpoint")["name"] == ENDPOINT


def test_a_plan_without_a_schedule_deploys_no_scheduled_action(
    reference_run: Recording, reference_plan: PlanArtifact
) -> None:
    assert reference_plan.schedule is None
    types = {r.type for r in reference_run.resources}
    assert "aws:appautoscaling/scheduledAction:ScheduledAction" not in types
    assert types >= SCALING_TYPES


def test_components_parent_their_children(reference_run: Recording) -> None:
    components = {r.urn: r for r in reference_run.resources if not r.custom}
    assert {r.type for r in components.values()} == {
        "speech:aws:Foundation",
        "speech:aws:ModelCache",
        "speech:aws:SpeechEndpoint",
        "speech:aws:EndpointAutoscaling",
        "speech:aws:EndpointObservability",
    }
    for resource in reference_run.resources:
        if resource.custom:
            parent = components[resource.parent or ""]
            assert resource.name.startswith(f"{parent.name}-")


@pytest.mark.parametrize(
    ("case", "reason"),
    [
        ("no-plan", "no plan"),
        ("digest-mismatch", "not sha256:abab"),
        ("infeasible", "is infeasible (stop: slo_ceiling)"),
        ("min-equals-max", "maxInstances (4) equals minInstances (4)"),
        ("slo-mismatch", "derived for an SLO of 3000 ms, the stack asks 2500 ms"),
        ("emulated-plan", "never gates a stack whose image is not a local digest"),
        ("point-q-max", "plan on the ladder's point Q_max (`qmax --q-max-basis point`)"),
    ],
)
def test_without_a_usable_plan_there_are_no_scaling_resources_and_the_log_says_why(
    case: str,
    reason: str,
    program_copy: Callable[..., Path],
    infeasible_plan: PlanArtifact,
    emulated_plan: PlanArtifact,
    make_plan: Callable[..., PlanArtifact],
) -> None:
    point = make_plan(inputs=make_plan().inputs.model_dump(mode="json") | {"q_max_basis": "point"})
    program = {
        "no-plan": lambda: program_copy(plans=[]),
        "digest-mismatch": lambda: program_copy(image=f"{REGISTRY_REPO}@{OTHER_DIGEST}"),
        "infeasible": lambda: program_copy(plans=[infeasible_plan]),
        "min-equals-max": lambda: program_copy(minInstances=4, maxInstances=4),
        "slo-mismatch": lambda: program_copy(sloMs=2500),
        "emulated-plan": lambda: program_copy(plans=[emulated_plan]),
        "point-q-max": lambda: program_copy(plans=[point]),
    }[case]()
    recording = run(program)
    assert recording.resources, "the program registered nothing"
    assert not [r.name for r in recording.resources if r.type in SCALING_TYPES]
    assert reason in warnings(recording)
    assert "autoscaling and its alarms are NOT created" in warnings(recording)
    model = one(recording, "aws:sagemaker/model:Model")
    assert ENV_MAX_QUEUE_DEPTH not in model["primaryContainer"].get("environment", {})
    assert TAG_PLAN_ID not in model["tags"]


def test_a_scheduled_plan_deploys_its_actions_and_an_edited_one_none(
    tmp_path: Path, scheduled_fleet_plan: PlanArtifact
) -> None:
    """The program deploys a `--schedule` plan's actions; a plan whose step was edited by hand
    no longer follows from its recorded day, so the gate deploys no scaling at all."""
    scheduled = "aws:appautoscaling/scheduledAction:ScheduledAction"
    (tmp_path / "as-planned").mkdir()
    recording = run(copy_program(tmp_path / "as-planned", [scheduled_fleet_plan], planRule="fleet"))
    actions = sorted((r.name, r.properties["schedule"]) for r in recording.resources
                     if r.type == scheduled)  # fmt: skip
    assert actions == [
        (f"{ENDPOINT}-AllTraffic-schedule-{hhmm}", cron)
        for hhmm, cron in (("0000", "cron(0 0 * * ? *)"), ("0021", "cron(21 0 * * ? *)"),
                           ("0139", "cron(39 1 * * ? *)"))
    ]  # fmt: skip
    data = scheduled_fleet_plan.model_dump(mode="json")
    data["schedule"]["steps"][1]["min_capacity"] = 30
    edited = PlanArtifact.model_validate(data)
    (tmp_path / "edited").mkdir()
    recording = run(copy_program(tmp_path / "edited", [edited], planRule="fleet"))
    assert not [r.name for r in recording.resources if r.type in {*SCALING_TYPES, scheduled}]
    assert "schedule.steps[1].min_capacity" in warnings(recording)


def test_an_emulated_plan_gates_the_local_clouds_deploy_only(
    program_copy: Callable[..., Path], emulated_plan: PlanArtifact
) -> None:
    recording = run(program_copy(plans=[emulated_plan], localCloud=True))
    target = one(recording, "aws:appautoscaling/target:Target")
    assert target["tags"][TAG_PLAN_ID] == emulated_plan.plan_id


def test_a_stack_of_another_contract_is_not_gated_by_a_kokoro_plan(
    program_copy: Callable[..., Path], reference_run: Recording
) -> None:
    recording = run(program_copy(contract="sonic3"))
    assert not [r for r in recording.resources if r.type in SCALING_TYPES]
    assert "contract-mismatch" in warnings(recording) + " ".join(m.message for m in recording.logs)
    assert one(recording, "aws:sagemaker/model:Model")["tags"][TAG_CONTRACT] == "sonic3"
    # A Kokoro stack's Model names no contract: its preview is as it was before contracts.
    assert TAG_CONTRACT not in one(reference_run, "aws:sagemaker/model:Model")["tags"]


def test_a_disabled_stack_is_the_same_whatever_the_reason(
    program_copy: Callable[..., Path], tmp_path: Path
) -> None:
    no_plan = run(program_copy(plans=[]))
    (tmp_path / "program").rename(tmp_path / "first")
    pinned = run(program_copy(minInstances=1, maxInstances=1))

    def shape(recording: Recording) -> list[tuple[str, str, str]]:
        return sorted(
            (r.type, r.name, json.dumps(r.properties, sort_keys=True)) for r in recording.resources
        )

    assert shape(no_plan) == shape(pinned)


def test_the_planned_peak_beyond_the_operator_bound_is_clamped_and_warned(
    program_copy: Callable[..., Path],
) -> None:
    recording = run(program_copy(maxInstances=20))
    target = one(recording, "aws:appautoscaling/target:Target")
    assert (target["minCapacity"], target["maxCapacity"]) == (1, 20)
    assert "needs up to 280 instances at peak but maxInstances is 20" in warnings(recording)


def test_a_first_deploy_can_leave_the_endpoint_out(program_copy: Callable[..., Path]) -> None:
    recording = run(program_copy(deployEndpoint=False, image=REGISTRY_REPO))
    types = {r.type for r in recording.resources}
    assert "aws:ecr/repository:Repository" in types and "aws:codebuild/project:Project" in types
    assert not {t for t in types if t.startswith("aws:sagemaker/")} | (types & SCALING_TYPES)
    assert "deployEndpoint is false" in warnings(recording)


@pytest.mark.parametrize(
    ("config", "expected_error"),
    [
        ({"image": f"{REGISTRY_REPO}:latest"}, "pinned only by tag (latest)"),
        ({"image": "nginx@" + REFERENCE_DIGEST}, "not an ECR reference"),
        (
            {"image": REGISTRY_REPO},
            "image: image '123456789012.dkr.ecr.us-east-1.amazonaws.com/tts-bench-kokoro' is not an ECR reference pinned by digest",
        ),
        ({"minInstances": 5, "maxInstances": 2}, "maxInstances (2) is below minInstances (5)"),
        ({"instanceType": None}, "instanceType: Field required"),
        ({"surgeRatio": 1.6}, "surgeRatio: Input should be less than 1.5"),
    ],
)
def test_bad_config_fails_with_a_clear_error(
    config: dict[str, Any], expected_error: str, program_copy: Callable[..., Path]
) -> None:
    with pytest.raises(PreviewError, match=re.escape(expected_error)):
        run(program_copy(**config))


SONIC3_PACKAGE = "arn:aws:sagemaker:us-east-1:865070037744:model-package/sonic-3-standin/2"


def test_a_model_package_stack_deploys_the_package_network_isolated_and_nothing_to_build(
    program_copy: Callable[..., Path],
) -> None:
    """Issue 39: a Marketplace package is deployed by ModelPackageName with network isolation,
    routed as its contract recommends; no repository, weights bucket or model cache exists."""
    recording = run(
        program_copy(
            image=None, modelPackageArn=SONIC3_PACKAGE, account="111122223333", contract="sonic3"
        )
    )
    model = one(recording, "aws:sagemaker/model:Model")
    assert model["primaryContainer"]["modelPackageName"] == SONIC3_PACKAGE
    assert "image" not in model["primaryContainer"]
    assert "modelDataSource" not in model["primaryContainer"]
    assert model["enableNetworkIsolation"] is True
    assert model["tags"][TAG_MODEL_PACKAGE] == SONIC3_PACKAGE
    assert TAG_IMAGE_DIGEST not in model["tags"]
    variant = one(recording, "aws:sagemaker/endpointConfiguration:EndpointConfiguration")[
        "productionVariants"
    ][0]
    assert variant["routingConfigs"] == [{"routingStrategy": "LEAST_OUTSTANDING_REQUESTS"}]
    types = {r.type for r in recording.resources}
    assert not types & {
        "aws:ecr/repository:Repository",
        "aws:s3/bucket:Bucket",
        "aws:codebuild/project:Project",
    }
    policy = json.loads(one(recording, "aws:iam/rolePolicy:RolePolicy")["policy"])
    assert {a for s in policy["Statement"] for a in s["Action"]} == {
        "logs:CreateLogGroup",
        "logs:CreateLogStream",
        "logs:DescribeLogStreams",
        "logs:PutLogEvents",
    }
    assert all(":111122223333:" in r for s in policy["Statement"] for r in s["Resource"])
    # The committed plan is Kokoro's, measured on an image: it never gates this stack.
    assert not types & SCALING_TYPES
    assert "contract-mismatch" in warnings(recording) + " ".join(m.message for m in recording.logs)


def test_a_model_package_stack_without_a_routing_recommendation_sends_none(
    program_copy: Callable[..., Path],
) -> None:
    recording = run(
        program_copy(image=None, modelPackageArn=SONIC3_PACKAGE, account="111122223333")
    )
    variant = one(recording, "aws:sagemaker/endpointConfiguration:EndpointConfiguration")[
        "productionVariants"
    ][0]
    assert "routingConfigs" not in variant
    # Under the Kokoro contract the contract matches, so the refusal is the package's.
    assert "no plan for this model package" in warnings(recording) + " ".join(
        m.message for m in recording.logs
    )
