"""Hostile edits: one field at a time of each committed artifact (and of an emulated set made
from raw data), every kind of value: numbers, rung figures, hashes, verdicts, provenance.

Each edit is refused by `tts-bench verify` and by the gate, in one printable line that names
the field, or it changes nothing that deploys: it lies on a path custody takes as recorded
(`custody.folder.TAKEN_AS_RECORDED`: descriptive text, when and by what a file was made,
inputs such as the schedule whose edit the recomputation shows to change nothing), and a plan
re-derived from the edited source deploys the same numbers as before. The pack and the preview
run a sample of such edits in tests/infra/test_custody_gate.py.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import MEASUREMENTS
from tests.measured_set import measured_set
from tts_bench.artifacts.companions import beside
from tts_bench.artifacts.files import load_artifact
from tts_bench.artifacts.plan import PlanArtifact
from tts_bench.artifacts.qmax import QmaxArtifact
from tts_bench.artifacts.reference import PUBLISHED_RUN
from tts_bench.artifacts.simulation import SimulationArtifact
from tts_bench.artifacts.ttotal import TtotalArtifact
from tts_bench.custody.folder import TAKEN_AS_RECORDED, ArtifactFolder
from tts_bench.custody.gate import evaluate
from tts_bench.custody.plans import rederive
from tts_bench.deployment import OperatorBounds
from tts_bench.errors import TtsBenchError
from tts_bench.planning.gate import GateQuery

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "15"))
COMMITTED = (
    "plan-kokoro-82m-g5xlarge-8b1b96bc.json",
    "plan-kokoro-82m-fleet-g5xlarge-8b1b96bc.json",
    "qmax-kokoro-82m-response-stream-g5xlarge-8b1b96bc.json",
    "ttotal-kokoro-82m-force-desired-g5xlarge-8b1b96bc.json",
    "qmax-kokoro-82m-local-http-localnvidiah200-23dc6a61-ed1e5e.json",
    "simulate-kokoro-82m-g5xlarge-8b1b96bc-d881952d.json",
)


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The committed artifacts above with what they name, and an emulated set beside them."""
    here = tmp_path_factory.mktemp("hostile")
    for name in (*COMMITTED, "qmax-kokoro-82m-local-http-localnvidiah200-e85b56e3-47ee6d.json"):
        for part in beside(MEASUREMENTS / name):
            shutil.copy(part, here / part.name)
    (here / PUBLISHED_RUN).parent.mkdir()
    shutil.copy(MEASUREMENTS / PUBLISHED_RUN, here / PUBLISHED_RUN)
    measured_set(here)
    return here


def targets(folder: Path) -> list[Path]:
    return sorted(p for p in folder.glob("*.json"))


