"""Components built in this process under Pulumi's mocks (preview=False), checked the Pulumi
way: assertions inside `Output.all(...).apply`, and a count proving that they ran."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pulumi
import pytest

from tts_bench.artifacts.plan import PlanArtifact
from tts_bench.deployment import OperatorBounds

CHECKS_RUN: list[str] = []


class Echo(pulumi.runtime.Mocks):
    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict[str, Any]]:
        name = args.inputs.get("name", args.name)
        return f"{name}-id", {"arn": f"arn:aws:mock:::{name}", **args.inputs}

    def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict[str, Any], None]:
        return {}, None


@pytest.fixture(autouse=True)
def mocks() -> None:
    # Pulumi's mocks make their futures on the main thread's loop; a test run before this one
    # may have ended with `asyncio.run`, which leaves the main thread with none.
    asyncio.set_event_loop(asyncio.new_event_loop())
    pulumi.runtime.set_mocks(Echo(), project="tts-bench", stack="test", preview=False)
    CHECKS_RUN.clear()


@pytest.mark.parametrize(("bounds", "expected"), [((1, 300), (1, 280)), ((3, 20), (3, 20))])
def test_autoscaling_carries_the_plan(
    reference_plan: PlanArtifact, bounds: tuple[int, int], expected: tuple[int, int]
) -> None:
    from components import EndpointAutoscaling, EndpointAutoscalingArgs

    plan = reference_plan

    @pulumi.runtime.test
    def build() -> pulumi.Output[Any]:
        scaling = EndpointAutoscaling(
            "speech",
            EndpointAutoscalingArgs(
                endpoint_name="speech",
                variant_name="AllTraffic",
                plan=plan,
                bounds=OperatorBounds(min_instances=bounds[0], max_instances=bounds[1]),
                image_digest=plan.fingerprint.image_digest,
                tags={},
            ),
        )

        def check(values: list[Any]) -> None:
            low, high, tracking, step, threshold = values
            assert (low, high) == expected
            assert tracking["target_value"] == plan.scaling_target_value
            assert tracking["scale_out_cooldown"] == plan.scale_out_cooldown_s
            assert tracking["disable_scale_in"] is True
            assert step["cooldown"] == plan.scale_in_cooldown_s
            assert threshold == plan.scale_in_threshold
            CHECKS_RUN.append("autoscaling")

        return pulumi.Output.all(
            scaling.target.min_capacity,
            scaling.target.max_capacity,
            scaling.target_tracking.target_tracking_scaling_policy_configuration,
            scaling.scale_in.step_scaling_policy_configuration,
            scaling.scale_in_alarm.threshold,
        ).apply(check)

    build()
    assert CHECKS_RUN == ["autoscaling"]


def test_observability_alarms_use_the_plan_and_the_container_metric_names(
    reference_plan: PlanArtifact,
) -> None:
    from components import EndpointObservability, EndpointObservabilityArgs
    from tts_bench.telemetry import FIRST_CHUNK_LATENCY, NAMESPACE, QUEUE_SATURATED

    @pulumi.runtime.test
    def build() -> pulumi.Output[Any]:
        observability = EndpointObservability(
            "speech",
            EndpointObservabilityArgs(
                endpoint_name="speech",
                variant_name="AllTraffic",
                region="us-east-1",
                plan=reference_plan,
                tags={},
            ),
        )

        def check(values: list[Any]) -> None:
            namespace, metric, threshold, queue_metric = values
            assert (namespace, metric) == (NAMESPACE, FIRST_CHUNK_LATENCY)
            assert threshold == reference_plan.first_chunk_alarm_ms
            assert queue_metric == QUEUE_SATURATED
            CHECKS_RUN.append("observability")

        return pulumi.Output.all(
            observability.first_chunk_alarm.namespace,
            observability.first_chunk_alarm.metric_name,
            observability.first_chunk_alarm.threshold,
            observability.queue_alarm.metric_name,
        ).apply(check)

    build()
    assert CHECKS_RUN == ["observability"]


def test_autoscaling_deploys_the_fleet_rules_shape(reference_plan_path) -> None:
    """Target tracking on invocations per instance with scale-in disabled, the scale-in step on
    its metric-math alarm and the burst step with its alarm, every number from the fleet plan's
    deploy shape."""
    from components import EndpointAutoscaling, EndpointAutoscalingArgs
    from tts_bench.artifacts.files import load_artifact

    plan = load_artifact(
        reference_plan_path.parent / "plan-kokoro-82m-fleet-g5xlarge-8b1b96bc.json", PlanArtifact
    )
    tracking_spec, scale_in_spec, burst_spec = plan.deploy.policies  # type: ignore[union-attr]

    @pulumi.runtime.test
    def build() -> pulumi.Output[Any]:
        scaling = EndpointAutoscaling(
            "speech",
            EndpointAutoscalingArgs(
                endpoint_name="speech",
                variant_name="AllTraffic",
                plan=plan,
                bounds=OperatorBounds(min_instances=1, max_instances=20),
                image_digest=plan.fingerprint.image_digest,
                tags={},
            ),
        )
        assert set(scaling.policies) == {"invocations-target", "scale-in", "burst"}
        assert set(scaling.alarms) == {"scale-in", "burst"}

        def check(values: list[Any]) -> None:
            tags, tracking, scale_in, burst, alarm = values
            assert tags["tts-bench:plan-rule"] == "fleet"
            assert tracking["target_value"] == tracking_spec.target_value
            # Target tracking keeps its own scale-in (small fleets), with the plan's cooldown.
            assert tracking["disable_scale_in"] is False
            assert tracking["scale_in_cooldown"] == tracking_spec.scale_in_cooldown_s == 300
            assert scale_in["adjustment_type"] == "PercentChangeInCapacity"
            assert scale_in["cooldown"] == scale_in_spec.cooldown_s
            assert [
                (
                    s.get("metric_interval_lower_bound")
                    and float(s["metric_interval_lower_bound"]),
                    float(s["metric_interval_upper_bound"]),
                    s["scaling_adjustment"],
                )
                for s in scale_in["step_adjustments"]
            ] == [(s.lower, s.upper, s.adjustment) for s in scale_in_spec.steps]
            assert tracking["predefined_metric_specification"]["predefined_metric_type"] == (
                "SageMakerVariantInvocationsPerInstance"
            )
            assert burst["adjustment_type"] == "PercentChangeInCapacity"
            assert burst["min_adjustment_magnitude"] == burst_spec.min_adjustment_magnitude == 3
            assert [
                (
                    float(s["metric_interval_lower_bound"]),
                    s.get("metric_interval_upper_bound")
                    and float(s["metric_interval_upper_bound"]),
                    s["scaling_adjustment"],
                )
                for s in burst["step_adjustments"]
            ] == [(s.lower, s.upper, s.adjustment) for s in burst_spec.steps]  # every digit
            assert alarm["threshold"] == burst_spec.alarm.threshold
            assert (alarm["period"], alarm["evaluation_periods"]) == (10, 1)
            assert alarm["comparison_operator"] == "GreaterThanOrEqualToThreshold"
            CHECKS_RUN.append("fleet")

        return pulumi.Output.all(
            scaling.target.tags,
            scaling.target_tracking.target_tracking_scaling_policy_configuration,  # type: ignore[union-attr]
            scaling.policies["scale-in"].step_scaling_policy_configuration,
            scaling.policies["burst"].step_scaling_policy_configuration,
            pulumi.Output.all(
                scaling.alarms["burst"].threshold,
                scaling.alarms["burst"].period,
                scaling.alarms["burst"].evaluation_periods,
                scaling.alarms["burst"].comparison_operator,
            ).apply(
                lambda v: dict(
                    zip(
                        ("threshold", "period", "evaluation_periods", "comparison_operator"),
                        v,
                        strict=True,
                    )
                )
            ),
        ).apply(check)

    build()
    assert CHECKS_RUN == ["fleet"]


class Recorder(Echo):
    """Echo that keeps every resource registered: (type, name, inputs)."""

    def __init__(self) -> None:
        self.resources: list[tuple[str, str, dict[str, Any]]] = []

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict[str, Any]]:
        self.resources.append((args.typ, args.name, dict(args.inputs)))
        return super().new_resource(args)


SCHEDULED_ACTION = "aws:appautoscaling/scheduledAction:ScheduledAction"


def _registered(plan: PlanArtifact, bounds: OperatorBounds) -> list[tuple[str, str, dict]]:
    from components import EndpointAutoscaling, EndpointAutoscalingArgs

    recorder = Recorder()
    pulumi.runtime.set_mocks(recorder, project="tts-bench", stack="test", preview=False)

    @pulumi.runtime.test
    def build() -> None:
        EndpointAutoscaling(
            "speech",
            EndpointAutoscalingArgs(
                endpoint_name="speech",
                variant_name="AllTraffic",
                plan=plan,
                bounds=bounds,
                image_digest="sha256:" + "0" * 64,
                tags={},
            ),
        )

    build()
    return recorder.resources


def test_a_scheduled_plan_deploys_a_scheduled_action_per_step(
    scheduled_fleet_plan: PlanArtifact,
) -> None:
    """Each step a daily cron in UTC at its time on the variant's target, MinCapacity the
    step's clamped into the operator's bounds (27 → 20 here), MaxCapacity the target's."""
    plan = scheduled_fleet_plan
    resources = _registered(plan, OperatorBounds(min_instances=1, max_instances=20))
    actions = sorted(
        (inputs for typ, _, inputs in resources if typ == SCHEDULED_ACTION),
        key=lambda a: a["name"],
    )
    assert [
        (a["name"], a["schedule"], a["timezone"], a["scalableTargetAction"]) for a in actions
    ] == [
        ("speech-AllTraffic-schedule-0000", "cron(0 0 * * ? *)", "Etc/UTC",
         {"minCapacity": 1, "maxCapacity": 20}),
        ("speech-AllTraffic-schedule-0021", "cron(21 0 * * ? *)", "Etc/UTC",
         {"minCapacity": 20, "maxCapacity": 20}),
        ("speech-AllTraffic-schedule-0139", "cron(39 1 * * ? *)", "Etc/UTC",
         {"minCapacity": 1, "maxCapacity": 20}),
    ]  # fmt: skip
    assert [s.min_capacity for s in plan.schedule.steps] == [1, 27, 1]  # type: ignore[union-attr]
    assert {a["resourceId"] for a in actions} == {"endpoint/speech/variant/AllTraffic"}
    assert {a["scalableDimension"] for a in actions} == {"sagemaker:variant:DesiredInstanceCount"}


