"""Custody: each artifact against what it was made from (`tts_bench.custody`, `tts-bench verify`).

The committed artifacts all check; sets made from synthetic raw data by the measuring code
(tests/measured_set.py) check, and each way of breaking one is refused in one line naming the
field: raw data missing or edited, a source replaced, a ladder edited and planned again.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.conftest import MEASUREMENTS
from tests.measured_set import EMULATED_FINGERPRINT, MeasuredSet, measured_set
from tts_bench.artifacts.files import dump_json, load_artifact, sha256_file
from tts_bench.artifacts.fingerprint import Transport
from tts_bench.artifacts.plan import PlanArtifact
from tts_bench.artifacts.qmax import QmaxArtifact
from tts_bench.cli import main
from tts_bench.custody.differences import Difference, exempt_paths, first_difference
from tts_bench.custody.folder import ArtifactFolder, verify_file
from tts_bench.custody.gate import evaluate
from tts_bench.custody.stale import dependents, retire_replaced
from tts_bench.deployment import OperatorBounds
from tts_bench.errors import TtsBenchError, printable
from tts_bench.measure.ladder.raw_record import raw_path
from tts_bench.measure.samples import samples_path
from tts_bench.planning.from_files import plan_from_files
from tts_bench.planning.gate import GateCondition, GateQuery
from tts_bench.planning.steps import PlanRequest

LOCAL_FINGERPRINT = EMULATED_FINGERPRINT.model_copy(
    update={"instance_type": "local-test cpu", "transport": Transport.LOCAL_HTTP}
)


def committed() -> list[Path]:
    return sorted(MEASUREMENTS.rglob("*.json"))


def is_checked_kind(path: Path) -> bool:
    data = json.loads(path.read_text(encoding="utf-8"))
    return isinstance(data, dict) and ("artifact" in data or data.get("summary") == "gpu-summary")


@pytest.mark.parametrize(
    "path",
    [p for p in committed() if is_checked_kind(p)],
    ids=lambda p: str(p.relative_to(MEASUREMENTS)),
)
def test_every_committed_artifact_follows_from_what_it_was_made_from(path: Path) -> None:
    checked = verify_file(path)
    assert checked.line().startswith(f"ok {path}")


def test_what_is_not_an_artifact_is_refused_in_one_line() -> None:
    others = [p for p in committed() if not is_checked_kind(p)]
    assert any(p.name == "g2p-cpu.json" for p in others)
    for path in others:
        with pytest.raises(TtsBenchError, match="not an artifact") as refused:
            verify_file(path)
        assert "\n" not in str(refused.value)


def test_verify_passes_on_the_committed_folder_and_acts_on_the_project_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["verify", *map(str, sorted(MEASUREMENTS.glob("*.json")))]) == 0
    (tmp_path / "Pulumi.yaml").write_text("name: clone\nruntime: python\n")
    measured_set(tmp_path / "measurements")
    monkeypatch.chdir(tmp_path)
    capsys.readouterr()
    assert main(["verify"]) == 0
    out = capsys.readouterr().out
    assert out.count("\nok ") + out.startswith("ok ") == 3 and str(MEASUREMENTS) not in out


@pytest.fixture
def emulated(tmp_path: Path) -> MeasuredSet:
    return measured_set(tmp_path / "emulated")


@pytest.fixture
def local(tmp_path: Path) -> MeasuredSet:
    """A measured local-http set: no CloudWatch, no verification rungs."""
    folder = tmp_path / "local"
    folder.mkdir()
    from tests.measured_set import write_ladder, write_ttotal

    qmax = write_ladder(folder, LOCAL_FINGERPRINT, "measured")
    ttotal = write_ttotal(folder, qmax, LOCAL_FINGERPRINT, "measured")
    request = PlanRequest(peak_rps=100, trough_rps=5, rule="fleet")
    return MeasuredSet(qmax, ttotal, plan_from_files(qmax, ttotal, request, folder).path)


def refusal(path: Path) -> str:
    with pytest.raises(TtsBenchError) as refused:
        ArtifactFolder(path.parent).check(path)
    message = str(refused.value)
    assert "\n" not in message
    return message


@pytest.mark.parametrize("which", ["emulated", "local"])
def test_sets_made_from_raw_data_check(which: str, request: pytest.FixtureRequest) -> None:
    made: MeasuredSet = request.getfixturevalue(which)
    folder = ArtifactFolder(made.plan.parent)
    lines = [folder.check(p).line() for p in (made.qmax, made.ttotal, made.plan)]
    assert "recomputed from" in lines[0] and "re-derived from" in lines[2], lines
    if which == "emulated":
        # The two thresholds and the fleet level (its invocations over two whole minutes).
        assert "3 verification rungs" in lines[0] and "CloudWatch ratios" in lines[0]


def _edit(path: Path, change: Callable[[dict], None]) -> None:
    data = json.loads(path.read_text(encoding="utf-8"))
    change(data)
    path.write_text(json.dumps(data, indent=2), encoding="utf-8")


@pytest.mark.parametrize(
    ("file", "change", "named"),
    [
        ("qmax", lambda d: d["rungs"][2].update(achieved_rps=d["rungs"][2]["achieved_rps"] * 2),
         "rungs[2].achieved_rps is"),
        ("qmax", lambda d: d["verification"][0].update(concurrency=37), "verification"),
        ("qmax", lambda d: d["verification"][1]["cloudwatch_ratios"].update({"Maximum/10s": 0.5}),
         "verification[1].cloudwatch_ratios.Maximum/10s is 0.5"),
        ("qmax", lambda d: d["fingerprint"].update(image_digest="sha256:" + "cd" * 31 + "ce"),
         "fingerprint.image_digest is"),
        ("qmax", lambda d: d["provenance"].update(kind="measured"), "provenance name it"),
        ("ttotal", lambda d: d["stages"][3].update(seconds=1.0), "counted stages sum to"),
        ("ttotal", lambda d: d["events"]["points"][4].update(epoch_s=0.0), "stage"),
        ("ttotal", lambda d: d.pop("events"), "events: not recorded"),
        ("plan", lambda d: d["findings"][2].update(verdict="ok"),
         'findings[fleet_sizing].verdict is "ok"'),
        ("plan", lambda d: d["sources"]["qmax"].update(sha256="0" * 64), "sources.qmax.sha256"),
        ("plan", lambda d: d["provenance"].update(kind="measured"), "provenance.kind is"),
    ],
)  # fmt: skip
def test_each_edit_of_a_measured_set_is_refused_naming_the_field(
    emulated: MeasuredSet, file: str, change: Callable[[dict], None], named: str
) -> None:
    path = getattr(emulated, file)
    _edit(path, change)
    assert named in refusal(path)


def test_raw_data_missing_or_edited_is_refused(emulated: MeasuredSet) -> None:
    raw = raw_path(emulated.qmax)
    data = json.loads(gzip.decompress(raw.read_bytes()))
    data["cloudwatch"]["Maximum/10s"] = [
        [ts, value * 2] for ts, value in data["cloudwatch"]["Maximum/10s"]
    ]
    raw.write_bytes(gzip.compress(json.dumps(data).encode()))
    assert "cloudwatch_ratio is" in refusal(emulated.qmax)
    raw.unlink()
    missing = refusal(emulated.qmax)
    assert "raw.json.gz is missing" in missing and "cloudwatch_ratio is 1.0" in missing
    samples_path(emulated.qmax).unlink()
    assert "samples.csv.gz is missing" in refusal(emulated.qmax)


def test_a_ladder_edited_and_planned_again_is_refused_by_the_gate(emulated: MeasuredSet) -> None:
    """Edit a rung, then plan again from the edit: the plan re-derives, its source does not."""
    _edit(emulated.qmax, lambda d: d["rungs"][3].update(achieved_rps=40.0))
    # The T_total names the ladder it was judged against: planning again needs the allowance.
    request = PlanRequest(peak_rps=5000, trough_rps=5, rule="published", allow_config_mismatch=True)
    plan_from_files(emulated.qmax, emulated.ttotal, request, emulated.plan.parent)
    plan = load_artifact(emulated.plan, PlanArtifact)
    fp = plan.fingerprint
    assert fp is not None
    result = evaluate(
        emulated.plan.parent,
        GateQuery(model=fp.model, instance_type=fp.instance_type, image_digest=fp.image_digest,
                  bounds=OperatorBounds(min_instances=1, max_instances=20), rule="published",
                  image_is_local=True),
    )  # fmt: skip
    assert result.condition is GateCondition.NOT_REDERIVED
    assert "sources.qmax: " in result.reason and "rungs[3].achieved_rps is 40.0" in result.reason


def test_a_plan_whose_ladder_a_later_run_replaced_is_removed_with_what_names_it(
    emulated: MeasuredSet, tmp_path: Path
) -> None:
    folder = emulated.plan.parent
    keep = folder / "plan-unrelated.json"
    shutil.copy(MEASUREMENTS / "plan-kokoro-82m-g5xlarge-8b1b96bc.json", keep)
    before = {p: sha256_file(p) for p in folder.glob("*.json")}
    again = load_artifact(emulated.qmax, QmaxArtifact)
    emulated.qmax.write_text(dump_json(again).replace("synthetic", "synthetic, again"))
    assert dependents(folder, {before[emulated.qmax]}) == [emulated.plan, emulated.ttotal] or (
        set(dependents(folder, {before[emulated.qmax]})) == {emulated.plan, emulated.ttotal}
    )
    said: list[str] = []
    removed = retire_replaced(before, folder, said.append)
    assert set(removed) == {emulated.plan, emulated.ttotal}
    assert not emulated.plan.exists() and not emulated.ttotal.exists() and keep.exists()
    assert emulated.qmax.exists() and samples_path(emulated.qmax).exists()
    assert any("removed plan-" in line for line in said)


def test_a_lone_surrogate_in_a_source_hash_is_refused_in_one_printable_line(
    emulated: MeasuredSet, capsys: pytest.CaptureFixture[str]
) -> None:
    text = emulated.ttotal.read_text(encoding="utf-8")
    sha = json.loads(text)["qmax_sha256"]
    emulated.ttotal.write_text(text.replace(sha, "\\udc80" + sha[1:]), encoding="utf-8")
    code = main(["plan", "--qmax", str(emulated.qmax), "--ttotal", str(emulated.ttotal),
                 "--peak-rps", "10", "--out", str(emulated.plan.parent / "out")])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and "qmax_sha256" in err, err
    assert "Traceback" not in err


def test_the_first_difference_names_items_by_name_and_forgives_float_noise() -> None:
    recorded = {"a": [{"name": "x", "v": 1.0}, {"name": "y", "v": 2.0}], "b": 3}
    assert first_difference(recorded, json.loads(json.dumps(recorded))) is None
    noisy = {"a": [{"name": "x", "v": 1.0 + 1e-12}, {"name": "y", "v": 2.0}], "b": 3.0}
    assert first_difference(recorded, noisy) is None
    edited = {"a": [{"name": "x", "v": 1.0}, {"name": "y", "v": 2.5}], "b": 3}
    assert first_difference(recorded, edited) == Difference("a[y].v", 2.0, 2.5)
    assert first_difference(recorded, {**recorded, "b": True}) == Difference("b", 3, True)
    assert first_difference(recorded, edited, exempt=exempt_paths([r"a\[y\]\.v"])) is None


@given(value=st.floats(allow_nan=False, allow_infinity=False, min_value=-1e12, max_value=1e12))
def test_a_number_differs_exactly_when_it_moves_past_the_tolerance(value: float) -> None:
    assert first_difference({"x": value}, {"x": value * (1 + 1e-12)}) is None
    moved = value + max(1.0, abs(value)) * 1e-6
    assert first_difference({"x": value}, {"x": moved}) is not None


@given(text=st.text())
def test_every_refusal_prints_as_one_line(text: str) -> None:
    line = printable(text)
    assert "\n" not in line and "\r" not in line
    line.encode("utf-8")  # never a lone surrogate


def test_preview_and_verify_pick_the_project_in_the_current_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tts_bench.cli.project import project_root

    monkeypatch.chdir(tmp_path)
    assert project_root() == MEASUREMENTS.parent  # no project here: the checkout's
    (tmp_path / "Pulumi.yaml").write_text("name: clone\n")
    assert project_root() == tmp_path
    os.chdir(MEASUREMENTS.parent)
