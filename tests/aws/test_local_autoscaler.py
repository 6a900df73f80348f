"""The local cloud's Autoscaler on the fleet rule's constructs, against moto, with the metric
windows driven through `VariantMetrics` as the fleet and the runtime drive them (no instance
processes: what is under test is which alarms exist, when they fire and what they ask for)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from tests.aws.emulated import ENDPOINT, EmulatedAws
from tests.conftest import REFERENCE_PLAN
from tts_bench.artifacts.files import load_artifact
from tts_bench.artifacts.plan import PlanArtifact
from tts_bench.deployment import DEFAULT_VARIANT
from tts_bench.local_cloud.cloudwatch.autoscaling import Autoscaler
from tts_bench.local_cloud.cloudwatch.metrics import VariantMetrics

FLEET_PLAN = REFERENCE_PLAN.parent / "plan-kokoro-82m-fleet-g5xlarge-8b1b96bc.json"
START = 1_800_000_000.0  # a minute boundary


class Windows:
    """Closes 10 s windows of chosen load, letting the Autoscaler evaluate after each."""

    def __init__(self, aws: EmulatedAws, scaler: Autoscaler, metrics: VariantMetrics) -> None:
        self.aws, self.scaler, self.metrics, self.start = aws, scaler, metrics, START

    def desired(self) -> int:
        described = self.aws.client("sagemaker").describe_endpoint(EndpointName=ENDPOINT)
        return int(described["ProductionVariants"][0]["DesiredInstanceCount"])

    def run(
        self, seconds: float, per_instance_minute: float, in_flight_per_instance: float
    ) -> None:
        for _ in range(round(seconds / 10)):
            serving = self.desired()
            self.metrics.observe_concurrency(round(in_flight_per_instance * serving), serving)
            for _ in range(round(per_instance_minute * serving / 6)):
                self.metrics.record_arrival()
            self.metrics.close_window(self.start)
            self.scaler.evaluate(self.start)
            self.start += 10


@pytest.fixture
def windows(aws: EmulatedAws) -> Windows:
    aws.deploy_shape(load_artifact(FLEET_PLAN, PlanArtifact))
    metrics = VariantMetrics()
    scaler = Autoscaler(aws.client, metrics, ENDPOINT, DEFAULT_VARIANT, 1.0, lambda _line: None)
    scaler.reload()
    return Windows(aws, scaler, metrics)


def test_target_tracking_on_invocations_creates_awss_alarms_and_sizes_proportionally(
    windows: Windows,
) -> None:
    plan = load_artifact(FLEET_PLAN, PlanArtifact)
    target = plan.scaling_target_value
    alarms = {
        a["AlarmName"]: a
        for a in windows.aws.client("cloudwatch").describe_alarms()["MetricAlarms"]
    }
    high = next(a for n, a in alarms.items() if "-AlarmHigh-" in n)
    low = next(a for n, a in alarms.items() if "-AlarmLow-" in n)
    assert (high["MetricName"], high["Statistic"], high["Period"], high["EvaluationPeriods"]) == (
        "InvocationsPerInstance", "Sum", 60, 3,
    )  # fmt: skip
    assert (low["Period"], low["EvaluationPeriods"]) == (60, 15)
    assert low["Threshold"] == pytest.approx(0.9 * target)
    assert windows.desired() == 2
    # 1.5 × the target: three one-minute datapoints over it, published a minute late.
    windows.run(180, 1.5 * target, 1.0)
    assert windows.desired() == 2
    windows.run(60, 1.5 * target, 1.0)
    assert windows.desired() == math.ceil(2 * 1.5)


def test_its_own_scale_in_waits_for_fifteen_low_minutes_and_lands_at_the_target(
    windows: Windows,
) -> None:
    target = load_artifact(FLEET_PLAN, PlanArtifact).scaling_target_value
    windows.aws.client("sagemaker").update_endpoint_weights_and_capacities(
        EndpointName=ENDPOINT,
        DesiredWeightsAndCapacities=[
            {"VariantName": DEFAULT_VARIANT, "DesiredInstanceCount": 10, "DesiredWeight": 1.0}
        ],
    )
    windows.run(14 * 60, 0.3 * target, 0.3)
    assert windows.desired() == 10  # 15 datapoints below 90 % are not in yet
    windows.run(3 * 60, 0.3 * target, 0.3)
    assert windows.desired() == math.ceil(10 * 0.3)


def test_the_burst_step_fires_on_one_high_resolution_datapoint(windows: Windows) -> None:
    plan = load_artifact(FLEET_PLAN, PlanArtifact)
    burst = plan.deploy.policies[1]  # type: ignore[union-attr]
    windows.run(10, 0.5 * plan.scaling_target_value, 1.0)
    assert windows.desired() == 2
    windows.run(10, 0.5 * plan.scaling_target_value, burst.alarm.threshold + 1)
    # +30 % of 2 is less than one instance: MinAdjustmentMagnitude makes it three.
    assert burst.min_adjustment_magnitude == 3
    assert windows.desired() == 2 + 3
    windows.run(30, 0.5 * plan.scaling_target_value, burst.alarm.threshold + 1)
    assert windows.desired() == 5  # its cooldown holds it


def test_what_an_evaluation_records_is_stamped_a_cloudwatch_delay_after_its_window(
    aws: EmulatedAws,
) -> None:
    """The evaluation runs whenever this thread gets there (here: years of the cloud's clock
    after START); its alarm change and its scaling activity are stamped at the instant it is
    modelled at, the window's end plus the delay the cloud publishes after, and so read the
    same on a loaded machine as on an idle one."""
    aws.deploy_shape(load_artifact(FLEET_PLAN, PlanArtifact))
    metrics = VariantMetrics()
    scaler = Autoscaler(
        aws.client, metrics, ENDPOINT, DEFAULT_VARIANT, 1.0, lambda _line: None, delay_s=5.0
    )
    scaler.reload()
    windows = Windows(aws, scaler, metrics)
    plan = load_artifact(FLEET_PLAN, PlanArtifact)
    burst = plan.deploy.policies[1]  # type: ignore[union-attr]
    windows.run(10, 0.5 * plan.scaling_target_value, 1.0)
    windows.run(10, 0.5 * plan.scaling_target_value, burst.alarm.threshold + 1)
    assert windows.desired() == 5
    (activity,) = scaler.history.activities()
    assert activity.started_s == START + 20 + 5
    fired = [t for t in scaler.history.transitions() if t.new_state == "ALARM"]
    assert [t.at_s for t in fired] == [START + 20 + 5]
    assert {t.at_s for t in scaler.history.transitions()} <= {START + 10 + 5, START + 20 + 5}


def test_the_chain_reads_what_the_local_cloud_publishes(tmp_path: Path) -> None:
    """InvocationsPerInstance is published per window as each invocation's 1/N."""
    from tts_bench.local_cloud.cloudwatch.metrics import metric_data

    metrics = VariantMetrics()
    metrics.observe_concurrency(4, 4)
    for _ in range(6):
        metrics.record_arrival()
    metrics.observe_concurrency(2, 2)
    metrics.record_arrival()  # counted on arrival, whatever the container answers
    metrics.record_invocation(0.1, 503)
    figures = metrics.close_window(START)
    assert figures.invocations_per_instance == pytest.approx(6 / 4 + 1 / 2)
    assert figures.answered == 1 and figures.errors_5xx == 1
    data = {d["MetricName"]: d for d in metric_data(figures, ENDPOINT, DEFAULT_VARIANT)}
    assert data["InvocationsPerInstance"]["Value"] == pytest.approx(2.0)


