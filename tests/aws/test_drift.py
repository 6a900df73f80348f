"""`tts-bench drift` against the emulator: clean preflight, and each drift case with its severity."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.aws.emulated import ENDPOINT, EmulatedAws
from tests.aws.snapshots import OTHER_DIGEST, OTHER_IMAGE, PACKAGE, running, snapshot_for
from tts_bench.artifacts.files import load_artifact
from tts_bench.artifacts.plan import PlanArtifact
from tts_bench.aws.drift import Rule, check_drift
from tts_bench.aws.validate import SCALING_SETTINGS, planned_values
from tts_bench.cli import main
from tts_bench.deployment import resource_id, scale_in_alarm_name, scale_in_policy_name


@pytest.fixture
def plan(reference_plan_path: Path) -> PlanArtifact:
    return load_artifact(reference_plan_path, PlanArtifact)


@pytest.fixture
def deployed(aws: EmulatedAws, plan: PlanArtifact) -> EmulatedAws:
    aws.deploy(plan)
    return aws


def drift(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["drift", "--endpoint", ENDPOINT, *args])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("with_plan", [False, True])
def test_a_clean_deployment_passes_preflight(
    deployed: EmulatedAws, reference_plan_path: Path, capsys, with_plan: bool
) -> None:
    args = ["--plan", str(reference_plan_path)] if with_plan else []
    code, out, err = drift(capsys, *args)
    assert (code, out.splitlines()[-1].split()[0]) == (0, "preflight-ok")
    assert "next:" in err


def test_drift_makes_no_change(deployed: EmulatedAws, capsys) -> None:
    deployed.target(suspended={"DynamicScalingInSuspended": True})
    before = deployed.scaling()
    assert drift(capsys)[0] == 1
    assert deployed.scaling() == before


def _orphan_target_of_a_deleted_endpoint(aws: EmulatedAws, plan: PlanArtifact) -> None:
    aws.target("speech-old-stack", min_capacity=1, max_capacity=3)


def _orphan_target_on_another_variant(aws: EmulatedAws, plan: PlanArtifact) -> None:
    aws.endpoint("speech-two-variants", variants=("AllTraffic", "Canary"))
    aws.target("speech-two-variants", "Canary", min_capacity=1, max_capacity=2)
    # The other endpoint's variants exist: not an orphan. This one's endpoint has no Canary.
    aws.target(ENDPOINT, "Canary", min_capacity=1, max_capacity=2)


def _orphan_policy_by_hand(aws: EmulatedAws, plan: PlanArtifact) -> None:
    aws.tracking_policy(target_value=10.0, scale_out_cooldown_s=60, name="hand-made-policy")


def _suspended(aws: EmulatedAws, plan: PlanArtifact) -> None:
    aws.target(suspended={"DynamicScalingInSuspended": True, "ScheduledScalingSuspended": True})


def _alarm_stuck(aws: EmulatedAws, plan: PlanArtifact) -> None:
    aws.alarm_state(scale_in_alarm_name(ENDPOINT), "INSUFFICIENT_DATA")


def _target_value(aws: EmulatedAws, plan: PlanArtifact) -> None:
    aws.tracking_policy(target_value=45.0, scale_out_cooldown_s=plan.scale_out_cooldown_s)


def _scale_in_threshold(aws: EmulatedAws, plan: PlanArtifact) -> None:
    arn = aws.step_policy(cooldown_s=plan.scale_in_cooldown_s)
    aws.alarm(scale_in_alarm_name(ENDPOINT), threshold=20.0, policy_arn=arn)


def _scale_out_cooldown(aws: EmulatedAws, plan: PlanArtifact) -> None:
    aws.tracking_policy(target_value=plan.scaling_target_value, scale_out_cooldown_s=300)


def _scale_in_cooldown(aws: EmulatedAws, plan: PlanArtifact) -> None:
    arn = aws.step_policy(cooldown_s=300)
    aws.alarm(scale_in_alarm_name(ENDPOINT), threshold=plan.scale_in_threshold, policy_arn=arn)


def _max_instances(aws: EmulatedAws, plan: PlanArtifact) -> None:
    aws.target(max_capacity=4)


def _desired_outside(aws: EmulatedAws, plan: PlanArtifact) -> None:
    aws.target(min_capacity=3)  # desired stays 2


CASES = [
    # (case, needs --plan, rule, severity, words the message must hold)
    (_orphan_target_of_a_deleted_endpoint, False, "orphan-target", "error", "does not exist"),
    (_orphan_target_on_another_variant, False, "orphan-target", "error", "'Canary'"),
    (_orphan_policy_by_hand, False, "orphan-policy", "error", "hand-made-policy"),
    (_suspended, False, "scaling-suspended", "error", f"tts-bench thaw --endpoint {ENDPOINT}"),
    (_alarm_stuck, False, "alarm-insufficient-data", "error", "nothing publishes"),
    (_target_value, True, "plan-mismatch", "error", "target value: deployed 45"),
    (_scale_in_threshold, True, "plan-mismatch", "error", "scale-in threshold: deployed 20"),
    (_scale_out_cooldown, True, "plan-mismatch", "error", "scale-out cooldown (s): deployed 300"),
    (_scale_in_cooldown, True, "plan-mismatch", "error", "scale-in cooldown (s): deployed 300"),
    (_max_instances, True, "plan-mismatch", "error", "max instances: deployed 4"),
    (_desired_outside, False, "capacity-outside-bounds", "warning", "desired capacity 2"),
]


@pytest.mark.parametrize(
    ("case", "with_plan", "rule", "severity", "words"),
    CASES,
    ids=[case[0].__name__.strip("_") for case in CASES],
)
def test_each_drift_case_is_found_with_its_severity(
    deployed: EmulatedAws,
    plan: PlanArtifact,
    reference_plan_path: Path,
    capsys,
    case: Callable[[EmulatedAws, PlanArtifact], None],
    with_plan: bool,
    rule: str,
    severity: str,
    words: str,
) -> None:
    case(deployed, plan)
    args = ["--json", "--insufficient-data-grace", "0"]
    code, out, err = drift(
        capsys, *args, *(["--plan", str(reference_plan_path)] if with_plan else [])
    )
    findings = json.loads(out)["findings"]
    assert [(f["rule"], f["severity"]) for f in findings] == [(rule, severity)]
    assert words in findings[0]["message"]
    assert code == (1 if severity == "error" else 0)
    assert ("preflight-ok" in err) == (severity == "warning")


def test_a_fresh_insufficient_data_alarm_is_only_a_warning(deployed: EmulatedAws, capsys) -> None:
    _alarm_stuck(deployed, None)  # type: ignore[arg-type]
    code, out, _ = drift(capsys)
    assert code == 0
    assert out.startswith("warning  alarm-insufficient-data")
    assert out.splitlines()[-1].startswith("preflight-ok")


def test_plan_min_max_are_compared_after_clamping_into_the_bounds(
    aws: EmulatedAws, plan: PlanArtifact, reference_plan_path: Path, capsys
) -> None:
    aws.deploy(plan, min_capacity=2, max_capacity=20)  # the plan's 1..280 inside bounds 2:20
    plan_args = ("--plan", str(reference_plan_path))
    assert drift(capsys, *plan_args, "--bounds", "2:20")[0] == 0
    code, out, _ = drift(capsys, *plan_args)
    assert code == 1
    assert "min instances: deployed 2" in out and "max instances: deployed 20" in out


def test_without_scaling_resources_a_plan_reports_each_missing_setting(
    aws: EmulatedAws, reference_plan_path: Path, capsys
) -> None:
    aws.endpoint()
    code, out, _ = drift(capsys, "--plan", str(reference_plan_path))
    assert code == 1
    plan = load_artifact(reference_plan_path, PlanArtifact)
    expected = [s for s in planned_values(plan, None) if s in SCALING_SETTINGS]
    assert out.count("plan-mismatch") == len(expected) and "deployed (none)" in out


def test_a_policy_without_its_target_is_an_orphan(deployed: EmulatedAws, capsys) -> None:
    deployed.client("application-autoscaling").deregister_scalable_target(
        ServiceNamespace="sagemaker",
        ResourceId=resource_id(ENDPOINT),
        ScalableDimension="sagemaker:variant:DesiredInstanceCount",
    )
    code, out, _ = drift(capsys)
    assert code == 1
    orphans = [line for line in out.splitlines() if line.startswith("error    orphan-policy")]
    assert len(orphans) == 2 and any(scale_in_policy_name(ENDPOINT) in o for o in orphans)


def test_a_scale_in_alarm_in_another_statistic_is_a_plan_mismatch(
    aws: EmulatedAws, plan: PlanArtifact, reference_plan_path: Path, capsys
) -> None:
    """The right threshold read as a 60 s Average is a number in other units than the plan's."""
    aws.deploy(plan)
    policies = aws.client("application-autoscaling").describe_scaling_policies(
        ServiceNamespace="sagemaker", ResourceId=resource_id(ENDPOINT)
    )["ScalingPolicies"]
    step_arn = next(p["PolicyARN"] for p in policies if p["PolicyType"] == "StepScaling")
    aws.alarm(
        scale_in_alarm_name(ENDPOINT),
        threshold=plan.scale_in_threshold,
        policy_arn=step_arn,
        statistic="Average",
        period_s=60,
    )
    code, out, _ = drift(capsys, "--plan", str(reference_plan_path))
    assert code == 1
    assert "scale-in statistic: deployed Average" in out and "says Maximum" in out
    assert "scale-in period (s): deployed 60" in out
    assert "scale-in threshold" not in out  # the value itself matches


