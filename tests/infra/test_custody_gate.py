"""The gate re-derives: the program's gate, the policy pack and `tts-bench verify` refuse a plan
edited by hand, in one line naming the field, and a plan whose sources were edited.

The issue's edit of the committed published plan (target and C_scale_max 37.5 → 45, scale-in
cooldown 960 → 60, queue bound 50 → 80) and a sample of one-field edits (the full property
test is tests/core/test_custody_hostile.py) go through all three; the preview runs the issue's
edit through the program and the pack as `pulumi preview` would.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from tts_policies import scaling_plan

from tests.infra.conftest import REFERENCE_DIGEST, copy_program
from tests.infra.test_policies import _set, deployment, validate
from tts_bench.artifacts.files import load_artifact, sha256_file
from tts_bench.artifacts.plan import PlanArtifact
from tts_bench.artifacts.reference import PUBLISHED_RUN
from tts_bench.cli import main
from tts_bench.custody.folder import verify_file
from tts_bench.custody.gate import evaluate
from tts_bench.deployment import OperatorBounds
from tts_bench.errors import TtsBenchError
from tts_bench.planning.gate import GateQuery

PUBLISHED = "plan-kokoro-82m-g5xlarge-8b1b96bc.json"
QUERY = GateQuery(
    model="kokoro-82m", instance_type="ml.g5.xlarge", image_digest=REFERENCE_DIGEST,
    bounds=OperatorBounds(min_instances=1, max_instances=20), rule="published",
)  # fmt: skip


def issues_edit(plan: dict[str, Any]) -> None:
    plan.update(scaling_target_value=45.0, c_scale_max=45.0, scale_in_cooldown_s=60)
    plan.update(queue_max_depth=80)


def consistent_edit(plan: dict[str, Any]) -> None:
    """The issue's numbers, written into every place the plan states them."""
    issues_edit(plan)
    plan["queue_max_depth"] = plan["inputs"]["q_max"] = 80
    tracking, step = plan["deploy"]["policies"]
    tracking["target_value"] = tracking["high_alarm"]["threshold"] = 45.0
    step["cooldown_s"] = 60


def source_rung_edit(folder: Path) -> None:
    path = folder / "qmax-kokoro-82m-response-stream-g5xlarge-8b1b96bc.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    data["rungs"][3]["achieved_rps"] = 30.0
    path.write_text(json.dumps(data, indent=2), encoding="utf-8")
    plan = folder / PUBLISHED
    edited = json.loads(plan.read_text(encoding="utf-8"))
    edited["sources"]["qmax"]["sha256"] = sha256_file(path)
    plan.write_text(json.dumps(edited, indent=2), encoding="utf-8")


EDITS: dict[str, tuple[Callable[[dict[str, Any]], None] | None, str]] = {
    "the issue's edit": (issues_edit, "queue_max_depth 80"),
    "the issue's numbers everywhere": (consistent_edit, "c_scale_max is 45.0"),
    "a verdict": (
        lambda p: p["findings"][2].update(verdict="ok"),
        'findings[fleet_sizing].verdict is "ok"',
    ),
    "a source hash": (
        lambda p: p["sources"]["ttotal"].update(sha256="0" * 64),
        "sources.ttotal.sha256",
    ),
    "provenance": (lambda p: p["provenance"].update(kind="measured"), "provenance.kind is"),
    "a deployed cooldown": (
        lambda p: p["deploy"]["policies"][1].update(cooldown_s=60),
        "deploy.policies[1].cooldown_s 60",
    ),
    "a rung figure of its ladder": (None, "rungs[3].achieved_rps is 30.0"),
}


@pytest.fixture
def edited(tmp_path: Path, request: pytest.FixtureRequest) -> tuple[Path, str]:
    """The reference plans' folder with one edit made; the field the refusal must name."""
    folder = tmp_path / "measurements"
    committed = Path(scaling_plan.plans_dir(None))
    (folder / PUBLISHED_RUN).parent.mkdir(parents=True)
    shutil.copy(committed / PUBLISHED_RUN, folder / PUBLISHED_RUN)
    plan = load_artifact(committed / PUBLISHED, PlanArtifact)
    shutil.copy(committed / PUBLISHED, folder)
    for source in plan.sources.values():
        shutil.copy(committed.parent / source.path, folder)
    edit, named = EDITS[request.param]
    if edit is None:
        source_rung_edit(folder)
    else:
        data = json.loads((folder / PUBLISHED).read_text(encoding="utf-8"))
        edit(data)
        (folder / PUBLISHED).write_text(json.dumps(data, indent=2), encoding="utf-8")
    return folder, named


def the_deployment_of(plan_file: Path) -> Any:
    """The stack as the program would build it from the edited plan's own numbers."""
    data = json.loads(plan_file.read_text(encoding="utf-8"))

    def change(props: dict[str, dict[str, Any]]) -> None:
        for path, value in (
            ("tracking.targetTrackingScalingPolicyConfiguration.targetValue",
             data["scaling_target_value"]),
            ("step.stepScalingPolicyConfiguration.cooldown", float(data["scale_in_cooldown_s"])),
            ("model.primaryContainer.environment.MAX_QUEUE_DEPTH", str(data["queue_max_depth"])),
        ):  # fmt: skip
            _set(path, value)(props)

    return deployment(change)


@pytest.mark.parametrize("edited", list(EDITS), indirect=True)
def test_an_edited_plan_is_refused_by_the_gate_the_pack_and_verify_naming_the_field(
    edited: tuple[Path, str],
) -> None:
    folder, named = edited
    with pytest.raises(TtsBenchError) as refused:
        verify_file(folder / PUBLISHED)
    assert named in str(refused.value) and "\n" not in str(refused.value)

    gate = evaluate(folder, QUERY)
    assert not gate.enabled and named in gate.reason, gate.reason

    stack = the_deployment_of(folder / PUBLISHED)
    violations = validate(scaling_plan.POLICY, stack.args({"plansDir": str(folder)}))
    assert any("missing plan" in v and named in v for v in violations), violations
    assert scaling_plan.POLICY.enforcement_level.value == "mandatory"


def test_the_committed_plans_still_pass_the_gate_and_the_pack() -> None:
    folder = Path(scaling_plan.plans_dir(None))
    for rule in ("published", "fleet"):
        result = evaluate(folder, QUERY.model_copy(update={"rule": rule}))
        assert result.enabled, result.reason
    assert validate(scaling_plan.POLICY, deployment().args()) == []


@pytest.mark.slow  # two Python processes: the program under mocks and the pack
def test_preview_runs_the_issues_edit_without_scaling_and_says_which_field(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    program = copy_program(tmp_path)
    shutil.copytree(Path(scaling_plan.plans_dir(None)).parent / "policies", program / "policies")
    plan = program / "measurements" / PUBLISHED
    data = json.loads(plan.read_text(encoding="utf-8"))
    issues_edit(data)
    plan.write_text(json.dumps(data, indent=2), encoding="utf-8")
    monkeypatch.chdir(program)
    assert main(["preview", "--stack", "dev"]) == 0
    out = capsys.readouterr().out
    assert "aws:appautoscaling/policy:Policy" not in out
    assert "autoscaling and its alarms are NOT created" in out and "queue_max_depth 80" in out