def test_a_curve_request_counts_for_the_requests_it_stands_for() -> None:
    """On a slowed, compressed cloud each request stands for S × K of the modelled fleet's, so
    the minute's count per instance reads what that fleet's would at the same load."""
    metrics = VariantMetrics(request_weight=80.0)
    metrics.observe_concurrency(0, 4)
    for _ in range(3):
        metrics.record_arrival()
    figures = metrics.close_window(START)
    assert figures.invocations == 240 and figures.invocations_per_instance == pytest.approx(60)
    assert figures.answered == 0


def _schedule(windows: Windows, name: str, cron: str, low: int) -> None:
    windows.aws.client("application-autoscaling").put_scheduled_action(
        ServiceNamespace="sagemaker",
        ResourceId=f"endpoint/{ENDPOINT}/variant/{DEFAULT_VARIANT}",
        ScalableDimension="sagemaker:variant:DesiredInstanceCount",
        ScheduledActionName=name,
        Schedule=cron,
        Timezone="Etc/UTC",
        ScalableTargetAction={"MinCapacity": low, "MaxCapacity": 363},
    )


def _target(windows: Windows) -> tuple[int, int]:
    (target,) = windows.aws.client("application-autoscaling").describe_scalable_targets(
        ServiceNamespace="sagemaker"
    )["ScalableTargets"]
    return target["MinCapacity"], target["MaxCapacity"]


