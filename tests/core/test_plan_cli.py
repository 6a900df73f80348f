"""`tts-bench plan` exit codes and one-line errors: refusals (2), stops (1), feasible (0)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.core.ladders import FINGERPRINT, qmax_artifact, rung, serial_ladder, ttotal_artifact
from tts_bench.artifacts.files import dump_json
from tts_bench.artifacts.fingerprint import Transport
from tts_bench.cli import main


def _write(directory: Path, name: str, artifact) -> str:
    path = directory / name
    path.write_text(dump_json(artifact) if not isinstance(artifact, str) else artifact)
    return str(path)


@pytest.fixture
def pair(tmp_path) -> tuple[str, str]:
    return (
        _write(tmp_path, "q.json", qmax_artifact(serial_ladder())),
        _write(tmp_path, "t.json", ttotal_artifact()),
    )


def run_plan(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["plan", *args])
    out, err = capsys.readouterr()
    return code, out, err


OTHER_DIGEST = FINGERPRINT.model_copy(update={"image_digest": "sha256:" + "cd" * 32})
OTHER_TRANSPORT = FINGERPRINT.model_copy(update={"transport": Transport.LOCAL_WS})


@pytest.mark.parametrize(
    ("extra", "ttotal_fp", "expected_error"),
    [
        (["--surge-ratio", "1.0"], FINGERPRINT, "surge ratio 1 is out of range"),
        (["--surge-ratio", "1.5"], FINGERPRINT, "surge ratio 1.5 is out of range"),
        (["--surge-ratio", "0.8"], FINGERPRINT, "surge ratio 0.8 is out of range"),
        (["--slo-ms", "2500"], FINGERPRINT, "measured at an SLO of 3000 ms, not 2500 ms"),
        ([], OTHER_DIGEST, "image_digest"),
        ([], OTHER_TRANSPORT, "transport: local-http != local-ws"),
        ([], None, "the ttotal artifact has no fingerprint"),
        (["--peak-rps", "-1"], FINGERPRINT, "--peak-rps"),
        (["--min-floor", "0"], FINGERPRINT, "--min-floor"),
        (["--trough-rps", "200"], FINGERPRINT, "the trough (200 rps) is above the peak (100 rps)"),
    ],
)
def test_refusals_exit_2_with_one_line(capsys, tmp_path, extra, ttotal_fp, expected_error) -> None:
    q = _write(tmp_path, "q.json", qmax_artifact(serial_ladder()))
    t = _write(tmp_path, "t.json", ttotal_artifact(fingerprint=ttotal_fp))
    args = ["--qmax", q, "--ttotal", t, "--peak-rps", "100", "--out", str(tmp_path / "out")]
    code, out, err = run_plan(capsys, *args, *extra)
    assert code == 2
    assert out == ""
    assert expected_error in err
    assert len(err.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists(), "a refused plan writes nothing"


@pytest.mark.parametrize("ttotal_fp", [OTHER_DIGEST, OTHER_TRANSPORT, None])
def test_allow_config_mismatch_downgrades_to_a_warning(capsys, tmp_path, ttotal_fp) -> None:
    q = _write(tmp_path, "q.json", qmax_artifact(serial_ladder()))
    t = _write(tmp_path, "t.json", ttotal_artifact(fingerprint=ttotal_fp))
    code, out, _ = run_plan(
        capsys,
        "--qmax",
        q,
        "--ttotal",
        t,
        "--peak-rps",
        "100",
        "--json",
        "--allow-config-mismatch",
        "--out",
        str(tmp_path),
    )
    plan = json.loads(out)
    assert code == 0
    assert {f["name"]: f["verdict"] for f in plan["findings"]}["fingerprint"] == "warn"


def test_missing_qmax_fingerprint_is_a_mismatch(capsys, tmp_path) -> None:
    q = _write(tmp_path, "q.json", qmax_artifact(serial_ladder(), fingerprint=None))
    t = _write(tmp_path, "t.json", ttotal_artifact())
    code, _, err = run_plan(capsys, "--qmax", q, "--ttotal", t, "--peak-rps", "10")
    assert code == 2
    assert "qmax artifact has no fingerprint" in err


@pytest.mark.parametrize(
    ("rungs", "slo_ms", "expected_error"),
    [
        ([rung(5, 10, 500), rung(10, 10, 1000)], 3000, "no c=1 rung"),
        ([rung(1, 10, 4000)], 3000, "no passing rung"),
    ],
)
def test_ladders_that_cannot_be_planned_from(
    capsys, tmp_path, rungs, slo_ms, expected_error
) -> None:
    q = _write(tmp_path, "q.json", qmax_artifact(rungs, slo_ms=slo_ms))
    t = _write(tmp_path, "t.json", ttotal_artifact())
    code, _, err = run_plan(
        capsys, "--qmax", q, "--ttotal", t, "--peak-rps", "10", "--slo-ms", str(slo_ms)
    )
    assert code == 2
    assert expected_error in err


@pytest.mark.parametrize(
    ("rungs", "slo_ms", "stop"),
    [
        # TTFAB meets a 60 ms SLO at c=1 but the whole request (S_p95 = 66 ms) does not: W_max < 0.
        (
            [
                rung(1, 16, 55, slo_ms=60, latency_p95_ms=66),
                rung(2, 16, 58, slo_ms=60, latency_p95_ms=70),
            ],
            60,
            "slo_feasibility",
        ),
        # An SLO past SageMaker's 60 s ceiling.
        (serial_ladder(service_ms=100, slo_ms=70_000), 70_000, "slo_feasibility"),
    ],
)
@pytest.mark.parametrize("rule", ["published", "fleet"])
def test_stops_exit_1_and_mark_the_plan_infeasible(
    capsys, tmp_path, rungs, slo_ms, stop, rule
) -> None:
    q = _write(tmp_path, "q.json", qmax_artifact(rungs, slo_ms=slo_ms))
    t = _write(tmp_path, "t.json", ttotal_artifact())
    code, out, _ = run_plan(
        capsys,
        "--rule",
        rule,
        "--qmax",
        q,
        "--ttotal",
        t,
        "--peak-rps",
        "10",
        "--slo-ms",
        str(slo_ms),
        "--json",
        "--out",
        str(tmp_path),
    )
    plan = json.loads(out)
    assert code == 1
    assert plan["feasible"] is False
    assert plan["findings"][0]["name"] == stop
    assert plan["findings"][0]["verdict"] == "stop"


def test_a_ladder_without_throughput_stops_the_published_rule_and_the_fleet_rule_refuses(
    capsys, tmp_path
) -> None:
    rungs = [rung(1, 0.0, 50), rung(5, 0.0, 60), rung(10, 0.0, 5000)]
    q = _write(tmp_path, "q.json", qmax_artifact(rungs))
    t = _write(tmp_path, "t.json", ttotal_artifact())
    args = ["--qmax", q, "--ttotal", t, "--peak-rps", "10", "--out", str(tmp_path)]
    code, out, _ = run_plan(capsys, *args, "--rule", "published", "--json")
    assert code == 1 and json.loads(out)["findings"][0]["name"] == "fleet_sizing"
    code, out, err = run_plan(capsys, *args)
    assert (code, out) == (2, "")
    assert err.count("\n") == 1 and "no throughput at Q_max" in err


@pytest.mark.parametrize(
    ("content", "expected_error"),
    [
        ("{not json", "not JSON (line 1"),
        ('{"artifact": "ttotal"}', "this is a 'ttotal' artifact, expected 'qmax'"),
        ("[]", "Input should be a valid dictionary"),
    ],
)
def test_broken_input_files(capsys, tmp_path, pair, content, expected_error) -> None:
    bad = _write(tmp_path, "bad.json", content)
    code, _, err = run_plan(capsys, "--qmax", bad, "--ttotal", pair[1], "--peak-rps", "1")
    assert code == 2
    assert err.startswith(f"tts-bench plan: {bad}: ")
    assert expected_error in err


def test_missing_file(capsys, tmp_path, pair) -> None:
    code, _, err = run_plan(
        capsys, "--qmax", str(tmp_path / "nope.json"), "--ttotal", pair[1], "--peak-rps", "1"
    )
    assert code == 2
    assert "nope.json: no such file" in err


def test_usage_error_exits_2(capsys) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["plan", "--qmax", "x.json"])
    assert exit_info.value.code == 2


def test_json_mode_keeps_stdout_pure(capsys, tmp_path, pair) -> None:
    code, out, err = run_plan(
        capsys,
        "--qmax",
        pair[0],
        "--ttotal",
        pair[1],
        "--peak-rps",
        "50",
        "--json",
        "--out",
        str(tmp_path),
    )
    assert code == 0
    json.loads(out)
    assert "next:" in err


@pytest.mark.parametrize(
    ("rule", "name"),
    [
        ([], "plan-kokoro-82m-fleet-g5xlarge-abababab.json"),
        (["--rule", "fleet"], "plan-kokoro-82m-fleet-g5xlarge-abababab.json"),
        (["--rule", "published"], "plan-kokoro-82m-g5xlarge-abababab.json"),
    ],
)
def test_out_directory_is_created_with_exactly_one_plan_named_by_rule(
    capsys, tmp_path, pair, rule, name
) -> None:
    out_dir = tmp_path / "deep" / "plans"
    code, _, _ = run_plan(
        capsys, "--qmax", pair[0], "--ttotal", pair[1], "--peak-rps", "50", "--out", str(out_dir),
        *rule,
    )  # fmt: skip
    assert code == 0
    assert [p.name for p in out_dir.iterdir()] == [name]


def test_console_script_prints_no_traceback(tmp_path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"artifact": "qmax", "slo_ms": "fast"}')
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "tts_bench",
            "plan",
            "--qmax",
            str(bad),
            "--ttotal",
            str(bad),
            "--peak-rps",
            "1",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert result.stderr.count("\n") == 1
