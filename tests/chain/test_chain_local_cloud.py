"""The chain through the local cloud with the real clients: qmax over response-stream, ttotal
force-desired, plan, the redeploy, validate; the refusals; a ladder killed mid-run.

One local cloud for the module (onnx backend, deployed without a plan: no scaling, no bound),
short rungs over the tiny corpus. Tests run in file order and share the artifacts they make.
The ladder holds no fleet rule's level (`--no-fleet-level`): on this uncompressed clock that
hold is three real minutes. `tests/local_cloud/test_fleet_hold_cloud.py` holds it end to end on
a compressed clock and checks what this module checked of it.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest

from tests.servers import as_a_client_of_the_cloud
from tts_bench.artifacts.files import load_artifact
from tts_bench.artifacts.plan import PlanArtifact
from tts_bench.artifacts.qmax import QmaxArtifact
from tts_bench.artifacts.ttotal import TtotalArtifact
from tts_bench.aws.deployed import SuspendedState
from tts_bench.cli import main
from tts_bench.deployment import SCALABLE_DIMENSION, SERVICE_NAMESPACE, resource_id

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
CORPUS = REPO / "tests" / "ladder" / "corpora" / "short.txt"
SLO_MS = "59000"  # under the 60 s ceiling: every rung passes, and the plan can be feasible
QUOTA = 3


@pytest.fixture(scope="module")
def cloud(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from tts_bench.local_cloud import LocalCloudSettings, local_cloud

    no_plans = tmp_path_factory.mktemp("no-plans")
    settings = LocalCloudSettings(
        instances=1,
        server_args=("--backend", "onnx"),
        stack_overrides={"measurementsDir": str(no_plans)},
        instance_quota=QUOTA,
    )
    with pytest.MonkeyPatch.context() as patch, local_cloud(settings) as started:
        as_a_client_of_the_cloud(patch, started.env, tmp_path_factory.mktemp("state"))
        yield started


@pytest.fixture(scope="module")
def out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("measurements")


def client(service: str) -> Any:
    return boto3.client(service)


def endpoint_args(cloud: Any) -> list[str]:
    return ["--endpoint", cloud.endpoint_name, "--variant", cloud.variant_name]


@pytest.fixture(scope="module")
def ladder(cloud: Any, out: Path) -> Path:
    # Kokoro on this CPU finishes too few requests in 12 s for a rung to pass on its p95
    # interval: the point Q_max, as the main job takes it (its plan gates only a local image).
    code = main(
        [
            "qmax", *endpoint_args(cloud), "--transport", "response-stream", "--rungs", "1,2",
            "--hold-s", "20", "--measure-s", "12", "--idle-s", "0", "--slo-ms", SLO_MS,
            "--corpus", str(CORPUS), "--out", str(out), "--metric-wait-s", "40",
            "--no-fleet-level", "--q-max-basis", "point",
        ]
    )  # fmt: skip
    assert code == 0
    (path,) = out.glob("qmax-*.json")
    return path


@pytest.fixture(scope="module")
def ttotal(cloud: Any, ladder: Path, out: Path) -> Path:
    # The machine's cores are shared by both instances, so recovery is judged loosely here;
    # the stages and their sources are what this test checks. The probe holds the bound rung's
    # one user, so that rung's p95 is read again just before the scale-out.
    code = main(
        [
            "ttotal", *endpoint_args(cloud), "--qmax", str(ladder), "--bound-rung", "1",
            "--probe-concurrency", "1", "--recovery-factor", "1000", "--recovery-hold-s", "3",
            "--warmup-s", "3", "--timeout-s", "300", "--corpus", str(CORPUS), "--out", str(out),
        ]
    )  # fmt: skip
    assert code == 0
    (path,) = out.glob("ttotal-*.json")
    return path


def test_the_ladder_is_emulated_and_cloudwatch_agrees_with_the_client(
    ladder: Path, cloud: Any
) -> None:
    qmax = load_artifact(ladder, QmaxArtifact)
    assert ladder.name.endswith("-emulated.json") and "-response-stream-g5xlarge-" in ladder.name
    assert qmax.provenance.kind == "emulated"
    assert qmax.fingerprint is not None and qmax.fingerprint.instance_type == "ml.g5.xlarge"
    image = client("sagemaker").describe_model(
        ModelName=client("sagemaker").describe_endpoint_config(
            EndpointConfigName=client("sagemaker").describe_endpoint(
                EndpointName=cloud.endpoint_name
            )["EndpointConfigName"]
        )["ProductionVariants"][0]["ModelName"]
    )["PrimaryContainer"]["Image"]
    assert image.endswith(qmax.fingerprint.image_digest)
    usable = [r for r in qmax.rungs if r.usable]
    assert usable, [r.unusable_reason for r in qmax.rungs]
    for rung in usable:
        assert rung.cloudwatch_ratio is not None and 0.8 <= rung.cloudwatch_ratio <= 1.25, rung
    # Where the thresholds of a 1.25 surge ratio sit, 0.75 and 0.5 x Q_max 2 round to 2 and 1
    # users, which the ladder's rungs held: both are read from those rungs, and nothing is held
    # after the ladder (a level held on its own: tests/local_cloud/test_fleet_hold_cloud.py).
    assert qmax.q_max == 2
    # --no-fleet-level: the plan's two levels only, and the artifact says the third was skipped.
    assert [(v.role, v.concurrency, v.source) for v in qmax.verification] == [
        ("scale_out", 2, "ladder-rung"),
        ("scale_in", 1, "ladder-rung"),
    ]
    assert qmax.fleet_level_skipped
    for v in qmax.verification:
        assert 0.8 <= v.cloudwatch_ratios["Maximum/10s"] <= 1.25, v


def test_ttotal_stages_come_in_order_from_their_sources_and_capacity_is_restored(
    ttotal: Path, ladder: Path, cloud: Any
) -> None:
    artifact = load_artifact(ttotal, TtotalArtifact)
    assert artifact.trigger.value == "force-desired" and artifact.provenance.kind == "emulated"
    assert ttotal.name.endswith("-emulated.json")
    names = [s.name.split(" -> ") for s in artifact.stages]
    assert names[0] == ["load_applied", "desired_set"] and not artifact.stages[0].counted
    chain = [a for a, _ in names[1:]] + [names[-1][1]]
    assert chain[:3] == ["desired_set", "instance_visible", "container_started"]
    assert chain[-3:] == ["warmup_done", "in_service", "traffic_recovered"]
    assert all(b == a2 for (_, b), (a2, _) in itertools.pairwise(names[1:]))
    counted = sum(s.seconds for s in artifact.stages if s.counted)
    assert counted == pytest.approx(artifact.measured_total_s, abs=0.01)
    assert artifact.fingerprint == load_artifact(ladder, QmaxArtifact).fingerprint
    variant = client("sagemaker").describe_endpoint(EndpointName=cloud.endpoint_name)[
        "ProductionVariants"
    ][0]
    assert variant["DesiredInstanceCount"] == 1  # the freeze put back what it found
    baseline = artifact.recovery_baseline
    assert baseline is not None and baseline.remeasured_requests >= 6, baseline
    assert baseline.ladder_p95_ms == load_artifact(ladder, QmaxArtifact).rungs[0].ttfab_p95_ms


# --------------------------------------------------------------------------- interrupted


def scaling_state(cloud: Any) -> tuple[Any, ...]:
    targets = client("application-autoscaling").describe_scalable_targets(
        ServiceNamespace=SERVICE_NAMESPACE,
        ResourceIds=[resource_id(cloud.endpoint_name, cloud.variant_name)],
    )["ScalableTargets"]
    variant = client("sagemaker").describe_endpoint(EndpointName=cloud.endpoint_name)[
        "ProductionVariants"
    ][0]
    scaling = [
        (t["MinCapacity"], t["MaxCapacity"], SuspendedState.from_api(t.get("SuspendedState")))
        for t in targets
    ]
    return (*scaling, variant["DesiredInstanceCount"])


def assert_restored(cloud: Any, before: tuple[Any, ...]) -> None:
    """Scaling's bounds and suspension as they were before a freeze; a desired count moved
    since only by the policy's own activity."""
    after = scaling_state(cloud)
    assert after[:-1] == before[:-1]  # bounds and suspension as they were
    if after[-1] != before[-1]:
        # Restored, scaling acts again at once: the burst alarm may still read the load's
        # datapoints (AWS invokes it again once a minute). Only the policy may have moved it.
        activities = client("application-autoscaling").describe_scaling_activities(
            ServiceNamespace=SERVICE_NAMESPACE,
            ResourceId=resource_id(cloud.endpoint_name, cloud.variant_name),
        )["ScalingActivities"]
        moved = [a for a in activities if a["StatusCode"] != "Failed"]
        assert moved and moved[0]["Description"].endswith(f" {after[-1]}."), moved[:2]
        assert "triggered policy" in moved[0]["Cause"], moved[0]