def test_scheduled_actions_run_at_their_time_on_the_clouds_clock(windows: Windows) -> None:
    """START is 08:00 UTC. At 08:02 the minimum becomes 6 and the fleet scales out to it; at
    08:05 it drops to 1 and nothing is removed (the policies scale in, later)."""
    plan = load_artifact(FLEET_PLAN, PlanArtifact)
    _schedule(windows, "up", "cron(2 8 * * ? *)", 6)
    _schedule(windows, "down", "cron(5 8 * * ? *)", 1)
    windows.scaler.reload()
    steady = 0.95 * plan.scaling_target_value  # per instance-minute: between both alarms
    windows.run(110, steady, 1.0)
    assert (_target(windows), windows.desired()) == ((1, 363), 2)
    windows.run(20, steady, 1.0)  # the window ending at 08:02:00 runs "up"
    assert (_target(windows), windows.desired()) == ((6, 363), 6)
    windows.run(180, steady, 1.0)
    assert (_target(windows), windows.desired()) == ((1, 363), 6)
    # Recorded as a scaling activity of the action, at the window's end.
    assert [d[1:] for d in windows.scaler.decisions] == [("up", 2, 6)]
    assert windows.scaler.decisions[0][0] == START + 120


def test_a_cron_listing_hours_or_days_runs_at_each(windows: Windows) -> None:
    """A day that repeats every 4 h deploys its step as one cron listing the hours; a week's,
    one naming the day. START is a Friday 08:00 UTC: the Friday and 4-hourly crons run at
    08:01 and 08:02, the weekend one not at all."""
    _schedule(windows, "every-4-h", "cron(1 0,4,8,12,16,20 * * ? *)", 4)
    _schedule(windows, "friday", "cron(2 8 ? * FRI *)", 6)
    _schedule(windows, "weekend", "cron(3 8 ? * SAT,SUN *)", 9)
    windows.scaler.reload()
    windows.run(240, 1.0, 1.0)
    assert [d[1:] for d in windows.scaler.decisions] == [("every-4-h", 2, 4), ("friday", 4, 6)]
    assert _target(windows)[0] == 6


def test_a_suspended_schedule_skips_its_action_for_good(windows: Windows) -> None:
    windows.aws.target(suspended={"ScheduledScalingSuspended": True})
    _schedule(windows, "up", "cron(1 8 * * ? *)", 6)
    windows.scaler.reload()
    windows.run(90, 1.0, 1.0)
    windows.aws.target(suspended={"ScheduledScalingSuspended": False})
    windows.run(60, 1.0, 1.0)
    assert _target(windows)[0] == 1 and windows.desired() <= 2
