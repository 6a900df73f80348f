"""`tts-bench simulate` end to end: refusals as one line, the JSON, the artifact and its PNG."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import REFERENCE_PLAN, REFERENCE_QMAX, REFERENCE_TTOTAL
from tests.core.ladders import qmax_artifact, serial_ladder
from tts_bench.artifacts.files import dump_json, load_artifact, sha256_file
from tts_bench.artifacts.plan import PlanArtifact
from tts_bench.artifacts.simulation import SimulationArtifact
from tts_bench.cli import main

OUTCOME_KEYS = {
    "policy", "requests", "shed", "shed_share", "over_slo", "over_slo_share",
    "instance_hours", "cost_usd", "peak_instances",
}  # fmt: skip


def simulate(
    capsys, out: Path, *args: str, artifacts: tuple[Path, Path, Path] | None = None
) -> tuple[int, str, str]:
    plan, qmax, ttotal = artifacts or (REFERENCE_PLAN, REFERENCE_QMAX, REFERENCE_TTOTAL)
    code = main(
        [
            "simulate",
            "--plan",
            str(plan),
            "--qmax",
            str(qmax),
            "--ttotal",
            str(ttotal),
            "--out",
            str(out),
            *args,
        ]
    )
    stdout, stderr = capsys.readouterr()
    return code, stdout, stderr


def test_json_prints_policies_inputs_provenance_and_the_oracle_only(capsys, tmp_path) -> None:
    code, out, err = simulate(
        capsys, tmp_path, "--synthetic", "surge:40:1.25:60", "--duration-s", "300",
        "--policy", "plan", "--policy", "fixed:3", "--price-per-hour", "1.5", "--json",
    )  # fmt: skip
    assert code == 0, err
    payload = json.loads(out)
    assert set(payload) == {"policies", "inputs", "provenance", "oracle"}
    # The published plan's fleet twin holds λ_out 13.776 rps an instance: 40 rps takes 3 (or
    # 4), 50 rps from 60 s takes 4; the 4th, launched at 0, is paid 300 s either way.
    assert payload["oracle"]["instance_hours"] == pytest.approx(4 * 300 / 3600, abs=1e-3)
    assert payload["oracle"]["per_instance_rps"] == pytest.approx(13.776, abs=1e-3)
    assert [p["policy"] for p in payload["policies"]] == ["plan", "fixed:3"]
    assert all(set(p) == OUTCOME_KEYS for p in payload["policies"])
    assert payload["provenance"]["kind"] == "simulated"
    fixed = payload["policies"][1]
    assert fixed["instance_hours"] == pytest.approx(3 * 300 / 3600, abs=1e-3)
    assert fixed["cost_usd"] == pytest.approx(1.5 * fixed["instance_hours"], abs=0.01)
    assert payload["inputs"]["files"]["plan"]["sha256"] == sha256_file(REFERENCE_PLAN)


def test_writes_the_artifact_and_its_plot_and_prints_the_table(capsys, tmp_path) -> None:
    code, out, _ = simulate(
        capsys, tmp_path, "--synthetic", "steady:30", "--duration-s", "120", "--policy", "naive"
    )
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split()[:3] == ["policy", "requests", "shed"]
    assert lines[0].endswith("× oracle") and float(lines[1].split()[-1]) > 0
    assert lines[2].startswith("oracle: ") and "λ_out 13.776 rps each" in lines[2]
    (written,) = tmp_path.glob("simulate-kokoro-82m-g5xlarge-8b1b96bc-*.json")
    # The artifact records the clairvoyant fleet, for the report's × oracle column.
    assert json.loads(written.read_text(encoding="utf-8"))["oracle_instance_hours"] > 0
    artifact = load_artifact(written, SimulationArtifact)
    assert artifact.policies[0].policy == "naive" and artifact.policies[0].cost_usd is None
    assert set(artifact.inputs.files) == {"plan", "qmax", "ttotal"}
    assert written.with_suffix(".png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_trace_is_replayed_and_hashed(capsys, tmp_path) -> None:
    trace = tmp_path / "trace.csv"
    trace.write_text("timestamp_s,text\n" + "".join(f"{i * 0.05:.3f},hi\n" for i in range(1200)))
    code, out, err = simulate(
        capsys, tmp_path / "out", "--trace", str(trace), "--policy", "fixed:2", "--json"
    )
    assert code == 0, err
    payload = json.loads(out)
    assert payload["policies"][0]["requests"] == 1200
    assert payload["inputs"]["files"]["trace"]["sha256"] == sha256_file(trace)


def test_a_per_minute_trace_keeps_its_counts(capsys, tmp_path) -> None:
    trace = tmp_path / "minutes.csv"
    trace.write_text("minute,count\n0,600\n1,1200\n3,300\n")
    code, out, err = simulate(
        capsys, tmp_path / "out", "--trace", str(trace), "--policy", "fixed:4", "--json"
    )
    assert code == 0, err
    payload = json.loads(out)
    assert payload["policies"][0]["requests"] == 2100
    assert payload["inputs"]["duration_s"] == 240


def _other_build_plan(tmp_path: Path) -> Path:
    plan = load_artifact(REFERENCE_PLAN, PlanArtifact)
    other = plan.fingerprint.model_copy(update={"image_digest": "sha256:" + "cd" * 32})
    path = tmp_path / "other-plan.json"
    path.write_text(dump_json(plan.model_copy(update={"fingerprint": other})))
    return path


BAD_TRACES = {
    "not-a-number": ("timestamp_s\n0.5\nsoon\n", "is not a number"),
    "unsorted": ("timestamp_s\n0.5\n2.0\n1.0\n", "comes before 2; sort the trace"),
    "no-column": ("time,count\n1,2\n", "has no timestamp_s column"),
    "empty": ("", "the trace is empty"),
    "minutes-unsorted": ("minute,count\n2,5\n1,5\n", "does not come after 2; sort the trace"),
    "negative": ("timestamp_s\n-1\n", "must be a non-negative number"),
}


@pytest.mark.parametrize(
    ("case", "args", "expected_error"),
    [
        *[(f"trace-{name}", ["--trace", name], error) for name, (_, error) in BAD_TRACES.items()],
        ("missing-trace", ["--trace", "/nonexistent/trace.csv"], "no such trace file"),
        (
            "unknown-policy",
            ["--synthetic", "steady:5", "--policy", "autoscale"],
            "unknown policy 'autoscale'",
        ),
        ("fixed-zero", ["--synthetic", "steady:5", "--policy", "fixed:0"], "fixed:N needs N ≥ 1"),
        ("bad-synthetic", ["--synthetic", "sine:1:2"], "expected steady:RPS"),
        (
            "trough-above-peak",
            ["--synthetic", "diurnal:50:10:600"],
            "trough 50 is above the peak 10",
        ),
        (
            "fingerprint",
            ["--synthetic", "steady:5", "--plan-other-build"],
            "plan and qmax fingerprints differ (image_digest",
        ),
        (
            "other-qmax",
            ["--synthetic", "steady:5", "--qmax-other-file"],
            "is not the qmax artifact the plan was derived from",
        ),
        (
            "negative-duration",
            ["--synthetic", "steady:5", "--duration-s", "-3"],
            "must be positive",
        ),
    ],
)
def test_refusals_are_one_line_and_write_nothing(
    capsys, tmp_path, case, args, expected_error
) -> None:
    artifacts = [REFERENCE_PLAN, REFERENCE_QMAX, REFERENCE_TTOTAL]
    if "--plan-other-build" in args:
        args = [a for a in args if a != "--plan-other-build"]
        artifacts[0] = _other_build_plan(tmp_path)
    if "--qmax-other-file" in args:
        args = [a for a in args if a != "--qmax-other-file"]
        artifacts[1] = tmp_path / "q.json"
        artifacts[1].write_text(
            dump_json(
                qmax_artifact(
                    serial_ladder(),
                    fingerprint=load_artifact(REFERENCE_PLAN, PlanArtifact).fingerprint,
                )
            )
        )
    if args[0] == "--trace" and args[1] in BAD_TRACES:
        trace = tmp_path / f"{args[1]}.csv"
        trace.write_text(BAD_TRACES[args[1]][0])
        args = ["--trace", str(trace), *args[2:]]
    out_dir = tmp_path / "out"
    code, out, err = simulate(capsys, out_dir, *args, artifacts=tuple(artifacts))  # type: ignore[arg-type]
    assert code == 2, err
    assert out == ""
    assert expected_error in err, err
    assert len(err.strip().splitlines()) == 1
    assert not out_dir.exists(), "a refused simulation writes nothing"


FLEET_PLAN = REFERENCE_PLAN.parent / "plan-kokoro-82m-fleet-g5xlarge-8b1b96bc.json"


def _edited_plan(tmp_path: Path, edit) -> Path:  # type: ignore[no-untyped-def]
    data = json.loads(REFERENCE_PLAN.read_text())
    edit(data)
    path = tmp_path / "edited-plan.json"
    path.write_text(json.dumps(data))
    return path


def test_a_fleet_plan_simulates_with_the_same_json_shape(capsys, tmp_path) -> None:
    code, out, err = simulate(
        capsys, tmp_path, "--synthetic", "steady:200+surge:1.25:300", "--duration-s", "900",
        "--policy", "plan", "--json",
        artifacts=(FLEET_PLAN, REFERENCE_QMAX, REFERENCE_TTOTAL),
    )  # fmt: skip
    assert code == 0, err
    payload = json.loads(out)
    assert set(payload) == {"policies", "inputs", "provenance", "oracle"}
    assert set(payload["policies"][0]) == OUTCOME_KEYS
    assert payload["inputs"]["plan_id"] == load_artifact(FLEET_PLAN, PlanArtifact).plan_id


@pytest.mark.parametrize(
    ("edit", "plan", "policy", "expected_error"),
    [
        (
            lambda d: d["deploy"]["policies"][1]["alarm"].update(statistic="Average"),
            None,
            "plan",
            "the plan's scale-in alarm reads ConcurrentRequestsPerModel Average; the simulation "
            "models only",
        ),
        (
            lambda d: d["deploy"]["policies"][1]["alarm"].update(period_s=15),
            None,
            "plan",
            "has a 15 s period",
        ),
        (None, FLEET_PLAN, "plan+burst", "deploys a burst step of its own"),
    ],
)
def test_constructs_the_simulation_does_not_model_are_refused_in_one_line(
    capsys, tmp_path, edit, plan, policy, expected_error
) -> None:
    chosen = plan or _edited_plan(tmp_path, edit)
    out_dir = tmp_path / "out"
    code, out, err = simulate(
        capsys, out_dir, "--synthetic", "steady:5", "--duration-s", "60", "--policy", policy,
        artifacts=(chosen, REFERENCE_QMAX, REFERENCE_TTOTAL),
    )  # fmt: skip
    assert (code, out) == (2, "")
    assert expected_error in err and len(err.strip().splitlines()) == 1, err
    assert not out_dir.exists()


def test_a_version_1_plan_simulates_as_the_published_shape_it_describes(capsys, tmp_path) -> None:
    v1 = Path(__file__).resolve().parents[1] / "core" / "fixtures" / "plan-v1-reference.json"
    runs = []
    for plan in (v1, REFERENCE_PLAN):
        code, out, err = simulate(
            capsys, tmp_path / plan.stem, "--synthetic", "surge:40:1.25:60",
            "--duration-s", "600", "--json", artifacts=(plan, REFERENCE_QMAX, REFERENCE_TTOTAL),
        )  # fmt: skip
        assert code == 0, err
        runs.append(json.loads(out)["policies"])
    assert runs[0] == runs[1]


def test_the_reading_of_aws_is_recorded_and_decides_what_is_simulated(capsys, tmp_path) -> None:
    """The published plan's target tracking on the high-resolution metric: 3 × 10 s under
    `documented`, 3 × 60 s and a later scale-out under `pessimistic` (docs/aws-semantics.md)."""
    runs = {}
    for name in ("documented", "pessimistic"):
        code, out, err = simulate(
            capsys, tmp_path / name, "--synthetic", "surge:30:1.5:60", "--duration-s", "900",
            "--aws-semantics", name, "--json",
        )  # fmt: skip
        assert code == 0, err
        runs[name] = json.loads(out)
        recorded = runs[name]["inputs"]["aws_semantics"]
        assert recorded["name"] == name and len(recorded["sha256"]) == 16
    documented, pessimistic = (runs[n]["policies"][0] for n in ("documented", "pessimistic"))
    # Not monotone: a later detection can size a larger first scale-out, which the endpoint's
    # Updating then does not hold back; but the same arrivals give another day.
    assert (pessimistic["shed"], pessimistic["instance_hours"]) != (
        documented["shed"], documented["instance_hours"],
    )  # fmt: skip


def test_a_semantics_file_is_read_and_a_bad_one_refused_in_one_line(capsys, tmp_path) -> None:
    fields = {
        "name": "accepting", "high_resolution_tracking_period_s": 10,
        "tracking_low_datapoints": 15, "standard_publication_delay_s": 60,
        "refuse_while_updating": False, "scale_in_updating_s": 60,
    }  # fmt: skip
    good = tmp_path / "accepting.json"
    good.write_text(json.dumps(fields))
    code, out, err = simulate(
        capsys, tmp_path / "ok", "--synthetic", "steady:5", "--duration-s", "120",
        "--aws-semantics", str(good), "--json",
    )  # fmt: skip
    assert code == 0, err
    assert json.loads(out)["inputs"]["aws_semantics"]["refuse_while_updating"] is False
    bad = {
        "nope": "neither a variant set (documented, pessimistic) nor a readable file",
        "missing": "missing field(s) scale_in_updating_s",
        "range": "tracking_low_datapoints must be a number from 1 to 100",
        "json": "not JSON",
    }
    for case, expected in bad.items():
        path = tmp_path / f"{case}.json"
        body = {k: v for k, v in fields.items() if case != "missing" or k != "scale_in_updating_s"}
        if case == "range":
            body["tracking_low_datapoints"] = 0
        path.write_text("{" if case == "json" else json.dumps(body))
        value = "nope" if case == "nope" else str(path)
        with pytest.raises(SystemExit) as exited:  # argparse's usage error, one line
            simulate(capsys, tmp_path / "out", "--synthetic", "steady:5", "--aws-semantics", value)
        out, err = capsys.readouterr()
        assert exited.value.code == 2 and out == "" and expected in err, (case, err)
        assert len(err.strip().splitlines()) == 1, err
        assert not (tmp_path / "out").exists()