@pytest.fixture
def scalable_target(cloud: Any) -> Iterator[None]:
    """A scalable target on the variant (before the redeploy, the dev stack has none)."""
    settings = {
        "ServiceNamespace": SERVICE_NAMESPACE,
        "ResourceId": resource_id(cloud.endpoint_name, cloud.variant_name),
        "ScalableDimension": SCALABLE_DIMENSION,
    }
    scaling = client("application-autoscaling")
    scaling.register_scalable_target(**settings, MinCapacity=1, MaxCapacity=3)
    yield
    scaling.deregister_scalable_target(**settings)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_ladder_killed_mid_run_restores_the_scaling(
    cloud: Any, scalable_target: None, tmp_path: Path, signum: int
) -> None:
    before = scaling_state(cloud)
    assert len(before) == 2, before
    child = subprocess.Popen(
        [
            sys.executable, "-m", "tts_bench", "qmax", *endpoint_args(cloud),
            "--transport", "response-stream", "--rungs", "1,2", "--hold-s", "60",
            "--measure-s", "10", "--corpus", str(CORPUS), "--out", str(tmp_path),
        ],
        cwd=REPO, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    try:
        frozen, seen = False, []
        assert child.stderr is not None
        for line in child.stderr:
            seen.append(line)
            frozen = frozen or "freezing scaling" in line
            if frozen and "rung 1/2 c=1" in line:
                break
        assert frozen, "the ladder never froze the scaling: " + "".join(seen[-20:])
        time.sleep(1.0)
        if signum == signal.SIGINT:
            os.killpg(child.pid, signum)  # Ctrl-C reaches the whole process group
        else:
            child.send_signal(signum)  # `kill` reaches the CLI alone
        rest = child.communicate(timeout=120)[1]
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == (130 if signum == signal.SIGINT else 128 + signum), rest[-2000:]
    assert "restored" in rest
    assert_restored(cloud, before)
    assert not list(Path(os.environ["TTS_BENCH_STATE_DIR"]).glob("freeze/*.json"))


def test_the_redeployed_plan_validates_and_a_changed_value_does_not(
    cloud: Any, ladder: Path, ttotal: Path, out: Path
) -> None:
    from tts_bench.jobs.local_cloud_run import redeploy_with_plan

    args = [
        "plan", "--qmax", str(ladder), "--ttotal", str(ttotal), "--peak-rps", "1",
        "--trough-rps", "0.2", "--slo-ms", SLO_MS,
    ]  # fmt: skip
    published_out = out / "published"
    assert main([*args, "--rule", "published", "--out", str(published_out)]) == 0
    (published_path,) = published_out.glob("plan-*.json")
    published = load_artifact(published_path, PlanArtifact)
    # Both thresholds converted by the ratio measured where they sit, not by the ladder's rungs.
    assert published.target_units.ratio_rule == "verification-rung"
    assert published.scale_in_units.ratio_rule == "verification-rung"
    code = main([*args, "--out", str(out)])  # the default rule: fleet
    (path,) = out.glob("plan-*.json")
    plan = load_artifact(path, PlanArtifact)
    assert path.name.endswith("-emulated.json") and plan.provenance.kind == "emulated"
    assert code == 0 and plan.feasible and plan.rule == "fleet", [f.message for f in plan.findings]
    # a plan on the point Q_max, as the ladder chose: the gate lets it scale only a local image
    assert plan.inputs.q_max_basis == "point" == published.inputs.q_max_basis
    # The ladder's rungs hold under a minute and it held no fleet level, so the invocations
    # metric's ratio is unmeasured: the target assumes AWS's 1.0 and the plan says why. The
    # burst's concurrency ratio is measured. (A measured one: tests/local_cloud/
    # test_fleet_hold_cloud.py.)
    assert plan.target_units.metric == "InvocationsPerInstance"
    assert (plan.target_units.ratio_rule, plan.target_units.cw_ratio) == ("unmeasured", 1.0)
    cw = plan.finding("cw_ratio")
    assert cw is not None and cw.verdict == "warn"
    assert cw.message.startswith("the ladder was run with --no-fleet-level"), cw.message
    assert plan.fleet is not None and plan.fleet.burst is not None
    assert plan.fleet.burst.units.ratio_rule != "unmeasured"
    redeploy_with_plan(cloud, plan, out)
    cloud.wait_in_service(timeout_s=300)
    validate = ["validate", "--plan", str(path), *endpoint_args(cloud), "--bounds", "1:20"]
    assert main(validate) == 0
    policies = client("application-autoscaling").describe_scaling_policies(
        ServiceNamespace=SERVICE_NAMESPACE
    )["ScalingPolicies"]
    tracking = next(p for p in policies if p["PolicyType"] == "TargetTrackingScaling")
    config = dict(tracking["TargetTrackingScalingPolicyConfiguration"])
    config["TargetValue"] = config["TargetValue"] + 1
    client("application-autoscaling").put_scaling_policy(
        PolicyName=tracking["PolicyName"], ServiceNamespace=SERVICE_NAMESPACE,
        ResourceId=tracking["ResourceId"], ScalableDimension=SCALABLE_DIMENSION,
        PolicyType="TargetTrackingScaling", TargetTrackingScalingPolicyConfiguration=config,
    )  # fmt: skip
    assert main(validate) == 1


def test_a_surge_over_response_stream_sheds_cleanly_on_one_frozen_instance(
    cloud: Any, ladder: Path, out: Path
) -> None:
    """After the redeploy the Model is bounded at Q_max: the open loop runs over response-stream
    on one instance, a refusal at the bound is a shed (never an error), and scaling is restored."""
    from tts_bench.artifacts.surge import SurgeArtifact
    from tts_bench.planning.curve import throughput_curve

    # The redeployed policies may act at once (the fleet rule's minimum, a scale-in): `surge`
    # refuses an Updating endpoint, as it says, so wait as it tells a user to (a clean clone at
    # 206e254 started the surge while a scaling activity had the endpoint Updating).
    cloud.wait_in_service(timeout_s=300)
    before = scaling_state(cloud)
    qmax = load_artifact(ladder, QmaxArtifact)
    x = throughput_curve(qmax.curve_rungs)(qmax.refined_q_max)
    # Twelve times X(Q_max) for 6 s: as many arrivals as six times for 12 s (72 X), denser. At
    # three times for 12 s, 5 arrivals once came spread out enough that none was refused. Each
    # admitted one holds its slot for about Q_max / X seconds, in which 12 Q_max = 24 arrivals
    # are expected whatever X is, so a refusal does not hang on where a few fall; a slower
    # machine measures a smaller X and holds slots longer, which only adds refusals.
    code = main(
        [
            "surge", "--qmax", str(ladder), *endpoint_args(cloud), "--transport", "response-stream",
            "--rate", f"{12 * x:.3f}", "--duration-s", "6", "--corpus", str(CORPUS),
            "--out", str(out),
        ]
    )  # fmt: skip
    assert code == 0
    (path,) = out.glob("surge-*.json")
    surge = load_artifact(path, SurgeArtifact)
    assert path.name.endswith("-emulated.json") and surge.provenance.kind == "emulated"
    (run,) = surge.runs
    assert run.arrivals > 0 and run.errors == 0, run
    assert run.admitted + run.shed == run.arrivals and run.shed > 0
    # Occupancy is what the client saw: the server frees a slot when it sends the last byte, and
    # the next request can be admitted while that byte is still in the proxy, so one more than
    # the bound may show at once. An unbounded Model at six times X(Q_max) shows far more.
    assert run.max_occupancy <= qmax.refined_q_max + 1 and run.mean_occupancy <= qmax.refined_q_max
    assert_restored(cloud, before)
    assert not list(Path(os.environ["TTS_BENCH_STATE_DIR"]).glob("freeze/*.json"))


def test_every_artifact_the_chain_wrote_follows_from_its_raw_data(
    out: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The ladder from its samples, CloudWatch reads and verification rungs, the T_total
    from its events, the plan from both, the surge from its samples: `tts-bench verify`."""
    written = sorted(out.glob("*.json"))
    assert {p.name.split("-")[0] for p in written} == {"qmax", "ttotal", "plan", "surge"}
    assert main(["verify", *map(str, written)]) == 0, capsys.readouterr().out
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 4 and all(line.startswith("ok ") for line in lines), lines
    (qmax_line,) = [line for line in lines if "qmax emulated" in line]
    assert "CloudWatch ratios from the reads kept" in qmax_line


# --------------------------------------------------------------------------- refusals


def test_a_drift_error_refuses_the_ladder(cloud: Any, out: Path, capsys) -> None:
    orphan = resource_id("gone-endpoint", "AllTraffic")
    scaling = client("application-autoscaling")
    scaling.register_scalable_target(
        ServiceNamespace=SERVICE_NAMESPACE, ResourceId=orphan,
        ScalableDimension=SCALABLE_DIMENSION, MinCapacity=1, MaxCapacity=2,
    )  # fmt: skip
    try:
        code = main(["qmax", *endpoint_args(cloud), "--transport", "response-stream",
                     "--rungs", "1", "--hold-s", "5", "--measure-s", "2", "--out", str(out)])  # fmt: skip
    finally:
        scaling.deregister_scalable_target(
            ServiceNamespace=SERVICE_NAMESPACE, ResourceId=orphan,
            ScalableDimension=SCALABLE_DIMENSION,
        )  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2 and "preflight drift" in err and "orphan-target" in err


def test_the_local_cloud_answers_the_quota_and_none_free_is_refused(cloud: Any) -> None:
    from tts_bench.aws.session import AwsSession
    from tts_bench.errors import RefusalError
    from tts_bench.measure.ttotal.quota import read_quota_check

    check = read_quota_check(AwsSession.from_environment(), "ml.g5.xlarge")
    running = client("sagemaker").describe_endpoint(EndpointName=cloud.endpoint_name)[
        "ProductionVariants"
    ][0]["CurrentInstanceCount"]
    assert (check.quota, check.running) == (QUOTA, running)
    with pytest.raises(RefusalError, match=rf"quota {QUOTA}, {running} running"):
        check.require(QUOTA - running + 1)


def test_a_ladder_of_another_build_or_transport_is_refused(
    cloud: Any, ladder: Path, tmp_path: Path, capsys
) -> None:
    data = json.loads(ladder.read_text())
    data["fingerprint"]["image_digest"] = "sha256:" + "0" * 64
    other = tmp_path / "other.json"
    other.write_text(json.dumps(data))
    assert main(["ttotal", *endpoint_args(cloud), "--qmax", str(other), "--bound-rung", "1"]) == 2
    assert "another build" in capsys.readouterr().err
    # A local ladder measured as such (an emulated one is never local: the loader refuses it).
    data["fingerprint"]["transport"] = "local-http"
    data["provenance"]["kind"] = "measured"
    other.write_text(json.dumps(data))
    assert main(["ttotal", *endpoint_args(cloud), "--qmax", str(other), "--bound-rung", "1"]) == 2
    assert "needs a ladder measured on it" in capsys.readouterr().err
    data["provenance"]["kind"] = "emulated"
    other.write_text(json.dumps(data))
    assert main(["ttotal", *endpoint_args(cloud), "--qmax", str(other), "--bound-rung", "1"]) == 2
    assert "emulated means measured through the local cloud" in capsys.readouterr().err
