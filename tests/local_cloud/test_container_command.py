"""`local-cloud --container-cmd`: the local cloud hosts a container this project did not build.

The Sonic-3 stand-in (`tests/ladder/sonic3_standin.py`), started per instance as a command on
the port SageMaker names in place of the model package its committed stack deploys
(`Pulumi.sonic3-standin.yaml`), measured through the cloud's response stream under `--contract
sonic3`: Q_max at most its 4 slots and bracketed, each 429 a refusal (issue 39). Then the rest
of the chain on it (issue 39's acceptance): both rules' plans, naming the package and contract;
the gate and the pack admitting one to the package stack and no plan of the other contract;
the redeploy, drift, validate, verify and the HTML report. Short rungs, one instance; the
first rung held long enough for one whole CloudWatch period, so the plan has its ratio.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.servers import as_a_client_of_the_cloud
from tts_bench.artifacts.files import load_artifact
from tts_bench.artifacts.fingerprint import Transport
from tts_bench.artifacts.qmax import QmaxArtifact
from tts_bench.local_cloud import LocalCloudError, LocalCloudSettings, local_cloud
from tts_bench.local_cloud.instances.container_command import (
    CommandServer,
    InstanceStartError,
    command_digest,
    parse_command,
)
from tts_bench.measure.samples import Outcome, read_samples, samples_path
from tts_bench.measure.transport.contract import SONIC3

from .conftest import read_log_events

REPO = Path(__file__).resolve().parents[2]
STANDIN = REPO / "tests" / "ladder" / "sonic3_standin.py"
CORPUS = REPO / "tests" / "ladder" / "corpora" / "short.txt"
STACK = {
    "model": "sonic-3", "endpointName": "sonic3-standin", "instanceType": "ml.g6e.xlarge",
    "contract": "sonic3",
}  # fmt: skip


PACKAGE_STACK = "sonic3-standin"  # Pulumi.sonic3-standin.yaml: its model, endpoint, contract
HOLD_S, MEASURE_S = 2.5, 2.0  # the ladder's rungs but the CloudWatch one (`ladder`)


def standin_cmd(*flags: str) -> str:
    return shlex.join([sys.executable, str(STANDIN), "--rtf", "0.2", *flags])


@pytest.fixture(scope="module")
def cloud(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    no_plans = tmp_path_factory.mktemp("no-plans")
    settings = LocalCloudSettings(
        stack=PACKAGE_STACK,
        instances=1,
        container_cmd=standin_cmd(),  # its port from SAGEMAKER_BIND_TO_PORT
        stack_overrides={"measurementsDir": str(no_plans)},
        instance_quota=2,
        cloudwatch_delay_s=0.0,
    )
    with pytest.MonkeyPatch.context() as patch, local_cloud(settings) as started:
        as_a_client_of_the_cloud(patch, started.env, tmp_path_factory.mktemp("state"))
        yield started


@pytest.fixture(scope="module")
def out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("measurements")


@pytest.fixture(scope="module")
def ladder(cloud: Any, out: Path) -> Path:
    """Drift's preflight, then `qmax --endpoint … --contract sonic3` without its verification
    rungs (minutes long); rung 1 for the plan's uncontended service time, rung 4 held 20 s, so
    a whole 10 s CloudWatch period lies in it and the plan has its ratio (a hold one period
    long holds one only when it starts on a boundary: 20 s holds one in any phase)."""
    from tts_bench.aws.session import AwsSession
    from tts_bench.cli import main
    from tts_bench.measure.ladder.live.live_ladder import LiveLadderRequest, run_live_ladder
    from tts_bench.measure.ladder.schedule import LadderSchedule

    assert main(["drift", "--endpoint", cloud.endpoint_name]) == 0
    # Rungs 1 and 5 need a request or a refusal each, and the stand-in serves one in about
    # 10 ms (60 in rung 1's 3 s before; a machine twenty times slower still finishes about ten
    # in a 2 s window). At c=5 a fifth request finds the 4 slots full and is refused, and a
    # refused user asks again at most 1 s later (the backoff's cap), so a 2 s window holds a
    # refusal. Rung 4's 20 s are CloudWatch's (above), not the stand-in's.
    # Through the cloud, c=1's 2 s window finishes about 36 requests and c=4's is worth about
    # 57: too few for a p95 interval's upper end, so the Q_max is the point value (the plan it
    # makes gates only the local cloud's package).
    schedule = LadderSchedule(
        rungs=(1, 4, 5), hold_s=HOLD_S, measure_s=MEASURE_S, idle_s=0, max_hold_s=20,
        unstable_max_hold_s=HOLD_S, extended_s=(0, 20 - HOLD_S),
    )  # fmt: skip
    request = LiveLadderRequest(
        endpoint=cloud.endpoint_name, variant=cloud.variant_name,
        transport=Transport.RESPONSE_STREAM,
        schedule=schedule,
        slo_ms=5000, model="sonic-3", out=out, corpus=CORPUS, metric_wait_s=0,
        plan_surge_ratio=None, contract="sonic3", q_max_basis="point",
    )  # fmt: skip
    return run_live_ladder(AwsSession.from_environment(None), request, print, print)


@pytest.mark.slow
def test_qmax_through_the_cloud_brackets_the_standins_4_slots_each_429_a_refusal(
    ladder: Path, cloud: Any
) -> None:
    artifact = load_artifact(ladder, QmaxArtifact)
    assert (artifact.q_max, artifact.bracketed) == (4, True)
    assert artifact.provenance.kind == "emulated" and ladder.name.endswith("-emulated.json")
    fingerprint = artifact.fingerprint
    assert fingerprint is not None and fingerprint.contract == SONIC3.ref
    # The package the local cloud holds, and its container's digest as DescribeModelPackage
    # answers it: the command's, run in its place.
    assert fingerprint.model_package == PACKAGE
    assert fingerprint.image_digest == command_digest(parse_command(standin_cmd()))
    assert fingerprint.transport is Transport.RESPONSE_STREAM
    assert fingerprint.instance_type == "ml.g6e.xlarge"
    one, four, five = artifact.rungs
    assert (one.concurrency, one.rejected, one.errors) == (1, 0, 0) and one.ok > 0
    assert (four.concurrency, four.rejected, four.errors) == (4, 0, 0) and four.ok > 0
    assert five.rejected > 0 and five.errors == 0 and not five.meets_slo
    # The refused user backs off: without it, 300 to 1,500 refusals a second.
    assert five.rejected / MEASURE_S < 20
    samples = read_samples(samples_path(ladder))
    refused = [s for s in samples if s.outcome is Outcome.REJECTED]
    # Each refusal reached the client as SageMaker sends it: a ModelError carrying the 429.
    assert refused and all("429" in s.detail for s in refused), refused[:3]
    assert not [s for s in samples if s.outcome is Outcome.ERROR]
    ok = [s for s in samples if s.outcome is Outcome.OK]
    assert ok and all(s.ttfab_ms is not None and s.ttfab_ms < s.latency_ms for s in ok)
    # The port came from SAGEMAKER_BIND_TO_PORT, and the container's output went to its log
    # stream, as on SageMaker.
    (instance,) = [i for i in cloud.fleet.instances() if i.state == "InService"]
    port = instance.url.rsplit(":", 1)[1]
    logged = read_log_events(cloud, instance.log_stream)
    assert any(f"stand-in on 127.0.0.1:{port} " in line for line in logged), logged


def test_the_port_placeholder_is_replaced_and_ping_decides_readiness(tmp_path: Path) -> None:
    lines: list[str] = []
    server = CommandServer(shlex.split(standin_cmd("--port", "{port}")), dict(os.environ),
                           None, lines.append)  # fmt: skip
    server.start()
    try:
        server.wait_ready(30)
        assert f"127.0.0.1:{server.port}" in "".join(lines)
    finally:
        assert server.stop() is not None
    never = CommandServer([sys.executable, "-c", "import time; print('up'); time.sleep(60)"],
                          dict(os.environ), None, lambda _: None)  # fmt: skip
    never.start()
    with pytest.raises(InstanceStartError, match=r"never answered GET /ping .* last: up"):
        never.wait_ready(1)


def test_the_image_digest_changes_with_the_command_and_the_script_it_runs(tmp_path: Path) -> None:
    script = tmp_path / "serve.py"
    script.write_text("print('v1')\n")
    first = command_digest([sys.executable, str(script)])
    assert first.startswith("sha256:") and first == command_digest([sys.executable, str(script)])
    assert command_digest([sys.executable, str(script), "--rtf", "0.3"]) != first
    script.write_text("print('v2')\n")
    assert command_digest([sys.executable, str(script)]) != first


def test_a_command_that_dies_fails_the_endpoint_in_one_line_naming_it(tmp_path: Path) -> None:
    crash = "import sys; print('weights missing: /opt/ml/model', file=sys.stderr); sys.exit(3)"
    settings = LocalCloudSettings(
        instances=1, container_cmd=shlex.join([sys.executable, "-c", crash]),
        stack_overrides={**STACK, "measurementsDir": str(tmp_path)},
    )  # fmt: skip
    with pytest.raises(LocalCloudError) as caught, local_cloud(settings):
        pass
    message = str(caught.value)
    assert "\n" not in message and "Failed" in message
    assert "exited with code 3" in message and "weights missing: /opt/ml/model" in message
    assert "sys.exit(3)" in message  # the command itself is named


def test_the_cli_refuses_a_command_it_cannot_run_or_combine(capsys) -> None:
    from tts_bench.cli import main

    assert main(["local-cloud", "--container-cmd", "no-such-program-39 --serve"]) == 2
    err = capsys.readouterr().err.strip()
    assert "no program 'no-such-program-39'" in err and "\n" not in err
    assert (
        main(
            [
                "local-cloud",
                "--container-cmd",
                f"{sys.executable} x.py",
                "--server-args=--backend onnx",
            ]
        )
        == 2
    )
    assert "--container-cmd and --server-args" in capsys.readouterr().err
    assert main(["local-cloud", "--container-cmd", "'unclosed"]) == 2
    assert "--container-cmd" in capsys.readouterr().err


@pytest.fixture(scope="module")
def ttotal(cloud: Any, ladder: Path, out: Path) -> Path:
    from tts_bench.cli import main

    code = main([
        "ttotal", "--endpoint", cloud.endpoint_name, "--variant", cloud.variant_name,
        "--qmax", str(ladder), "--contract", "sonic3", "--model", "sonic-3", "--bound-rung", "4",
        "--probe-concurrency", "2", "--recovery-factor", "20", "--recovery-hold-s", "3",
        "--warmup-s", "2", "--timeout-s", "120", "--corpus", str(CORPUS), "--out", str(out),
    ])  # fmt: skip
    assert code == 0
    (path,) = out.glob("ttotal-*.json")
    return path


@pytest.mark.slow
def test_ttotal_under_sonic3_forces_a_second_standin_and_its_probe_speaks_the_contract(
    ttotal: Path, ladder: Path
) -> None:
    from tts_bench.artifacts.ttotal import TtotalArtifact

    artifact = load_artifact(ttotal, TtotalArtifact)
    qmax = load_artifact(ladder, QmaxArtifact)
    assert artifact.fingerprint == qmax.fingerprint and ttotal.name.endswith("-emulated.json")
    assert artifact.provenance.kind == "emulated"
    # The stand-in logs no start-up markers: its stages go from its log stream to InService.
    assert [stage.name for stage in artifact.stages] == [
        "load_applied -> desired_set", "desired_set -> instance_visible",
        "instance_visible -> in_service", "in_service -> traffic_recovered",
    ]  # fmt: skip
    # Every probe request was built and read under Sonic-3's contract: none failed.
    assert " 0 failed" in artifact.provenance.notes, artifact.provenance.notes


@pytest.mark.slow
def test_ttotal_refuses_another_contract_than_its_ladders(ladder: Path, capsys) -> None:
    from tts_bench.cli import main

    args = ["ttotal", "--endpoint", "e", "--qmax", str(ladder)]
    assert main(args) == 2
    assert "measured under contract sonic3; pass --contract sonic3" in capsys.readouterr().err
    assert main([*args[:3], "--local", "--qmax", str(ladder), "--contract", "sonic3"]) == 2


@pytest.mark.slow
def test_a_surge_under_sonic3_sheds_by_the_standins_own_bound(
    cloud: Any, ladder: Path, ttotal: Path, tmp_path: Path
) -> None:
    """No MAX_QUEUE_DEPTH: the stand-in's 4 slots, as its contract publishes, are the bound;
    past them each 429 is a request shed, none an error. (After ttotal: one instance again.)"""
    from tts_bench.artifacts.surge import SurgeArtifact
    from tts_bench.cli import main

    code = main([
        "surge", "--qmax", str(ladder), "--endpoint", cloud.endpoint_name, "--variant",
        cloud.variant_name, "--transport", "response-stream", "--contract", "sonic3",
        "--model", "sonic-3", "--rate", "80", "--duration-s", "3", "--corpus", str(CORPUS),
        "--out", str(tmp_path),
    ])  # fmt: skip
    assert code == 0
    (path,) = tmp_path.glob("surge-*.json")
    surge = load_artifact(path, SurgeArtifact)
    (run,) = surge.runs
    assert run.shed > 0 and run.errors == 0 and run.ok > 0, run
    # The bound it surged against is the ladder's Q_max, the stand-in's 4 slots. The run's own
    # occupancy is the client's (send to last byte, through the cloud's relay) and is not
    # bounded here: on a loaded machine the relay's transit alone held it at 5.6 once.
    assert surge.q_max == 4
    shed = [s for s in read_samples(samples_path(path)) if s.outcome is Outcome.REJECTED]
    assert len(shed) == run.shed and all("429" in s.detail for s in shed)


@pytest.mark.slow
def test_measuring_the_standin_under_kokoros_contract_is_refused_before_anything_changes(
    cloud: Any, ladder: Path, tmp_path: Path, capsys
) -> None:
    """The stack says its container speaks sonic3 (the Model's tts-bench:contract tag)."""
    from tts_bench.cli import main

    code = main([
        "qmax", "--endpoint", cloud.endpoint_name, "--transport", "response-stream",
        "--model", "sonic-3", "--rungs", "1", "--hold-s", "4", "--measure-s", "3",
        "--corpus", str(CORPUS), "--out", str(tmp_path),
    ])  # fmt: skip
    assert code == 2 and not list(tmp_path.iterdir())
    err = capsys.readouterr().err
    assert "Model speaks contract sonic3 (its tts-bench:contract tag), not kokoro" in err
    assert "pass --contract sonic3" in err


# --------------------------------------------------------------------------- the chain (issue 39)

PACKAGE = "arn:aws:sagemaker:us-east-1:000000000000:model-package/sonic-3-standin/1"
PACK_POLICY = "sagemaker-scaling-requires-measured-plan"
SLO = ["--slo-ms", "5000", "--surge-ratio", "1.25"]  # the stand-in stack's


@pytest.fixture(scope="module")
def plans(ladder: Path, ttotal: Path, out: Path) -> dict[str, Path]:
    """`plan` by both rules, beside the ladder and T_total they are derived from."""
    from tts_bench.cli import main

    made = {}
    for rule in ("published", "fleet"):
        args = ["plan", "--qmax", str(ladder), "--ttotal", str(ttotal), "--peak-rps", "60"]
        assert main([*args, "--trough-rps", "5", *SLO, "--rule", rule, "--out", str(out)]) == 0
        (made[rule],) = [p for p in out.glob("plan-*.json") if p not in made.values()]
    return made


@pytest.mark.slow
def test_both_rules_plan_the_standin_feasibly_naming_its_package_and_contract(
    plans: dict[str, Path], ladder: Path
) -> None:
    from tts_bench.artifacts.plan import PlanArtifact

    qmax = load_artifact(ladder, QmaxArtifact)
    four = qmax.rungs[1]  # the whole CloudWatch period its 20 s hold held
    assert four.cloudwatch_ratio is not None and 0.8 <= four.cloudwatch_ratio <= 1.25, four
    for rule, path in plans.items():
        plan = load_artifact(path, PlanArtifact)
        assert (plan.rule, plan.feasible, plan.provenance.kind) == (rule, True, "emulated")
        assert plan.fingerprint is not None and plan.fingerprint.model_package == PACKAGE
        assert plan.fingerprint.contract == SONIC3.ref and "-sonic3" in path.name


@pytest.mark.slow
def test_a_plan_gates_only_a_stack_of_its_contract_both_ways(plans: dict[str, Path]) -> None:
    """The Sonic-3 plan does not gate the stand-in's stack saying kokoro, nor does Kokoro's
    committed plan gate a stack of its model saying sonic3 (`contract-mismatch` each)."""
    from tts_bench.custody.gate import evaluate
    from tts_bench.deployment import OperatorBounds
    from tts_bench.planning.gate import GateCondition, GateQuery

    bounds = OperatorBounds(min_instances=1, max_instances=3)
    standin = GateQuery(model="sonic-3", instance_type="ml.g6e.xlarge", model_package=PACKAGE,
                        bounds=bounds, image_is_local=True, contract="sonic3")  # fmt: skip
    assert evaluate(plans["fleet"].parent, standin).enabled
    said_kokoro = evaluate(plans["fleet"].parent, standin.model_copy(update={"contract": "kokoro"}))
    assert said_kokoro.condition is GateCondition.CONTRACT_MISMATCH
    assert "measured under contract(s) sonic3, not kokoro" in said_kokoro.reason
    kokoro = GateQuery(model="kokoro-82m", instance_type="ml.g5.xlarge", bounds=bounds,
                       image_digest="sha256:8b1b96bc4dc0b30ddd84d8fe37af7c490937333c44a9f8f7d77b918c3d7eaced")  # fmt: skip
    assert evaluate(REPO / "measurements", kokoro).enabled
    said_sonic3 = evaluate(REPO / "measurements", kokoro.model_copy(update={"contract": "sonic3"}))
    assert said_sonic3.condition is GateCondition.CONTRACT_MISMATCH
    assert "measured under contract(s) kokoro, not sonic3" in said_sonic3.reason


@pytest.mark.slow
def test_preview_with_the_pack_passes_the_package_stack_and_its_emulated_plan(
    plans: dict[str, Path], tmp_path: Path, capsys
) -> None:
    """As `pulumi preview --policy-pack policies` would judge the stack the local cloud deploys
    (its package the cloud's own, the plans folder the test's): every mandatory policy passes."""
    from tts_bench.cli import main
    from tts_bench.local_cloud.control_plane.deploy import local_overrides, overridden_stack

    out = plans["fleet"].parent
    config = tmp_path / "policy-config.json"
    config.write_text(json.dumps({PACK_POLICY: {"plansDir": str(out)}}), encoding="utf-8")
    overrides = local_overrides(REPO, PACKAGE_STACK, "", standin_cmd())
    with overridden_stack(
        REPO, PACKAGE_STACK, {**overrides, "measurementsDir": str(out)}
    ) as program:
        code = main(["preview", "--program", str(program), "--stack", PACKAGE_STACK,
                     "--policy-pack", str(REPO / "policies"), "--policy-config", str(config)])  # fmt: skip
    shown = capsys.readouterr().out
    assert code == 0, shown
    assert (
        f"[pass] {PACK_POLICY} (mandatory)" in shown and "No mandatory policy violations." in shown
    )
    assert "aws:appautoscaling/target:Target  sonic3-standin-target" in shown
    assert "aws:appautoscaling/policy:Policy  sonic3-standin-burst" in shown  # the fleet rule's


@pytest.fixture(scope="module")
def redeployed(cloud: Any, plans: dict[str, Path]) -> dict[str, Path]:
    """The stack deployed again with the plans folder: the program's gate picks the fleet plan
    (the stack's planRule) for the package stack. (After the surge: its test wants one instance.)"""
    cloud.deploy(plans["fleet"].parent)
    cloud.wait_in_service(120)
    return plans


@pytest.mark.slow
def test_the_gate_deploys_the_fleet_plan_to_the_package_stack_and_validate_agrees(
    redeployed: dict[str, Path], cloud: Any, capsys
) -> None:
    from tts_bench.artifacts.plan import PlanArtifact
    from tts_bench.cli import main
    from tts_bench.deployment import TAG_PLAN_ID

    plan = load_artifact(redeployed["fleet"], PlanArtifact)
    sm = cloud.client("sagemaker")
    model = sm.describe_model(ModelName=cloud.deployment.model["ModelName"])
    assert model["PrimaryContainer"]["ModelPackageName"] == PACKAGE
    assert model["EnableNetworkIsolation"] is True
    tags = {t["Key"]: t["Value"] for t in sm.list_tags(ResourceArn=model["ModelArn"])["Tags"]}
    assert tags[TAG_PLAN_ID] == plan.plan_id
    endpoint = ["--endpoint", cloud.endpoint_name, "--plan", str(redeployed["fleet"])]
    assert main(["validate", *endpoint, "--bounds", "1:3"]) == 0
    table = capsys.readouterr().out
    rows = {line[:22].strip(): line.split()[-3:] for line in table.splitlines()[1:-1]}
    assert rows["model package"] == [PACKAGE, PACKAGE, "match"], table
    assert rows["network isolation"] == ["enabled", "enabled", "match"], table
    assert "MAX_QUEUE_DEPTH" not in rows  # the vendor's container reads no bound of ours
    assert main(["drift", *endpoint, "--bounds", "1:3"]) == 0
    assert (
        capsys.readouterr()
        .out.splitlines()[-1]
        .startswith(
            f"preflight-ok endpoint=sonic3-standin variant=AllTraffic region=us-east-1 plan={plan.plan_id}"
        )
    )


@pytest.mark.slow
def test_every_artifact_verifies_and_the_report_shows_the_chain(
    redeployed: dict[str, Path], ladder: Path, ttotal: Path, tmp_path: Path, capsys
) -> None:
    from tts_bench.cli import main

    made = [ladder, ttotal, *redeployed.values()]
    assert main(["verify", *map(str, made)]) == 0, capsys.readouterr()
    html = tmp_path / "chain.html"
    assert main(["report", *map(str, made), "--out", str(tmp_path), "--html", str(html)]) == 0
    page = html.read_text(encoding="utf-8")
    for section in ("ladder", "ttotal", "plan", "provenance"):
        assert f'<section id="{section}">' in page
    # The fingerprints name the package and the contract measured under.
    assert page.count(f"<td>{PACKAGE}</td><td>sonic3</td>") == len(made), page