def test_a_plan_without_a_schedule_deploys_as_before(
    reference_plan_path, scheduled_fleet_plan: PlanArtifact
) -> None:
    """No scheduled action, and every other resource exactly as the scheduled plan's twin
    registers it but for the plan id: the schedule adds its actions and changes nothing else."""
    from tts_bench.artifacts.files import load_artifact

    plan = load_artifact(
        reference_plan_path.parent / "plan-kokoro-82m-fleet-g5xlarge-8b1b96bc.json", PlanArtifact
    )
    assert plan.schedule is None
    bounds = OperatorBounds(min_instances=1, max_instances=20)
    without = _registered(plan, bounds)
    assert SCHEDULED_ACTION not in {typ for typ, _, _ in without}
    # the component, the target, three policies, the scale-in and burst alarms
    assert len(without) == 7
    scheduled = [r for r in _registered(scheduled_fleet_plan, bounds) if r[0] != SCHEDULED_ACTION]

    def comparable(
        resources: list[tuple[str, str, dict]], plan_id: str
    ) -> list[tuple[str, str, str]]:
        return sorted(
            (typ, name, json.dumps(inputs, sort_keys=True, default=str).replace(plan_id, "ID"))
            for typ, name, inputs in resources
        )

    assert comparable(scheduled, scheduled_fleet_plan.plan_id) == comparable(without, plan.plan_id)


