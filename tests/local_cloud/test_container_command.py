"""`local-cloud --container-cmd`: the local cloud hosts a container this project did not build.

The Sonic-3 stand-in (`tests/ladder/sonic3_standin.py`), started per instance as a command on
the port SageMaker names, measured through the cloud's response stream under `--contract
sonic3`: Q_max at most its 4 slots and bracketed, each 429 a refusal (issue 39). Short rungs,
one instance, no plan deployed.
"""

from __future__ import annotations

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


def standin_cmd(*flags: str) -> str:
    return shlex.join([sys.executable, str(STANDIN), "--rtf", "0.2", *flags])


@pytest.fixture(scope="module")
def cloud(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    no_plans = tmp_path_factory.mktemp("no-plans")
    settings = LocalCloudSettings(
        instances=1,
        container_cmd=standin_cmd(),  # its port from SAGEMAKER_BIND_TO_PORT
        stack_overrides={**STACK, "measurementsDir": str(no_plans)},
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
    """`qmax --endpoint … --contract sonic3` without its verification rungs (minutes long)."""
    from tts_bench.aws.session import AwsSession
    from tts_bench.measure.ladder.live.live_ladder import LiveLadderRequest, run_live_ladder
    from tts_bench.measure.ladder.schedule import LadderSchedule

    request = LiveLadderRequest(
        endpoint=cloud.endpoint_name, variant=cloud.variant_name,
        transport=Transport.RESPONSE_STREAM,
        schedule=LadderSchedule(rungs=(4, 5), hold_s=4, measure_s=3, idle_s=0),
        slo_ms=5000, model="sonic-3", out=out, corpus=CORPUS, metric_wait_s=0,
        plan_surge_ratio=None, contract="sonic3",
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
    assert fingerprint.transport is Transport.RESPONSE_STREAM
    assert fingerprint.instance_type == "ml.g6e.xlarge"
    four, five = artifact.rungs
    assert (four.concurrency, four.rejected, four.errors) == (4, 0, 0) and four.ok > 0
    assert five.rejected > 0 and five.errors == 0 and not five.meets_slo
    assert five.rejected / 3 < 20  # the refused user backs off (its 3 s window)
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
    (run,) = load_artifact(path, SurgeArtifact).runs
    assert run.shed > 0 and run.errors == 0 and run.ok > 0, run
    assert run.mean_occupancy <= 4
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
