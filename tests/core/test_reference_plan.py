"""SPEC §6's reference check, through the command a user types."""

from __future__ import annotations

import json

import pytest

from tts_bench.artifacts.files import load_artifact
from tts_bench.artifacts.plan import PlanArtifact
from tts_bench.artifacts.qmax import QmaxArtifact
from tts_bench.artifacts.reference import build_reference
from tts_bench.artifacts.ttotal import TtotalArtifact
from tts_bench.cli import main


@pytest.fixture
def reference_plan_json(
    tmp_path, capsys, monkeypatch, repo_root, reference_qmax_path, reference_ttotal_path
) -> dict:
    # Relative paths, as docs/artifacts.md's command gives them, so the recorded sources match.
    monkeypatch.chdir(repo_root)
    code = main(
        [
            "plan",
            "--qmax",
            str(reference_qmax_path.relative_to(repo_root)),
            "--ttotal",
            str(reference_ttotal_path.relative_to(repo_root)),
            "--peak-rps",
            "5000",
            "--trough-rps",
            "10",
            "--rule",
            "published",
            "--json",
            "--out",
            str(tmp_path),
        ]
    )
    assert code == 0
    return json.loads(capsys.readouterr().out)


def test_reference_check(reference_plan_json: dict) -> None:
    plan = reference_plan_json
    assert plan["feasible"] is True
    assert plan["scaling_target_value"] == pytest.approx(37.5)
    assert plan["scale_in_threshold"] == pytest.approx(25.0)
    assert round(plan["w_max_s"], 3) == 2.934
    assert (plan["scale_out_cooldown_s"], plan["scale_in_cooldown_s"]) == (30, 960)
    assert plan["queue_max_depth"] == 50
    assert plan["first_chunk_alarm_ms"] == 65
    assert (plan["min_instances"], plan["max_instances"]) == (1, 280)
    findings = {f["name"]: f for f in plan["findings"]}
    assert findings["surge_survival"]["verdict"] == "warn"
    assert 0.1 < findings["surge_survival"]["shed_probability"] <= 1
    assert findings["surge_survival"]["utilisation_at_trigger"] == pytest.approx(0.974, abs=5e-4)
    assert findings["scale_in_safety"]["verdict"] == "warn"
    assert findings["scale_in_safety"]["safe_floor"] == 3
    assert findings["fleet_sizing"]["naive_max_instances"] == 9
    assert findings["fleet_sizing"]["throughput_at_trigger_rps"] == pytest.approx(17.887, abs=1e-3)


def test_findings_are_worst_first(reference_plan_json: dict) -> None:
    rank = {"stop": 2, "warn": 1, "ok": 0}
    severities = [rank[f["verdict"]] for f in reference_plan_json["findings"]]
    assert severities == sorted(severities, reverse=True)


def test_plan_records_its_sources(reference_plan_json: dict, reference_qmax_path) -> None:
    import hashlib

    sources = reference_plan_json["sources"]
    assert sources["qmax"]["sha256"] == hashlib.sha256(reference_qmax_path.read_bytes()).hexdigest()
    assert sources["qmax"]["provenance"] == "reference"
    assert reference_plan_json["inputs"]["peak_rps"] == 5000


def test_committed_plan_is_the_derived_one(reference_plan_json: dict, reference_plan_path) -> None:
    committed = load_artifact(reference_plan_path, PlanArtifact)
    fresh = PlanArtifact.model_validate(reference_plan_json)
    skip = {"provenance"}
    assert committed.model_dump(exclude=skip) == fresh.model_dump(exclude=skip)


def test_reference_artifacts_rebuild_from_the_published_run(
    repo_root, reference_qmax_path, reference_ttotal_path
) -> None:
    published = repo_root.parent / "shared" / "reference" / "published-g5xlarge-run.json"
    if not published.exists():
        pytest.skip("../shared/reference is not beside this checkout")
    qmax, ttotal = build_reference(published)
    skip = {"provenance"}
    assert qmax.model_dump(exclude=skip) == load_artifact(
        reference_qmax_path, QmaxArtifact
    ).model_dump(exclude=skip)
    committed_t = load_artifact(reference_ttotal_path, TtotalArtifact)
    assert ttotal.model_dump(exclude=skip) == committed_t.model_dump(exclude=skip)
    first, *rest = committed_t.stages
    assert not first.counted and all(s.counted for s in rest)
    assert committed_t.planned_total_s == pytest.approx(320.2)


def test_human_report_names_every_derived_number(
    tmp_path, capsys, reference_qmax_path, reference_ttotal_path
) -> None:
    code = main(
        [
            "plan",
            "--qmax",
            str(reference_qmax_path),
            "--ttotal",
            str(reference_ttotal_path),
            "--peak-rps",
            "5000",
            "--trough-rps",
            "10",
            "--rule",
            "published",
            "--out",
            str(tmp_path),
        ]
    )
    out, err = capsys.readouterr()
    assert code == 0
    for text in (
        "37.500",
        "25.000",
        "2.934 s",
        "scale-out 30 s, scale-in 960 s",
        "min 1, max 280",
        "WARN surge_survival",
        "reference",
        "Feasible: yes",
    ):
        assert text in out
    assert err.startswith("next:")
    assert (tmp_path / "plan-kokoro-82m-g5xlarge-8b1b96bc.json").exists()


def test_reimporting_the_reference_leaves_the_committed_files_alone(
    repo_root, tmp_path, capsys, reference_qmax_path, reference_ttotal_path
) -> None:
    """A rebuild must not change the sources' sha256, or every derived plan_id would move."""
    published = repo_root.parent / "shared" / "reference" / "published-g5xlarge-run.json"
    if not published.exists():
        pytest.skip("../shared/reference is not beside this checkout")
    import shutil

    for path in (reference_qmax_path, reference_ttotal_path):
        shutil.copy(path, tmp_path / path.name)
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    assert main(["import-reference", str(published), "--out", str(tmp_path)]) == 0
    assert capsys.readouterr().out.count("(unchanged)") == 2
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before