ALARM = "aws:cloudwatch/metricAlarm:MetricAlarm"


def test_the_fleet_plans_scale_in_alarm_is_its_metric_math(reference_plan_path) -> None:
    """The scale-in alarm reads `metric_math.queries` (m1, m2, n, e; only e returned) and no
    metric of its own; the burst alarm stays a plain metric alarm."""
    from tts_bench.artifacts.files import load_artifact
    from tts_bench.deployment import metric_queries_from_pulumi
    from tts_bench.planning.aws import metric_math

    plan = load_artifact(
        reference_plan_path.parent / "plan-kokoro-82m-fleet-g5xlarge-8b1b96bc.json", PlanArtifact
    )
    alarms = {
        inputs["name"]: inputs
        for typ, _, inputs in _registered(plan, OperatorBounds(min_instances=1, max_instances=20))
        if typ == ALARM
    }
    scale_in = alarms["speech-AllTraffic-low-concurrency"]
    queries = scale_in["metricQueries"]
    assert [(q["id"], q["returnData"]) for q in queries] == [
        ("m1", False), ("m2", False), ("n", False), ("e", True),
    ]  # fmt: skip
    assert [q["metric"]["metricName"] for q in queries[:2]] == [
        "Invocations", "InvocationsPerInstance",
    ]  # fmt: skip
    assert {q["metric"]["stat"] for q in queries[:2]} == {"Sum"}
    assert {q["metric"]["period"] for q in queries[:2]} == {60}
    assert queries[0]["metric"]["dimensions"] == {
        "EndpointName": "speech", "VariantName": "AllTraffic",
    }  # fmt: skip
    spec = plan.deploy.policies[1].alarm  # type: ignore[union-attr]
    math = metric_math.FleetMath(20)
    assert queries[3]["expression"] == metric_math.expression(math, spec.threshold)
    assert metric_math.parse(metric_queries_from_pulumi(queries)) == (math, 60)
    assert not {"metricName", "namespace", "statistic", "period", "dimensions"} & set(scale_in)
    assert (scale_in["threshold"], scale_in["evaluationPeriods"]) == (spec.threshold, 3)
    assert scale_in["comparisonOperator"] == "LessThanThreshold"
    assert "Invocations / InvocationsPerInstance" in scale_in["alarmDescription"]
    burst = alarms["speech-AllTraffic-burst-concurrency"]
    assert "metricQueries" not in burst
    assert (burst["metricName"], burst["period"]) == ("ConcurrentRequestsPerModel", 10)
