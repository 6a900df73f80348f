"""`tts-bench validate` against the emulator, and the pure comparison it is built on."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.aws.emulated import ENDPOINT, EmulatedAws
from tests.aws.snapshots import OTHER_DIGEST, OTHER_IMAGE, PACKAGE, running, snapshot_for
from tests.conftest import REFERENCE_PLAN
from tts_bench.artifacts.files import load_artifact
from tts_bench.artifacts.plan import PlanArtifact
from tts_bench.aws.validate import Outcome, Setting, compare_to_plan, planned_values
from tts_bench.cli import main
from tts_bench.deployment import (
    OperatorBounds,
    resource_id,
    scale_in_alarm_name,
)
from tts_bench.telemetry import ENV_MAX_QUEUE_DEPTH

REFERENCE = load_artifact(REFERENCE_PLAN, PlanArtifact)
# The settings the published plan deploys (a fleet plan has others: `planned_values`).
PUBLISHED_SETTINGS = list(planned_values(REFERENCE, None))


@pytest.fixture
def plan(reference_plan_path: Path) -> PlanArtifact:
    return load_artifact(reference_plan_path, PlanArtifact)


def validate(capsys: pytest.CaptureFixture[str], plan_path: Path, *args: str):
    code = main(["validate", "--plan", str(plan_path), "--endpoint", ENDPOINT, *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_a_matching_deployment_validates(
    aws: EmulatedAws, plan: PlanArtifact, reference_plan_path: Path, capsys
) -> None:
    aws.deploy(plan)
    code, out, _ = validate(capsys, reference_plan_path)
    assert code == 0
    rows = out.splitlines()[1:-1]
    assert len(rows) == len(PUBLISHED_SETTINGS) and all(row.endswith("match") for row in rows)
    assert out.splitlines()[-1].startswith(
        f"validate: all {len(PUBLISHED_SETTINGS)} settings match plan d0b4a6baef69"
    )


MISMATCHES: list[tuple[str, dict[str, float | str], Setting, str, str]] = [
    # (case, deploy overrides, setting, deployed, planned)
    ("target-value", {"target_value": 40.0}, Setting.TARGET_VALUE, "40", "37.5"),
    ("threshold", {"threshold": 20.0}, Setting.SCALE_IN_THRESHOLD, "20", "25"),
    ("scale-out-cooldown", {"scale_out": 60}, Setting.SCALE_OUT_COOLDOWN, "60", "30"),
    ("scale-in-cooldown", {"scale_in": 300}, Setting.SCALE_IN_COOLDOWN, "300", "960"),
    ("min", {"min": 2}, Setting.MIN_INSTANCES, "2", "1"),
    ("max", {"max": 20}, Setting.MAX_INSTANCES, "20", "280"),
    ("queue-depth", {"queue": 64}, Setting.QUEUE_MAX_DEPTH, "64", "50"),
    # The right threshold read with another statistic, or over another period, is another number.
    ("statistic", {"statistic": "Average"}, Setting.SCALE_IN_STATISTIC, "Average", "Maximum"),
    ("period", {"period": 60}, Setting.SCALE_IN_PERIOD, "60", "10"),
    # What AWS's own target-tracking alarm evaluates must be what the target's ratio is in.
    (
        "target-statistic",
        {"tracking_statistic": "Average"},
        Setting.TARGET_STATISTIC,
        "Average",
        "Maximum",
    ),
]


def _deploy_with(aws: EmulatedAws, plan: PlanArtifact, overrides: dict[str, float | str]) -> None:
    """The stack's shape for `plan`, with some values replaced."""
    values = {
        "queue": plan.queue_max_depth,
        "min": plan.min_instances,
        "max": plan.max_instances,
        "target_value": plan.scaling_target_value,
        "scale_out": plan.scale_out_cooldown_s,
        "scale_in": plan.scale_in_cooldown_s,
        "threshold": plan.scale_in_threshold,
        "statistic": plan.scale_in_units.statistic,
        "period": plan.scale_in_units.period_s,
        "tracking_statistic": plan.target_units.statistic,
    } | overrides
    aws.endpoint(env={ENV_MAX_QUEUE_DEPTH: str(int(values["queue"]))})
    aws.target(min_capacity=int(values["min"]), max_capacity=int(values["max"]))
    aws.tracking_policy(
        target_value=float(values["target_value"]),
        scale_out_cooldown_s=int(values["scale_out"]),
        statistic=str(values["tracking_statistic"]),
    )
    arn = aws.step_policy(cooldown_s=int(values["scale_in"]))
    aws.alarm(
        scale_in_alarm_name(ENDPOINT),
        threshold=float(values["threshold"]),
        policy_arn=arn,
        statistic=str(values["statistic"]),
        period_s=int(values["period"]),
    )