def leaves(
    value: Any, path: tuple[str | int, ...] = ()
) -> Iterator[tuple[tuple[str | int, ...], Any]]:
    if isinstance(value, dict):
        for key, item in value.items():
            yield from leaves(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from leaves(item, (*path, index))
    else:
        yield path, value


def dotted(path: tuple[str | int, ...]) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
    return out


@st.composite
def edits(draw: st.DrawFn, value: Any) -> Any:
    """A different value of the same kind, or of another kind (the loader's business)."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int | float):
        choices = [value + 1, value * 1.5 + 0.5, -value - 1, "1"]
        if value:
            choices.append(0)
        return draw(st.sampled_from(choices))
    if isinstance(value, str):
        flipped = value[:-1] + ("0" if value[-1:] != "0" else "1") if value else "x"
        return draw(st.sampled_from([flipped, value + "x", "", "\udc80"]))
    return draw(st.sampled_from([1.0, "x", True]))


def set_at(data: Any, path: tuple[str | int, ...], value: Any) -> None:
    node = data
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value


def names_the_field(message: str, path: tuple[str | int, ...]) -> bool:
    """The line names the edited field, or the object holding it (`fingerprint`, `inputs`)."""
    return any(key in message for key in path if isinstance(key, str))


def deployed(plan: PlanArtifact) -> dict[str, Any]:
    """What a plan deploys: its thresholds and units, cooldowns, bounds, queue bound, alarm,
    deploy shape, feasibility and rule."""
    keys = (
        "rule", "feasible", "scaling_target_value", "scale_in_threshold", "target_units",
        "scale_in_units", "scale_out_cooldown_s", "scale_in_cooldown_s", "queue_max_depth",
        "first_chunk_alarm_ms", "min_instances", "max_instances", "deploy", "fingerprint",
    )  # fmt: skip
    return plan.model_dump(mode="json", include=set(keys))


def the_same_deploys(folder: Path, edited: Path) -> None:
    """Every plan in the folder made from `edited`'s original re-derives, from the edited
    file, to the same deployed numbers."""
    for plan_path in folder.glob("plan-*.json"):
        plan = load_artifact(plan_path, PlanArtifact)
        names = {s.path.rsplit("/", 1)[-1] for s in plan.sources.values()}
        if edited.name not in names or plan.traffic_check is not None:
            continue
        sources = {k: folder / s.path.rsplit("/", 1)[-1] for k, s in plan.sources.items()}
        qmax = load_artifact(sources["qmax"], QmaxArtifact)
        # A ladder judged at another SLO plans at that SLO.
        inputs = plan.inputs.model_copy(update={"slo_ms": qmax.slo_ms})
        again = rederive(
            plan.model_copy(update={"inputs": inputs}),
            qmax,
            load_artifact(sources["ttotal"], TtotalArtifact),
        )
        assert deployed(again) == deployed(plan), edited.name


def gate_query(plan: PlanArtifact) -> GateQuery:
    fp = plan.fingerprint
    assert fp is not None
    return GateQuery(
        model=fp.model, instance_type=fp.instance_type, image_digest=fp.image_digest,
        performance_env=fp.performance_env, bounds=OperatorBounds(min_instances=1, max_instances=20),
        rule=plan.rule, image_is_local=True,
    )  # fmt: skip


@settings(
    max_examples=EXAMPLES * 8,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_a_one_field_edit_is_refused_naming_the_field_or_deploys_nothing_new(
    folder: Path, data: st.DataObject
) -> None:
    target = data.draw(st.sampled_from(targets(folder)), label="file")
    original = ORIGINALS.setdefault(target, target.read_bytes())
    document = json.loads(original)
    path, value = data.draw(st.sampled_from(list(leaves(document))), label="field")
    edit = data.draw(edits(value), label="edit")
    set_at(document, path, edit)
    try:
        target.write_text(json.dumps(document, indent=2), encoding="utf-8")
        _judge(folder, target, document, path)
    finally:
        target.write_bytes(original)


def _judge(
    folder: Path, target: Path, document: dict[str, Any], path: tuple[str | int, ...]
) -> None:
    where = dotted(path)
    kind = str(document.get("artifact"))
    recorded_as_is = any(re.fullmatch(p, where) for p in TAKEN_AS_RECORDED.get(kind, ()))
    try:
        ArtifactFolder(folder).check(target)
    except TtsBenchError as exc:
        message = str(exc)
        assert "\n" not in message and message.isprintable(), message
        # An edit of what changes nothing may still be refused (a pinned file is no longer it).
        harmless = recorded_as_is or unchanged(target)
        assert harmless or names_the_field(message, path), (where, message)
        if document.get("artifact") == "plan" and isinstance(document.get("fingerprint"), dict):
            _the_gate_refuses(folder, target)
        return
    if unchanged(target):
        return  # an edit the loader reads back as the same value ("1" for 1): nothing changed
    assert recorded_as_is, f"{target.name}: {where} edited and nothing refused it"
    if kind in ("qmax", "ttotal"):
        the_same_deploys(folder, target)


MODELS = {"plan": PlanArtifact, "qmax": QmaxArtifact, "ttotal": TtotalArtifact,
          "simulation": SimulationArtifact}  # fmt: skip
ORIGINALS: dict[Path, bytes] = {}


def loaded(target: Path) -> dict[str, Any]:
    return _as_loaded(json.loads(target.read_text(encoding="utf-8")))


def loaded_before(target: Path) -> dict[str, Any]:
    return _as_loaded(json.loads(ORIGINALS[target]))


def unchanged(target: Path) -> bool:
    """The loader reads the edited file back as the original (`"1"` for `1`)."""
    try:
        return loaded(target) == loaded_before(target)
    except (ValueError, KeyError, TypeError):  # no longer loads, or no longer that kind
        return False


def _as_loaded(data: dict[str, Any]) -> dict[str, Any]:
    """What the loader makes of it (`json.loads`, then the model)."""
    return MODELS[data["artifact"]].model_validate(data).model_dump(mode="json")


def _the_gate_refuses(folder: Path, target: Path) -> None:
    original = json.loads(target.read_text(encoding="utf-8"))
    try:
        plan = PlanArtifact.model_validate(original)
    except ValueError:
        return  # the loader refuses it: the gate skips it and names why (test_custody_gate)
    result = evaluate(folder, gate_query(plan))
    assert not (result.enabled and result.plan_path == str(target)), result.reason


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (lambda inputs: inputs.pop("aws_semantics"), "records no AWS semantics"),
        (
            lambda inputs: inputs["aws_semantics"].update(tracking_low_datapoints=3),
            "is not the hash of its fields",
        ),
    ],
)
def test_a_simulation_without_its_reading_of_aws_or_with_it_edited_is_refused(
    folder: Path, edit: Any, expected: str
) -> None:
    target = folder / "simulate-kokoro-82m-g5xlarge-8b1b96bc-d881952d.json"
    original = target.read_bytes()
    document = json.loads(original)
    edit(document["inputs"])
    try:
        target.write_text(json.dumps(document, indent=2), encoding="utf-8")
        with pytest.raises(TtsBenchError) as caught:
            ArtifactFolder(folder).check(target)
        assert "inputs.aws_semantics" in str(caught.value) and expected in str(caught.value)
    finally:
        target.write_bytes(original)
