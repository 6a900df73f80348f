"""Artifact files: one clear line for a broken file, atomic writes, nothing overwritten."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.core.ladders import FINGERPRINT, qmax_artifact, serial_ladder, ttotal_artifact
from tts_bench.artifacts.files import load_artifact, write_artifact
from tts_bench.artifacts.fingerprint import (
    Transport,
    plan_filename,
    qmax_filename,
    ttotal_filename,
)
from tts_bench.artifacts.plan import PlanArtifact
from tts_bench.artifacts.qmax import QmaxArtifact
from tts_bench.artifacts.ttotal import TtotalArtifact
from tts_bench.errors import ArtifactError
from tts_bench.planning.plan import _provenance


def _broken(path: Path, data: dict, mutate) -> Path:
    mutate(data)
    out = path.with_name("broken-" + path.name)
    out.write_text(json.dumps(data))
    return out


def _set(key_path: str, value):
    def mutate(data: dict) -> None:
        *parents, last = key_path.split(".")
        node = data
        for part in parents:
            node = node[int(part)] if part.isdigit() else node[part]
        node[last] = value

    return mutate


@pytest.mark.parametrize(
    ("mutate", "field", "fragment"),
    [
        (lambda d: d.pop("q_max"), "q_max", "Field required"),
        (_set("slo_ms", "three seconds"), "slo_ms", "Input should be a valid number"),
        (_set("surprise", 1), "surprise", "Extra inputs are not permitted"),
        (_set("q_max", 40), "(top level)", "q_max=40 disagrees with the rungs (which give 50"),
        (_set("rungs.2.concurrency", 1), "rungs", "rung concurrencies must be strictly ascending"),
        (_set("rungs.0.ok", 99999), "rungs.0", "ok 99999 + rejected 0 + errors 0 is not completed"),
        (
            _set("fingerprint.image_digest", "latest"),
            "fingerprint.image_digest",
            "should match pattern",
        ),
        (
            _set("fingerprint.transport", "carrier-pigeon"),
            "fingerprint.transport",
            "Input should be",
        ),
        (_set("schema_version", 2), "schema_version", "Input should be 1"),
    ],
)
def test_hand_broken_qmax_gives_one_line_naming_file_and_field(
    reference_qmax_path, tmp_path, mutate, field, fragment
) -> None:
    data = json.loads(reference_qmax_path.read_text())
    broken = _broken(tmp_path / "qmax.json", data, mutate)
    with pytest.raises(ArtifactError) as info:
        load_artifact(broken, QmaxArtifact)
    message = str(info.value)
    assert message.startswith(f"{broken}: {field}: ")
    assert fragment in message
    assert "\n" not in message


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (
            _set("measured_total_s", 200.0),
            "counted stages sum to 260.100 s but measured_total_s is 200.000 s",
        ),
        (
            _set("planned_total_s", 300.0),
            "planned_total_s 300.0 != measured_total_s + policy_lag_bound_s",
        ),
        (_set("stages.1.measured", False), "is a bound (measured=false) and needs a reason"),
        (_set("trigger", "magic"), "trigger: Input should be"),
    ],
)
def test_hand_broken_ttotal(reference_ttotal_path, tmp_path, mutate, expected) -> None:
    data = json.loads(reference_ttotal_path.read_text())
    broken = _broken(tmp_path / "ttotal.json", data, mutate)
    with pytest.raises(ArtifactError) as info:
        load_artifact(broken, TtotalArtifact)
    assert expected in str(info.value)


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (_set("feasible", False), "feasible must be true exactly when no finding is 'stop'"),
        (_set("findings.0.verdict", "ok"), "findings must be ordered worst first"),
        (_set("max_instances", 0), "max_instances: Input should be greater than 0"),
    ],
)
def test_hand_broken_plan(reference_plan_path, tmp_path, mutate, expected) -> None:
    data = json.loads(reference_plan_path.read_text())
    broken = _broken(tmp_path / "plan.json", data, mutate)
    with pytest.raises(ArtifactError) as info:
        load_artifact(broken, PlanArtifact)
    assert expected in str(info.value)


def test_reference_artifacts_load(
    reference_qmax_path, reference_ttotal_path, reference_plan_path
) -> None:
    qmax = load_artifact(reference_qmax_path, QmaxArtifact)
    assert (qmax.q_max, qmax.bracketed, len(qmax.rungs)) == (50, True, 8)
    assert load_artifact(reference_ttotal_path, TtotalArtifact).measured_total_s == 260.2
    assert load_artifact(reference_plan_path, PlanArtifact).feasible


def test_write_is_atomic_and_reruns_overwrite(tmp_path) -> None:
    first = qmax_artifact(serial_ladder(service_ms=100))
    second = qmax_artifact(serial_ladder(service_ms=120))
    path = write_artifact(first, tmp_path, "q.json")
    write_artifact(second, tmp_path, "q.json")  # same fingerprint: a re-run
    assert load_artifact(path, QmaxArtifact).rungs[0].achieved_rps == pytest.approx(1000 / 120)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["q.json"], (
        "no temporary files left behind"
    )


def test_write_refuses_to_clobber_another_fingerprint(tmp_path) -> None:
    path = write_artifact(ttotal_artifact(), tmp_path, "t.json")
    before = path.read_bytes()
    other = FINGERPRINT.model_copy(update={"instance_type": "ml.g6.xlarge"})
    with pytest.raises(ArtifactError, match="another fingerprint"):
        write_artifact(ttotal_artifact(fingerprint=other), tmp_path, "t.json")
    assert path.read_bytes() == before


def test_write_refuses_to_replace_an_unreadable_file(tmp_path) -> None:
    path = tmp_path / "t.json"
    path.write_text("precious notes, not an artifact")
    with pytest.raises(ArtifactError, match="cannot be read back"):
        write_artifact(ttotal_artifact(), tmp_path, "t.json")
    assert path.read_text() == "precious notes, not an artifact"


def _emulated(artifact):
    provenance = artifact.provenance.model_copy(update={"kind": "emulated"})
    return artifact.model_copy(update={"provenance": provenance})


def test_emulated_files_are_named_apart_and_never_replace_measured_ones(tmp_path) -> None:
    # The local cloud speaks SageMaker's transports, so an emulated artifact is of one.
    measured = ttotal_artifact(
        fingerprint=FINGERPRINT.model_copy(update={"transport": Transport.RESPONSE_STREAM})
    )
    emulated = _emulated(measured)
    assert load_artifact(write_artifact(emulated, tmp_path, "e.json"), TtotalArtifact) == emulated
    fp = measured.fingerprint
    names = {ttotal_filename(fp, "force-desired", kind) for kind in ("measured", "reference")}
    assert names == {f"ttotal-kokoro-82m-force-desired-{fp.slug}.json"}
    marked = ttotal_filename(fp, "force-desired", "emulated")
    assert marked == f"ttotal-kokoro-82m-force-desired-{fp.slug}-emulated.json"
    assert qmax_filename(fp, "emulated").endswith(f"{fp.slug}-emulated.json")
    assert plan_filename(fp, "emulated") == f"plan-kokoro-82m-{fp.slug}-emulated.json"
    # Even under one name, neither kind replaces the other.
    path = write_artifact(measured, tmp_path, "t.json")
    before = path.read_bytes()
    with pytest.raises(ArtifactError, match="holds a simulated artifact and this one is emulated"):
        write_artifact(emulated, tmp_path, "t.json")
    assert path.read_bytes() == before


def test_a_plan_with_an_emulated_source_is_emulated(reference_plan_path, tmp_path) -> None:
    plan = load_artifact(reference_plan_path, PlanArtifact)
    sources = {k: v.model_copy(update={"provenance": "emulated"}) for k, v in plan.sources.items()}
    sources["ttotal"] = sources["ttotal"].model_copy(update={"provenance": "measured"})
    assert _provenance(sources, None).kind == "emulated"
    assert _provenance({"ttotal": sources["ttotal"]}, None).kind == "measured"