@pytest.mark.parametrize(
    ("overrides", "setting", "deployed", "planned"),
    [case[1:] for case in MISMATCHES],
    ids=[case[0] for case in MISMATCHES],
)
def test_each_mismatching_value_is_named(
    aws: EmulatedAws,
    plan: PlanArtifact,
    reference_plan_path: Path,
    capsys,
    overrides: dict[str, object],
    setting: Setting,
    deployed: str,
    planned: str,
) -> None:
    _deploy_with(aws, plan, overrides)
    code, out, _ = validate(capsys, reference_plan_path)
    assert code == 1
    verdicts = {line[:23].strip(): line.split()[-1] for line in out.splitlines()[1:-1]}
    assert [name for name, verdict in verdicts.items() if verdict != "match"] == [setting.value]
    assert f"{setting.value} deployed {deployed}, plan {planned}" in out.splitlines()[-1]


def test_bounds_clamp_the_plan_before_comparing(
    aws: EmulatedAws, plan: PlanArtifact, reference_plan_path: Path, capsys
) -> None:
    _deploy_with(aws, plan, {"max": 20})
    assert validate(capsys, reference_plan_path, "--bounds", "1:20")[0] == 0
    code, out, _ = validate(capsys, reference_plan_path, "--bounds", "1:30", "--json")
    rows = {row["setting"]: row for row in json.loads(out)}
    assert code == 1
    assert rows["max instances"] == {
        "setting": "max instances",
        "deployed": 20,
        "planned": 30,
        "outcome": "mismatch",
        "where": f"scalable target {resource_id(ENDPOINT)}",
    }


def test_nothing_deployed_is_missing_not_matching(
    aws: EmulatedAws, reference_plan_path: Path, capsys
) -> None:
    aws.endpoint()
    code, out, _ = validate(capsys, reference_plan_path)
    assert code == 1
    # The Model runs the image the plan was measured on (its first row); nothing else is there.
    assert [line.split()[-1] for line in out.splitlines()[1:-1]] == ["match"] + ["missing"] * (
        len(PUBLISHED_SETTINGS) - 1
    )


def test_bounds_that_disable_scaling_are_refused(
    aws: EmulatedAws, reference_plan_path: Path, capsys
) -> None:
    code, out, err = validate(capsys, reference_plan_path, "--bounds", "3:3")
    assert (code, out) == (2, "")
    assert err.count("\n") == 1 and "disable scaling" in err


def test_malformed_bounds_are_a_usage_error(reference_plan_path: Path, capsys) -> None:
    with pytest.raises(SystemExit) as exit_:
        validate(capsys, reference_plan_path, "--bounds", "5:2")
    assert exit_.value.code == 2
    assert "max_instances (2) is below min_instances (5)" in capsys.readouterr().err


# --------------------------------------------------------------------------- pure


@given(
    low=st.integers(1, 50),
    span=st.integers(0, 300),
    bound_low=st.integers(1, 50),
    bound_span=st.integers(1, 300),
    target=st.floats(0.5, 500, allow_nan=False),
)
def test_a_deployment_of_the_clamped_plan_always_matches(
    low: int, span: int, bound_low: int, bound_span: int, target: float
) -> None:
    varied = REFERENCE.model_copy(
        update={"min_instances": low, "max_instances": low + span, "scaling_target_value": target}
    )
    bounds = OperatorBounds(min_instances=bound_low, max_instances=bound_low + bound_span)
    rows = compare_to_plan(snapshot_for(planned_values(varied, bounds)), varied, bounds)
    assert [r.outcome for r in rows] == [Outcome.MATCH] * len(PUBLISHED_SETTINGS)
    by_setting = {r.setting: r.deployed for r in rows}
    deployed_min = by_setting[Setting.MIN_INSTANCES]
    deployed_max = by_setting[Setting.MAX_INSTANCES]
    assert bound_low <= deployed_min <= deployed_max <= bound_low + bound_span  # type: ignore[operator]


