"""`tts-bench preview`: the program under mocks, judged by the pack through pulumi-policy's own
analyzer served over gRPC, as `pulumi preview --policy-pack policies` would."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.infra.conftest import FIXTURES, REPO, copy_program
from tts_bench.cli import main

pytestmark = pytest.mark.slow  # each case starts two Python processes


@pytest.mark.parametrize(
    ("args", "expected", "expected_error"),
    [
        (
            ["preview", "--stack", "dev"],
            (
                0,
                [
                    "[pass] sagemaker-scaling-requires-measured-plan",
                    "aws:appautoscaling/target:Target  speech-kokoro-82m-target",
                    # The dev stack deploys the fleet rule's plan: target tracking on invocations
                    # per instance and the burst step with its alarm.
                    "aws:appautoscaling/policy:Policy  speech-kokoro-82m-target-tracking",
                    "aws:appautoscaling/policy:Policy  speech-kokoro-82m-burst",
                    "aws:cloudwatch/metricAlarm:MetricAlarm  speech-kokoro-82m-burst-alarm",
                    "aws:cloudwatch/metricAlarm:MetricAlarm  speech-kokoro-82m-first-chunk-p95",
                    "No mandatory policy violations.",
                ],
            ),
            None,
        ),
        (
            ["preview", "--program", str(FIXTURES / "no_plan")],
            (
                1,
                [
                    "[FAIL] sagemaker-scaling-requires-measured-plan (mandatory)",
                    "guessed-target] endpoint/speech-guessed/variant/AllTraffic: missing plan",
                ],
            ),
            None,
        ),
        (
            ["preview", "--program", str(FIXTURES / "mismatched_target")],
            (
                1,
                [
                    "[FAIL] sagemaker-scaling-requires-measured-plan (mandatory)",
                    "target value 50.0 != the plan's 37.5 (plan d0b4a6baef69",
                ],
            ),
            None,
        ),
        (["preview", "--stack", "prod"], (2, []), "Pulumi.prod.yaml: no such file"),
        (["preview", "--program", str(FIXTURES)], (2, []), "no __main__.py; pass --program"),
    ],
)
def test_preview(
    args: list[str],
    expected: tuple[int, list[str]],
    expected_error: str | None,
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = main(args)
    out, err = capsys.readouterr()
    assert code == expected[0], out + err
    for text in expected[1]:
        assert text in out, out
    if expected_error:
        assert expected_error in err


def test_policy_config_moves_the_plans_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "policy-config.json"
    config.write_text(
        json.dumps({"sagemaker-scaling-requires-measured-plan": {"plansDir": str(tmp_path)}})
    )
    code = main(["preview", "--policy-config", str(config)])
    out, _ = capsys.readouterr()
    assert code == 1
    assert f"missing plan: no plan in {tmp_path} is for model kokoro-82m on ml.g5.xlarge" in out


def test_advisory_level_reports_without_blocking(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "policy-config.json"
    config.write_text(json.dumps({"sagemaker-scaling-requires-measured-plan": "advisory"}))
    code = main(["preview", "--program", str(FIXTURES / "no_plan"), "--policy-config", str(config)])
    out, _ = capsys.readouterr()
    assert code == 0
    assert "[WARN] sagemaker-scaling-requires-measured-plan (advisory)" in out


def test_a_pack_that_cannot_start_is_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "PulumiPolicy.yaml").write_text("runtime: python\n")
    (tmp_path / "__main__.py").write_text("raise ImportError('no module named tts_policies')\n")
    assert main(["preview", "--policy-pack", str(tmp_path)]) == 2
    assert "did not start" in capsys.readouterr().err


def test_preview_in_a_second_clone_previews_that_clone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Run from a clone's folder, preview takes the clone's program, stack config, plans and
    pack, not the checkout the command was installed from."""
    clone = copy_program(tmp_path, endpointName="speech-second-clone")
    shutil.copytree(REPO / "policies", clone / "policies")
    monkeypatch.chdir(clone)
    assert main(["preview", "--stack", "dev"]) == 0
    out, err = capsys.readouterr()
    assert f"program {clone}, stack dev, pack {clone / 'policies'}" in err
    assert "aws:appautoscaling/target:Target  speech-second-clone-target" in out
    assert "[pass] sagemaker-scaling-requires-measured-plan" in out