FLEET_PLAN_NAME = "plan-kokoro-82m-fleet-g5xlarge-8b1b96bc.json"


def test_a_fleet_deployment_is_clean_against_its_plan_and_a_published_one_is_not(
    aws: EmulatedAws, reference_plan_path: Path, capsys
) -> None:
    fleet_path = reference_plan_path.parent / FLEET_PLAN_NAME
    aws.deploy_shape(load_artifact(fleet_path, PlanArtifact))
    code, out, _ = drift(capsys, "--plan", str(fleet_path))
    assert (code, out.splitlines()[-1].split()[0]) == (0, "preflight-ok"), out
    code, out, _ = drift(capsys)  # without a plan, any policy a plan may deploy is accounted for
    assert code == 0, out
    code, out, _ = drift(capsys, "--plan", str(reference_plan_path))
    assert code == 1
    assert "orphan-policy" in out and "speech-kokoro-82m-AllTraffic-invocations-target" in out
    assert "plan-mismatch" in out and "scale-in step: deployed PercentChangeInCapacity" in out
    # Its scale-in alarm is metric math, where the published plan's reads one metric.
    assert "scale-in expression: deployed IF(n >= 20, m1 / (n - 1)" in out
    assert "scale-in statistic: deployed Sum, plan d0b4a6baef69 says Maximum" in out