FLEET_PLAN = REFERENCE_PLAN.parent / "plan-kokoro-82m-fleet-g5xlarge-8b1b96bc.json"


@pytest.mark.parametrize(
    ("edit", "setting"),
    [
        ({}, None),
        ({"invocations-target": {"TargetValue": 500.0}}, Setting.TARGET_VALUE),
        ({"scale-in": {"Cooldown": 60}}, Setting.SCALE_IN_COOLDOWN),
        ({"scale-in": {"AdjustmentType": "ChangeInCapacity"}}, Setting.SCALE_IN_STEP),
        (
            {
                "invocations-target": {
                    "PredefinedMetricSpecification": {
                        "PredefinedMetricType": "SageMakerVariantConcurrentRequestsPerModelHighResolution"
                    }
                }
            },
            Setting.TARGET_METRIC,
        ),
        ({"invocations-target.AlarmHigh": {"Period": 300}}, Setting.TARGET_PERIOD),
        # The alarm's own threshold; the one inside its expression (what a fleet of one reads)
        # is the plan's still.
        ({"scale-in.alarm": {"Threshold": 1.0}}, Setting.SCALE_IN_THRESHOLD),
        ({"scale-in.alarm": {"DatapointsToAlarm": 2}}, Setting.SCALE_IN_DATAPOINTS),
        ({"burst.alarm": {"Threshold": 1.0}}, Setting.BURST_THRESHOLD),
        ({"burst.alarm": {"Statistic": "Average"}}, Setting.BURST_STATISTIC),
        (
            {"burst.alarm": {"EvaluationPeriods": 3, "DatapointsToAlarm": 3}},
            Setting.BURST_DATAPOINTS,
        ),
        ({"burst": {"Cooldown": 30}}, Setting.BURST_COOLDOWN),
        ({"burst": {"AdjustmentType": "ChangeInCapacity"}}, Setting.BURST_STEP),
        ({"burst": {"MinAdjustmentMagnitude": 1}}, Setting.BURST_STEP),
        # Target tracking's own scale-in, for fleets under the step's minimum.
        ({"invocations-target": {"ScaleInCooldown": 60}}, Setting.TRACKING_SCALE_IN_COOLDOWN),
        ({"invocations-target.AlarmLow": {"Threshold": 1.0}}, Setting.TRACKING_SCALE_IN_THRESHOLD),
        ({"invocations-target.AlarmLow": {"Period": 300}}, Setting.TRACKING_SCALE_IN_PERIOD),
    ],
)
def test_every_construct_of_a_fleet_plan_is_compared(
    aws: EmulatedAws, capsys, edit: dict[str, Any], setting: Setting | None
) -> None:
    plan = load_artifact(FLEET_PLAN, PlanArtifact)
    aws.deploy_shape(plan, edit=edit)
    code, out, _ = validate(capsys, FLEET_PLAN, "--json")
    verdicts = {row["setting"]: row["outcome"] for row in json.loads(out)}
    expected = [s.value for s in planned_values(plan, None)]
    assert list(verdicts) == expected
    assert {Setting.BURST_STEP.value, Setting.TARGET_METRIC.value} <= set(verdicts)
    # Its scale-in is a step on the metric-math alarm, compared with the plan's expression, and
    # target tracking's own below the step's minimum fleet.
    assert {Setting.SCALE_IN_STEP.value, Setting.SCALE_IN_EXPRESSION.value} <= set(verdicts)
    assert {
        Setting.TRACKING_SCALE_IN_COOLDOWN.value,
        Setting.TRACKING_SCALE_IN_THRESHOLD.value,
    } <= set(verdicts)
    if setting is None:
        assert code == 0 and set(verdicts.values()) == {"match"}, out
    else:
        assert code == 1
        assert [name for name, v in verdicts.items() if v != "match"] == [setting.value], out


