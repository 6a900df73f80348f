"""`rehearse` and `ttotal --trigger organic` against a local cloud of curve instances with the
reference plan deployed: the refusals come before anything is sent, and the organic scale-out
is timed stage by stage from each stage's own API, every stage between two of the cloud's own
stamps exact on its clock (the cloud stamps what it models at the modelled instant, however
late its threads run on a loaded machine).

One local cloud for the module: curve instances from the reference ladder at rate scale 1, the
reference (published) plan: target tracking on the 10 s concurrency metric, whose level the
probe's own requests in flight cross (the fleet plan's minute metric, thinned 30-fold here,
would dip under its level one minute in six at this load, each dip a period more; the
acceptance runs measure it at a smaller thinning, docs/rehearsal.md), start-up along the
reference ttotal, clocks 30 times the wall's, maxInstances 20.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import MEASUREMENTS, REFERENCE_PLAN, REFERENCE_QMAX
from tests.local_cloud.conftest import cloud_fixture, control_client
from tts_bench.artifacts.files import load_artifact, sha256_file
from tts_bench.artifacts.plan import PlanArtifact, SourceArtifact
from tts_bench.artifacts.qmax import QmaxArtifact
from tts_bench.artifacts.ttotal import TtotalArtifact
from tts_bench.aws.clock import CLOUDWATCH_DELAY_S
from tts_bench.cli import main
from tts_bench.local_cloud import LocalCloud, LocalCloudSettings
from tts_bench.local_cloud.settings import CurveInstances
from tts_bench.planning.plan import PlanRequest, derive_plan

pytestmark = pytest.mark.slow

FLEET_PLAN = MEASUREMENTS / "plan-kokoro-82m-fleet-g5xlarge-8b1b96bc.json"
TIME_SCALE = 30.0
cloud = cloud_fixture(
    lambda _: LocalCloudSettings(
        curve=CurveInstances(qmax=REFERENCE_QMAX, plan=REFERENCE_PLAN, seed=4),
        time_scale=TIME_SCALE,
        stack_overrides={"maxInstances": 20},
    )
)


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def invocations_since(cloud: LocalCloud, since_s: float) -> float:
    time.sleep(2 * 10 / TIME_SCALE)  # two windows: whatever arrived is in a closed one
    return sum(w.invocations for w in cloud.metrics.windows() if w.start_s >= since_s - 10)


def rehearse_args(cloud: LocalCloud, plan: Path, out: Path) -> list[str]:
    return [
        "rehearse",
        "--plan",
        str(plan),
        "--endpoint",
        cloud.endpoint_name,
        "--synthetic",
        "steady:20",
        "--duration-s",
        "120",
        "--out",
        str(out),
    ]


def test_a_frozen_endpoint_is_refused_before_anything_is_sent(
    cloud: LocalCloud, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    target: dict[str, Any] = {
        "ServiceNamespace": "sagemaker",
        "ResourceId": f"endpoint/{cloud.endpoint_name}/variant/{cloud.variant_name}",
        "ScalableDimension": "sagemaker:variant:DesiredInstanceCount",
    }
    aas = control_client("application-autoscaling")
    aas.register_scalable_target(**target, SuspendedState={"DynamicScalingOutSuspended": True})
    began = cloud.clock.now()
    try:
        code, out, err = run(capsys, *rehearse_args(cloud, REFERENCE_PLAN, tmp_path))
    finally:
        aas.register_scalable_target(**target, SuspendedState={"DynamicScalingOutSuspended": False})
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert "scaling is frozen (dynamic scale-out suspended)" in err and "tts-bench thaw" in err
    assert invocations_since(cloud, began) == 0
    assert not list(tmp_path.iterdir())


def test_a_plan_other_than_the_deployed_one_is_refused(
    cloud: LocalCloud, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    began = cloud.clock.now()
    code, _, err = run(capsys, *rehearse_args(cloud, FLEET_PLAN, tmp_path))
    assert code == 2 and len(err.strip().splitlines()) == 1
    fleet = load_artifact(FLEET_PLAN, PlanArtifact).plan_id
    assert f"does not run plan {fleet}" in err and "tts-bench validate" in err
    assert invocations_since(cloud, began) == 0


STAGES = [
    "load_applied -> load_crossed",
    "load_crossed -> first_datapoint_over",
    "first_datapoint_over -> alarm",
    "alarm -> scaling_activity",
    "scaling_activity -> desired_set",
    "desired_set -> instance_visible",
    "instance_visible -> container_started",
    "container_started -> framework_init",
    "framework_init -> weights_ready",
    "weights_ready -> warmup_done",
    "warmup_done -> in_service",
    "in_service -> traffic_recovered",
]


# The stages the detection lag sums (load_crossed to desired_set).
DETECTED = ("first_datapoint_over", "alarm", "scaling_activity", "desired_set")
# Exact to the millisecond: a log stream's creationTime is truncated to it and the artifact
# rounds each stage to it, so a sum of two stages may be 3 ms off.
EXACT_S = 0.003


def windows_over(cloud: LocalCloud, alarm: str) -> set[float]:
    """The ends of the cloud's own 10 s windows whose Maximum breaches the acting alarm (the
    plan's: 3 of 3 at 10 s, over its threshold), as the alarm evaluated them."""
    (deployed,) = control_client("cloudwatch").describe_alarms(AlarmNames=[alarm])["MetricAlarms"]
    assert (deployed["Period"], deployed["EvaluationPeriods"]) == (10, 3)
    assert deployed["ComparisonOperator"] == "GreaterThanThreshold"
    threshold = deployed["Threshold"]
    return {w.start_s + 10 for w in cloud.metrics.windows() if w.concurrency_max > threshold}


