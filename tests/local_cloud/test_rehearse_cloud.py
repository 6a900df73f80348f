"""`rehearse` and `ttotal --trigger organic` against a local cloud of curve instances with the
reference plan deployed: the refusals come before anything is sent, and the organic scale-out
is timed stage by stage from each stage's own API, its lag within one period of what the acting
alarm models.

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
    # The crossing falls anywhere in its period; the alarm reads the cloud's datapoints a
    # CloudWatch delay after they close: within one period of the model either way, unless the
    # occupancy fell back under the level after it first passed (each dip restarts the count).
    stage = {s.name.split(" -> ")[1]: s.seconds for s in ttotal.stages}
    # The probe counts a request in flight when it sends it, the instance when it arrives: on a
    # loaded machine that is a few tenths of a second later, a period at K = 30, so the first
    # datapoint over may be the next period's.
    assert stage["first_datapoint_over"] <= 2 * 10 + 1
    # The action comes in the alarm's own evaluation (the next is 10 s later); what separates
    # them is the cloud's processing, in wall time × 30 (a loaded machine's 0.04 s is 1.2 s).
    assert stage["scaling_activity"] < 5 and stage["desired_set"] < 5
    if found.dips == 0:
        # Three datapoints, the last read a delay after it closes. The cloud's evaluation may run
        # late by its processing (0.14 s of wall time on a busy machine is 4 s here); a datapoint
        # more would be 10 s late, one fewer 10 s early.
        expected = 2 * 10 + CLOUDWATCH_DELAY_S
        # The probe stamps its crossing on its own thread: late by a third of a second (a
        # period at K = 30, seen beside two CPU burners), the datapoint the crossing fell in
        # counts as before it, the first one over is the next, and the alarm comes a datapoint
        # after it, not two. The other way, a datapoint whose samples reached the metric late
        # read under the level when the alarm evaluated it and over it when the probe reads it
        # afterwards: the alarm may come up to two periods after what the datapoints now say
        # (47.4 s once in a clean clone, dips 0). Both are item 1 of issue 36: the cloud's clock
        # does not wait for this process's threads. The count itself is exact in
        # test_curve_cloud's third-datapoint test.
        assert expected - 10 - 3 <= stage["alarm"] < expected + 3 * 10 - 3
        late = 10 if stage["first_datapoint_over"] > 10 + 1 else 0  # the transit above
        upper = found.modelled_s + CLOUDWATCH_DELAY_S + 3 * 10 + late
        assert found.modelled_s - 10 <= found.lag_s <= upper
    else:
        assert stage["alarm"] >= 3 * 10 + CLOUDWATCH_DELAY_S - 3
    # the new instance starts along the reference ttotal's stages, as the cloud replays them
    desired_to_visible = next(s for s in ttotal.stages if s.name.startswith("desired_set"))
    assert desired_to_visible.seconds == pytest.approx(180.8, abs=5)
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