def _fleet_rows(aws: EmulatedAws, plan: PlanArtifact) -> dict[Setting, Any]:
    from tts_bench.aws.deployed import read_snapshot
    from tts_bench.aws.session import AwsSession

    snapshot = read_snapshot(AwsSession.from_environment(), ENDPOINT)
    return {r.setting: r for r in compare_to_plan(snapshot, plan)}


def test_the_fleet_plans_scale_in_settings_read_from_its_metric_queries(aws: EmulatedAws) -> None:
    plan = load_artifact(FLEET_PLAN, PlanArtifact)
    aws.deploy_shape(plan)
    rows = _fleet_rows(aws, plan)
    assert all(r.ok for r in rows.values())
    read = {s: rows[s].deployed for s in rows if s.value.startswith("scale-in")}
    assert read == {
        Setting.SCALE_IN_THRESHOLD: plan.scaling_target_value,
        Setting.SCALE_IN_COOLDOWN: 300,
        Setting.SCALE_IN_STATISTIC: "Sum",
        Setting.SCALE_IN_PERIOD: 60,
        Setting.SCALE_IN_DATAPOINTS: 3,
        Setting.SCALE_IN_EXPRESSION: "IF(n >= 20, m1 / (n - 1), 826.54426446)",
        Setting.SCALE_IN_STEP: rows[Setting.SCALE_IN_STEP].planned,
    }
    assert rows[Setting.SCALE_IN_EXPRESSION].where == (
        f"alarm {ENDPOINT}-AllTraffic-low-concurrency"
    )


@pytest.mark.parametrize(
    ("math", "period_s", "expected"),
    [
        # Another min fleet: the expression differs, all else matches.
        (
            10, 60,
            {Setting.SCALE_IN_EXPRESSION: "IF(n >= 10, m1 / (n - 1), 826.54426446) "
             f"(60 s, on {ENDPOINT}/AllTraffic)"},
        ),
        (2, 60, {Setting.SCALE_IN_EXPRESSION: None}),
        # Another period: its datapoints are other numbers, and its queries not the plan's.
        (20, 300, {Setting.SCALE_IN_PERIOD: 300, Setting.SCALE_IN_EXPRESSION: None}),
    ],
)  # fmt: skip
def test_a_deployed_scale_in_expression_other_than_the_plans_is_reported(
    aws: EmulatedAws,
    math: int,
    period_s: int,
    expected: dict[Setting, Any],
    capsys: pytest.CaptureFixture[str],
) -> None:
    from tests.aws.emulated import fleet_queries
    from tts_bench.planning.aws.metric_math import FleetMath

    plan = load_artifact(FLEET_PLAN, PlanArtifact)
    spec = plan.deploy.policies[1].alarm  # type: ignore[union-attr]
    queries = fleet_queries(spec.model_copy(update={"period_s": period_s}), math=FleetMath(math))
    aws.deploy_shape(plan, edit={"scale-in.alarm": {"Metrics": queries}})
    rows = _fleet_rows(aws, plan)
    differ = {s: r for s, r in rows.items() if not r.ok}
    assert set(differ) == set(expected)
    for setting, deployed in expected.items():
        assert differ[setting].outcome is Outcome.MISMATCH
        if deployed is not None:
            assert differ[setting].deployed == deployed
    code, out, _ = validate(capsys, FLEET_PLAN)
    assert code == 1 and "scale-in expression" in out