def _scale_in_suspended(cloud: LocalCloud, suspended: bool) -> None:
    control_client("application-autoscaling").register_scalable_target(
        ServiceNamespace="sagemaker",
        ResourceId=f"endpoint/{cloud.endpoint_name}/variant/{cloud.variant_name}",
        ScalableDimension="sagemaker:variant:DesiredInstanceCount",
        SuspendedState={"DynamicScalingInSuspended": suspended},
    )


def test_the_policy_scales_out_on_the_probe_and_each_stage_is_timed_in_order(
    cloud: LocalCloud, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # The published rule's step scale-in would take the new instance back as soon as the
    # scale-out ends its cooldown (AWS as documented: docs/aws-semantics.md), and the probe
    # would never recover; the scale-out is what is measured here.
    _scale_in_suspended(cloud, True)
    try:
        code, out, err = run(
            capsys,
            "ttotal",
            "--trigger",
            "organic",
            "--endpoint",
            cloud.endpoint_name,
            "--qmax",
            str(REFERENCE_QMAX),
            "--plan",
            str(REFERENCE_PLAN),
            "--load-factor",
            "1.2",
            "--warmup-s",
            "30",
            "--recovery-hold-s",
            "30",
            "--out",
            str(tmp_path),
        )
    finally:
        _scale_in_suspended(cloud, False)
    assert code == 0, err
    (path,) = tmp_path.glob("ttotal-kokoro-82m-organic-*-emulated.json")
    ttotal = load_artifact(path, TtotalArtifact)
    assert [s.name for s in ttotal.stages] == STAGES
    assert [s.counted for s in ttotal.stages] == [False] * 5 + [True] * 7
    found = ttotal.detection
    assert found is not None and ttotal.provenance.curve_modelled
    assert found.plan_id == load_artifact(REFERENCE_PLAN, PlanArtifact).plan_id
    assert found.policy_role == "concurrency-target" and found.modelled_s == 30  # 3 × 10 s
    stage = {s.name.split(" -> ")[1]: s.seconds for s in ttotal.stages}
    # The crossing is the probe's own reading (its thread counts a request in flight when it
    # sends it), not a stamp of the cloud's: the first datapoint over comes after it, by the
    # requests' transit to the instance (a slow machine's threads) and by the metric's ratio to
    # the probe's count (a load this near the level may need a period or two more). So this
    # stage is recorded, not bounded (26.5 s once, under a clean clone's load: test-time.md).
    # What is exact is that the first datapoint over the probe read from GetMetricData is the
    # cloud's own first window over the level after the crossing: each datapoint holds the
    # samples stamped in its period, however late its window was closed.
    assert ttotal.events is not None
    at = {p.name: p.epoch_s for p in ttotal.events.points}
    over = windows_over(cloud, found.alarm)
    first_over = min(end for end in over if end > at["load_crossed"])
    assert at["first_datapoint_over"] == pytest.approx(first_over, abs=EXACT_S)
    assert stage["first_datapoint_over"] > 0
    # The alarm's change is stamped at its evaluation's modelled instant, however late the
    # cloud's thread got there: the end of the first period closing three datapoints over the
    # level in a row, plus the CloudWatch delay; 25 s after the first over when it is the first
    # of the three (dips 0, none over just before it).
    in_alarm = next(
        end for end in sorted(over) if end >= first_over and end - 10 in over and end - 20 in over
    )
    assert stage["alarm"] == pytest.approx(in_alarm + CLOUDWATCH_DELAY_S - first_over, abs=EXACT_S)
    if found.dips == 0:
        assert stage["alarm"] in (pytest.approx(k * 10 + CLOUDWATCH_DELAY_S) for k in (0, 1, 2))
    # The action comes in the alarm's own evaluation, stamped at the same instant.
    assert stage["scaling_activity"] == pytest.approx(0, abs=EXACT_S)
    # The poll sees the desired count after it was asked for, never before; how long after is
    # the cloud's thread and the poll's (each late on a slow machine), which is no stage of the
    # model: the new instance's stream is stamped 180.8 s (the reference's provisioning) after
    # the instant the count was asked for, so the two stages always sum to exactly that.
    assert stage["desired_set"] >= 0
    provisioning = stage["desired_set"] + stage["instance_visible"]
    assert provisioning == pytest.approx(180.8, abs=EXACT_S)
    # The lag is the detection's stages: at least the three datapoints' 20 s + the delay.
    assert found.lag_s == pytest.approx(sum(stage[n] for n in DETECTED), abs=EXACT_S)
    assert found.lag_s >= found.modelled_s - 10
    assert "detection lag" in out and found.policy_role in out
    # plan uses the lag for the published rule it was measured under, not for the fleet rule
    qmax = load_artifact(REFERENCE_QMAX, QmaxArtifact)
    sources = {
        "qmax": SourceArtifact(
            path="q", sha256=sha256_file(REFERENCE_QMAX), provenance="reference"
        ),
        "ttotal": SourceArtifact(path="t", sha256=sha256_file(path), provenance="emulated"),
    }
    for rule, used in (("published", True), ("fleet", False)):
        request = PlanRequest(peak_rps=5000, trough_rps=10, rule=rule, allow_config_mismatch=True)
        lag = derive_plan(qmax, ttotal, request, sources).finding("detection_lag")
        assert lag is not None and lag.figure("used") is used
