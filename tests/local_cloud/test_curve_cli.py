"""`tts-bench local-cloud` with curve instances: every flag that does not fit is one line, exit 2,
before anything starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import MEASUREMENTS, REFERENCE_PLAN, REFERENCE_QMAX, REFERENCE_TTOTAL

# Any committed local ladder: its instance type is a local one, not a SageMaker type.
LOCAL_LADDER = sorted(MEASUREMENTS.glob("qmax-kokoro-82m-local-http-*.json"))[0]


def _other_build_plan(tmp: Path) -> Path:
    from tts_bench.artifacts.files import load_artifact
    from tts_bench.artifacts.plan import PlanArtifact

    data = load_artifact(REFERENCE_PLAN, PlanArtifact).model_dump(mode="json")
    data["fingerprint"]["image_digest"] = "sha256:" + "1" * 64
    path = tmp / "plan-other.json"
    path.write_text(PlanArtifact.model_validate(data).model_dump_json(), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("args", "expected_error"),
    [
        (["--qmax", str(REFERENCE_QMAX)], "--qmax: for curve instances; add --instance-model curve"),
        (["--rate-scale", "2"], "--rate-scale: for curve instances"),
        (["--time-scale", "10"], "--time-scale needs --instance-model curve"),
        (["--instance-model", "curve"], "--instance-model curve needs --qmax"),
        (
            ["--instance-model", "curve", "--qmax", str(REFERENCE_QMAX), "--server-args=--backend onnx"],
            "--server-args: curve instances run no server process",
        ),
        (["--instance-model", "curve", "--qmax", "/no/such.json"], "--qmax: no file /no/such.json"),
        (
            ["--instance-model", "curve", "--qmax", str(REFERENCE_QMAX)],
            "--ttotal: curve instances start along a ttotal artifact's stages",
        ),
        (
            ["--instance-model", "curve", "--qmax", str(REFERENCE_QMAX), "--ttotal", str(REFERENCE_TTOTAL), "--rate-scale", "0"],
            "--rate-scale 0.0: give a positive number",
        ),
        (
            ["--instance-model", "curve", "--qmax", str(LOCAL_LADDER), "--ttotal", str(REFERENCE_TTOTAL)],
            "is no SageMaker instance type",
        ),
        (
            ["--instance-model", "curve", "--qmax", str(REFERENCE_QMAX), "--plan", "OTHER"],
            "was made for another build than --qmax",
        ),
        (
            ["--instance-model", "curve", "--qmax", str(REFERENCE_QMAX), "--plan", str(REFERENCE_PLAN), "--provision-delay-s", "5"],
            "--provision-delay-s: curve instances provision along the ttotal artifact's stages",
        ),
        (
            ["--instance-model", "curve", "--qmax", str(REFERENCE_QMAX), "--plan", str(REFERENCE_PLAN), "--cloudwatch-delay-s", "-1"],
            "--cloudwatch-delay-s must not be negative",
        ),
        (["--max-instances", "0"], "--max-instances must be at least 1"),
        (["--min-instances", "0"], "--min-instances must be at least 1"),
        (["--min-instances", "4", "--max-instances", "3"], "--min-instances must not be above --max-instances"),
    ],
)  # fmt: skip
def test_curve_flags_that_do_not_fit_are_one_line_and_exit_2(
    args: list[str], expected_error: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tts_bench.cli import main

    args = [str(_other_build_plan(tmp_path)) if a == "OTHER" else a for a in args]
    assert main(["local-cloud", *args]) == 2
    err = capsys.readouterr().err
    assert expected_error in err
    assert len(err.strip().splitlines()) == 1