def test_a_plain_alarm_where_the_plan_has_metric_math_and_the_reverse_are_reported(
    aws: EmulatedAws, plan: PlanArtifact
) -> None:
    """The same name, statistic and period, read from one metric: only the expression row
    tells them apart, and it does; a metric-math alarm where the published plan's reads one
    metric differs from that plan's "none"."""
    from tests.aws.emulated import fleet_queries

    fleet = load_artifact(FLEET_PLAN, PlanArtifact)
    aws.deploy_shape(fleet)
    name = scale_in_alarm_name(ENDPOINT)
    cw = aws.client("cloudwatch")
    (alarm,) = cw.describe_alarms(AlarmNames=[name])["MetricAlarms"]
    cw.put_metric_alarm(
        AlarmName=name, Namespace="AWS/SageMaker", MetricName="InvocationsPerInstance",
        Dimensions=[{"Name": "EndpointName", "Value": ENDPOINT},
                    {"Name": "VariantName", "Value": "AllTraffic"}],
        Statistic="Sum", Period=60, EvaluationPeriods=3, DatapointsToAlarm=3,
        Threshold=alarm["Threshold"], ComparisonOperator="LessThanThreshold",
        AlarmActions=alarm["AlarmActions"],
    )  # fmt: skip
    rows = _fleet_rows(aws, fleet)
    assert [s for s, r in rows.items() if not r.ok] == [Setting.SCALE_IN_EXPRESSION]
    assert rows[Setting.SCALE_IN_EXPRESSION].deployed == "InvocationsPerInstance alone"
    assert rows[Setting.SCALE_IN_STATISTIC].deployed == "Sum"

    aws.deploy(plan)  # the published plan, its scale-in alarm then made metric math
    (alarm,) = cw.describe_alarms(AlarmNames=[name])["MetricAlarms"]
    queries = fleet_queries(fleet.deploy.policies[1].alarm)  # type: ignore[union-attr]
    cw.put_metric_alarm(
        AlarmName=name, Metrics=queries, EvaluationPeriods=alarm["EvaluationPeriods"],
        Threshold=alarm["Threshold"], ComparisonOperator=alarm["ComparisonOperator"],
        AlarmActions=alarm["AlarmActions"],
    )  # fmt: skip
    rows = _fleet_rows(aws, plan)
    expression = rows[Setting.SCALE_IN_EXPRESSION]
    assert (expression.planned, expression.outcome) == ("none", Outcome.MISMATCH)
    assert rows[Setting.SCALE_IN_STATISTIC].deployed == "Sum"
    assert not rows[Setting.SCALE_IN_STATISTIC].ok and not rows[Setting.SCALE_IN_PERIOD].ok


def test_a_scheduled_plans_min_is_the_step_in_effect_and_its_actions_a_row(
    aws: EmulatedAws, reference_plan_path: Path
) -> None:
    """Steps 00:00 → 1, 00:21 → 27, 01:39 → 1: read at 00:30 UTC the plan's min is 27, at
    01:45 it is 1; the scheduled actions are one row, matched when deployed as planned."""
    from datetime import UTC, datetime

    from tts_bench.aws.deployed import read_snapshot
    from tts_bench.aws.session import AwsSession
    from tts_bench.planning.schedule.attach import with_schedule

    fleet = load_artifact(
        reference_plan_path.parent / "plan-kokoro-82m-fleet-g5xlarge-8b1b96bc.json", PlanArtifact
    )
    plan = with_schedule(fleet, "a day", [10.0] * 60 + [300.0] * 20 + [10.0] * 80)
    aws.deploy_shape(plan)
    aws.schedule(plan)
    snapshot = read_snapshot(AwsSession.from_environment(), ENDPOINT)
    for hour_minute, planned_min in (((0, 30), 27), ((1, 45), 1), ((23, 59), 1)):
        at = datetime(2026, 12, 4, *hour_minute, tzinfo=UTC)
        rows = {
            r.setting: r for r in compare_to_plan(snapshot.model_copy(update={"read_at": at}), plan)
        }
        assert rows[Setting.MIN_INSTANCES].planned == planned_min
        assert rows[Setting.SCHEDULE].outcome is Outcome.MATCH
    assert rows[Setting.SCHEDULE].planned == (
        "cron(0 0 * * ? *) Etc/UTC min 1 max 363; cron(21 0 * * ? *) Etc/UTC min 27 max 363; "
        "cron(39 1 * * ? *) Etc/UTC min 1 max 363"
    )