SCHEDULED_DAY = [10.0] * 60 + [300.0] * 20 + [10.0] * 80


@pytest.fixture
def scheduled(reference_plan_path: Path, tmp_path: Path) -> tuple[PlanArtifact, Path]:
    """The fleet plan with the schedule of a hand-made day, in a file of its own."""
    from tts_bench.planning.schedule.attach import with_schedule

    fleet = load_artifact(reference_plan_path.parent / FLEET_PLAN_NAME, PlanArtifact)
    plan = with_schedule(fleet, "a hand-made day", SCHEDULED_DAY)
    path = tmp_path / "plan-scheduled.json"
    path.write_text(plan.model_dump_json(), encoding="utf-8")
    return plan, path


def test_a_scheduled_deployment_is_clean_against_its_plan(
    aws: EmulatedAws, scheduled: tuple[PlanArtifact, Path], capsys
) -> None:
    plan, path = scheduled
    aws.deploy_shape(plan)
    aws.schedule(plan)
    code, out, _ = drift(capsys, "--plan", str(path))
    assert (code, out.splitlines()[-1].split()[0]) == (0, "preflight-ok"), out


def test_a_scheduled_action_other_than_the_plans_is_drift(
    aws: EmulatedAws, scheduled: tuple[PlanArtifact, Path], capsys
) -> None:
    plan, path = scheduled
    aws.deploy_shape(plan)
    name = f"{ENDPOINT}-AllTraffic-schedule-0021"
    aws.schedule(
        plan, edit={name: {"ScalableTargetAction": {"MinCapacity": 9, "MaxCapacity": 363}}}
    )
    code, out, _ = drift(capsys, "--plan", str(path))
    assert code == 1 and "plan-mismatch" in out, out
    assert "cron(21 0 * * ? *) Etc/UTC min 9 max 363" in out, out
    assert "cron(21 0 * * ? *) Etc/UTC min 27 max 363" in out, out


