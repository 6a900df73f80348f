"""The local cloud's Autoscaler on the fleet rule's constructs, against moto, with the metric
windows driven through `VariantMetrics` as the fleet and the runtime drive them (no instance
processes: what is under test is which alarms exist, when they fire and what they ask for)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from tests.aws.emulated import ENDPOINT, EmulatedAws, fleet_queries
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
    assert (high["MetricName"], high["Statistic"], high["Period"], high["EvaluationPeriods"]) == (
        "InvocationsPerInstance", "Sum", 60, 3,
    )  # fmt: skip
    # Its scale-in stays (small fleets): AWS makes its low alarm, 15 minutes below 90 %.
    low = next(a for n, a in alarms.items() if "-AlarmLow-" in n)
    assert (low["EvaluationPeriods"], low["Period"]) == (15, 60)
    assert low["Threshold"] == pytest.approx(0.9 * target)
    assert windows.desired() == 2
    # 1.5 × the target: three one-minute datapoints over it, published a minute late.
    windows.run(180, 1.5 * target, 1.0)
    assert windows.desired() == 2
    windows.run(60, 1.5 * target, 1.0)
    assert windows.desired() == math.ceil(2 * 1.5)


def _fleet_of(windows: Windows, count: int) -> None:
    windows.aws.client("sagemaker").update_endpoint_weights_and_capacities(
        EndpointName=ENDPOINT,
        DesiredWeightsAndCapacities=[
            {"VariantName": DEFAULT_VARIANT, "DesiredInstanceCount": count, "DesiredWeight": 1.0}
        ],
    )


def test_the_scale_in_step_reads_the_load_with_one_instance_fewer(windows: Windows) -> None:
    """At 85 % of the target per instance, a fleet of 20 (the plan's min fleet) would serve
    20/19 of that, 89.5 %, with one instance fewer: three one-minute datapoints below the target,
    published a minute late, and the step removes 11 % of 20 (rounded down: 2). A fleet of 10
    would serve 94.4 %, below the target too, but under the min fleet the expression reads the
    threshold itself: it keeps its instances (target tracking's own scale-in waits 15 minutes
    below 90 %)."""
    target = load_artifact(FLEET_PLAN, PlanArtifact).scaling_target_value
    _fleet_of(windows, 20)
    windows.run(180, 0.85 * target, 0.3)
    assert windows.desired() == 20
    windows.run(60, 0.85 * target, 0.3)
    assert windows.desired() == 18
    assert [d[1:] for d in windows.scaler.decisions] == [
        ("speech-kokoro-82m-AllTraffic-scale-in", 20, 18)
    ]
    _fleet_of(windows, 10)
    windows.run(600, 0.85 * target, 0.3)
    assert windows.desired() == 10
    (alarm,) = [a for a in windows.aws.client("cloudwatch").describe_alarms()["MetricAlarms"]
                if a["AlarmName"].endswith("-low-concurrency")]  # fmt: skip
    assert alarm["StateValue"] == "OK"


def test_on_a_compressed_clock_the_math_alarm_reads_its_scaled_period(aws: EmulatedAws) -> None:
    """× 1/6: the one-minute datapoints are 10 s ones, published without delay, each request
    standing for six (as a compressed cloud weighs them), so a window sums a minute's load."""
    target = load_artifact(FLEET_PLAN, PlanArtifact).scaling_target_value
    aws.deploy_shape(load_artifact(FLEET_PLAN, PlanArtifact))
    metrics = VariantMetrics(request_weight=6.0)
    scaler = Autoscaler(aws.client, metrics, ENDPOINT, DEFAULT_VARIANT, 1 / 6, lambda _: None)
    scaler.reload()
    windows = Windows(aws, scaler, metrics)
    _fleet_of(windows, 20)
    windows.run(20, 0.85 * target, 0.3)
    assert windows.desired() == 20
    windows.run(10, 0.85 * target, 0.3)
    assert windows.desired() == 18


def test_an_alarm_whose_queries_the_emulation_cannot_compute_is_named_and_left_out(
    aws: EmulatedAws,
) -> None:
    plan = load_artifact(FLEET_PLAN, PlanArtifact)
    queries = fleet_queries(plan.deploy.policies[1].alarm)  # type: ignore[union-attr]
    queries[3]["Expression"] = queries[3]["Expression"].replace("m1 / (n - 1)", "m1 / n")
    aws.deploy_shape(plan, edit={"scale-in.alarm": {"Metrics": queries}})
    said: list[str] = []
    scaler = Autoscaler(aws.client, VariantMetrics(), ENDPOINT, DEFAULT_VARIANT, 1.0, said.append)
    scaler.reload()
    left_out = [line for line in said if "left out" in line]
    assert left_out == [
        "autoscaling: alarm speech-kokoro-82m-AllTraffic-low-concurrency left out: its metric "
        "queries are not the fleet-aware expression the emulation computes"
    ]
    assert "scale-in on alarm" not in said[-1] and "burst on alarm" in said[-1]


def test_the_burst_step_fires_on_one_high_resolution_datapoint(windows: Windows) -> None:
    plan = load_artifact(FLEET_PLAN, PlanArtifact)
    burst = plan.deploy.policies[2]  # type: ignore[union-attr]
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
    burst = plan.deploy.policies[2]  # type: ignore[union-attr]
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