def test_a_weekly_steps_min_holds_over_the_weekend() -> None:
    """A weekly schedule's step on Friday 20:00 still holds on Sunday noon, 40 h later."""
    from datetime import UTC, datetime

    from tts_bench.aws.validate import scheduled_min
    from tts_bench.planning.aws.scheduled import ScheduledAction

    actions = [
        ScheduledAction("mon", "cron(0 6 ? * MON *)", "Etc/UTC", 3, 20),
        ScheduledAction("fri", "cron(0 20 ? * FRI *)", "Etc/UTC", 8, 20),
    ]
    sunday_noon = datetime(2026, 12, 6, 12, tzinfo=UTC)  # 2026-12-04 is a Friday
    assert scheduled_min(actions, 1, 20, sunday_noon) == 8
    assert scheduled_min(actions, 1, 20, datetime(2026, 12, 7, 7, tzinfo=UTC)) == 3


# --------------------------------------------------------------------------- what it runs


def test_another_image_than_the_plan_was_measured_on_is_named(
    aws: EmulatedAws, plan: PlanArtifact, reference_plan_path: Path, capsys
) -> None:
    aws.deploy(plan, image=OTHER_IMAGE)
    code, out, _ = validate(capsys, reference_plan_path)
    assert code == 1
    verdicts = {line[:23].strip(): line.split()[-1] for line in out.splitlines()[1:-1]}
    assert [name for name, verdict in verdicts.items() if verdict != "match"] == ["image digest"]
    assert plan.fingerprint is not None
    summary = out.splitlines()[-1]
    assert f"image digest deployed {OTHER_DIGEST}, plan {plan.fingerprint.image_digest}" in summary


def package_plan() -> PlanArtifact:
    """The reference plan as if measured on a vendor's model package."""
    assert REFERENCE.fingerprint is not None
    fingerprint = REFERENCE.fingerprint.model_copy(update={"model_package": PACKAGE})
    return REFERENCE.model_copy(update={"fingerprint": fingerprint})


@pytest.mark.parametrize(
    ("model", "differs"),
    [
        ({"model_package": PACKAGE, "network_isolation": True}, []),
        (
            {"model_package": PACKAGE[:-1] + "3", "network_isolation": True},
            [(Setting.MODEL_PACKAGE, PACKAGE[:-1] + "3", PACKAGE)],
        ),
        (
            {"model_package": PACKAGE, "network_isolation": False},
            [(Setting.NETWORK_ISOLATION, "disabled", "enabled")],
        ),
        (
            {"image": OTHER_IMAGE, "network_isolation": False},
            [
                (Setting.MODEL_PACKAGE, f"image {OTHER_DIGEST}", PACKAGE),
                (Setting.NETWORK_ISOLATION, "disabled", "enabled"),
            ],
        ),
    ],
    ids=["match", "another-version", "not-isolated", "an-image"],
)
def test_a_package_plan_is_compared_with_the_package_the_model_names(
    model: dict[str, Any], differs: list[tuple[Setting, str, str]]
) -> None:
    plan = package_plan()
    rows = compare_to_plan(running(snapshot_for(planned_values(plan, None)), **model), plan)
    settings = [r.setting for r in rows]
    # The vendor's container reads no bound of ours; a package plan names no image to run.
    assert Setting.QUEUE_MAX_DEPTH not in settings and Setting.IMAGE_DIGEST not in settings
    assert settings[:2] == [Setting.MODEL_PACKAGE, Setting.NETWORK_ISOLATION]
    assert [(r.setting, r.deployed, r.planned) for r in rows if not r.ok] == differs


def test_an_image_plan_names_the_package_a_model_runs_instead() -> None:
    snapshot = running(snapshot_for(planned_values(REFERENCE, None)), model_package=PACKAGE)
    (row,) = [r for r in compare_to_plan(snapshot, REFERENCE) if not r.ok]
    assert REFERENCE.fingerprint is not None
    assert (row.setting, row.deployed, row.planned) == (
        Setting.IMAGE_DIGEST,
        f"model package {PACKAGE}",
        REFERENCE.fingerprint.image_digest,
    )