def test_scheduled_actions_against_a_plan_without_a_schedule_are_drift(
    aws: EmulatedAws, scheduled: tuple[PlanArtifact, Path], reference_plan_path: Path, capsys
) -> None:
    plan, _ = scheduled
    aws.deploy_shape(plan)
    aws.schedule(plan)
    aws.target(min_capacity=plan.min_instances)
    code, out, _ = drift(capsys, "--plan", str(reference_plan_path.parent / FLEET_PLAN_NAME))
    assert code == 1 and "scheduled actions: deployed cron(0 0 * * ? *)" in out, out
    assert "says none" in out, out


def test_a_deployment_missing_its_schedule_is_drift(
    aws: EmulatedAws, scheduled: tuple[PlanArtifact, Path], capsys
) -> None:
    plan, path = scheduled
    aws.deploy_shape(plan)  # no scheduled actions
    code, out, _ = drift(capsys, "--plan", str(path))
    assert code == 1 and "scheduled actions: deployed (none)" in out, out


# --------------------------------------------------------------------------- what it runs


def test_a_model_running_another_image_than_the_plans_is_drift(
    aws: EmulatedAws, plan: PlanArtifact, reference_plan_path: Path, capsys
) -> None:
    aws.deploy(plan, image=OTHER_IMAGE)
    assert drift(capsys)[0] == 0  # without a plan, nothing says which image it should run
    code, out, _ = drift(capsys, "--plan", str(reference_plan_path))
    assert code == 1 and "plan-mismatch" not in out
    (line,) = [line for line in out.splitlines() if "image-mismatch" in line]
    assert plan.fingerprint is not None
    assert line.startswith("error") and f"model {ENDPOINT}-model" in line
    assert (
        f"image digest: deployed {OTHER_DIGEST}; plan {plan.plan_id} was measured on "
        f"{plan.fingerprint.image_digest}"
    ) in line


@pytest.mark.parametrize(
    ("model", "found"),
    [
        ({"model_package": PACKAGE, "network_isolation": True}, []),
        (
            {"model_package": PACKAGE[:-1] + "3", "network_isolation": True},
            [
                f"model package: deployed {PACKAGE[:-1]}3; plan d0b4a6baef69 was measured on {PACKAGE}"
            ],
        ),
        (
            {"model_package": PACKAGE, "network_isolation": False},
            ["network isolation: deployed disabled; a model package runs only network-isolated"],
        ),
    ],
    ids=["match", "another-version", "not-isolated"],
)
def test_a_package_deployment_is_drift_unless_it_runs_the_plans_package_isolated(
    plan: PlanArtifact, model: dict[str, object], found: list[str]
) -> None:
    assert plan.fingerprint is not None
    fingerprint = plan.fingerprint.model_copy(update={"model_package": PACKAGE})
    package_plan = plan.model_copy(update={"fingerprint": fingerprint})
    snapshot = running(snapshot_for(planned_values(package_plan, None)), **model)
    report = check_drift(snapshot, plan=package_plan)
    assert report.clean is not found
    assert [f.rule for f in report.findings] == [Rule.PACKAGE_MISMATCH] * len(found)
    for finding, text in zip(report.findings, found, strict=True):
        assert finding.message.startswith(text) and "\n" not in finding.message
