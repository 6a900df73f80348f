"""`tts-bench rehearse` and `ttotal --trigger organic`: what they refuse, in one line, before
anything is sent, and the dry run's estimate (no AWS call)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import MEASUREMENTS, REFERENCE_PLAN, REFERENCE_QMAX
from tts_bench.cli import main

FLEET_PLAN = MEASUREMENTS / "plan-kokoro-82m-fleet-g5xlarge-8b1b96bc.json"


@pytest.fixture(autouse=True)
def nowhere(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No AWS to reach: a refusal that calls one fails loudly instead of hanging."""
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    for name in ("TTS_BENCH_TIME_SCALE", "TTS_BENCH_TIME_ORIGIN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


REHEARSE = (
    "rehearse",
    "--plan",
    str(FLEET_PLAN),
    "--synthetic",
    "steady:20",
    "--duration-s",
    "600",
)


@pytest.mark.parametrize(
    ("extra", "error"),
    [
        ((), "--endpoint NAME: the endpoint to rehearse on (or --dry-run)"),
        (("--endpoint", "e", "--replays", "0"), "--replays 0: give 1 to 100"),
        (("--endpoint", "e", "--seed", "-1"), "--seed -1: give 0 or more"),
        (
            ("--endpoint", "e", "--price-per-hour", "-2"),
            "--price-per-hour: give 0 to 1e9 USD per instance-hour",
        ),
        (("--dry-run", "--time-scale", "0"), "--time-scale 0: give a positive number"),
    ],
)
def test_rehearse_refuses_in_one_line_before_anything_is_sent(
    capsys: pytest.CaptureFixture[str], extra: tuple[str, ...], error: str
) -> None:
    code, out, err = run(capsys, *REHEARSE, *extra)
    assert code == 2 and out == ""
    assert err.strip() == f"tts-bench rehearse: {error}"


def test_rehearse_refuses_a_plan_whose_artifacts_are_not_found(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    data = json.loads(REFERENCE_PLAN.read_text())
    data["sources"]["qmax"]["path"] = "nowhere/qmax.json"
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(data))
    code, _, err = run(
        capsys, "rehearse", "--plan", str(plan), "--synthetic", "steady:1", "--dry-run"
    )
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "--qmax: the plan's qmax nowhere/qmax.json is not found" in err


def test_a_dry_run_prints_the_instance_hours_and_cost_without_aws(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = run(
        capsys,
        "rehearse",
        "--plan",
        str(FLEET_PLAN),
        "--synthetic",
        "diurnal:13.78:275.5:7200",
        "--dry-run",
        "--price-per-hour",
        "1.408",
    )
    assert code == 0, err
    assert out.startswith("dry run, nothing sent: 120 min of the service's clock (120.0 min wall)")
    hours = float(out.split(" runs ")[1].split(" instance-hours")[0].replace(",", ""))
    cost = float(out.split("instance-hours, $")[1].split(",")[0])
    assert 5 < hours < 60 and cost == pytest.approx(hours * 1.408, abs=0.01)


ORGANIC = ("ttotal", "--trigger", "organic", "--qmax", str(REFERENCE_QMAX))


@pytest.mark.parametrize(
    ("extra", "error"),
    [
        (("--endpoint", "e"), "--trigger organic needs --endpoint NAME and --plan P"),
        (("--local", "--host", "http://x", "--plan", str(FLEET_PLAN)), "--trigger organic needs"),
        (
            ("--endpoint", "e", "--plan", str(FLEET_PLAN), "--load-factor", "1"),
            "--load-factor 1: give more than 1 (past the scale-out level) and at most 10",
        ),
        (("--endpoint", "e", "--plan", str(REFERENCE_QMAX)), "artifact: this is a 'qmax' artifact"),
    ],
)
def test_an_organic_ttotal_refuses_in_one_line_before_any_aws_call(
    capsys: pytest.CaptureFixture[str], extra: tuple[str, ...], error: str
) -> None:
    code, _, err = run(capsys, *ORGANIC, *extra)
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert error in err


def test_force_desired_takes_no_plan(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(
        capsys,
        "ttotal",
        "--qmax",
        str(REFERENCE_QMAX),
        "--endpoint",
        "e",
        "--plan",
        str(FLEET_PLAN),
    )
    assert code == 2 and "--plan is for --trigger organic" in err
