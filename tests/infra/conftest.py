"""Fixtures for the Pulumi program, the policy pack, `preview` and `image push`."""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.measured_set import EMULATED_FINGERPRINT, measured_set
from tts_bench.artifacts.companions import beside, json_digests
from tts_bench.artifacts.files import load_artifact
from tts_bench.artifacts.plan import PlanArtifact

REPO = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).resolve().parent / "fixtures"
PACK = REPO / "policies"
REFERENCE_PLAN = REPO / "measurements" / "plan-kokoro-82m-g5xlarge-8b1b96bc.json"
REFERENCE_DIGEST = "sha256:8b1b96bc4dc0b30ddd84d8fe37af7c490937333c44a9f8f7d77b918c3d7eaced"
OTHER_DIGEST = "sha256:" + "ab" * 32
REGISTRY_REPO = "123456789012.dkr.ecr.us-east-1.amazonaws.com/tts-bench-kokoro"

# The pack's rules import as the Pulumi CLI imports them: from the pack folder.
if str(PACK) not in sys.path:
    sys.path.insert(0, str(PACK))


@pytest.fixture(scope="session")
def reference_plan(reference_plan_path: Path) -> PlanArtifact:
    return load_artifact(reference_plan_path, PlanArtifact)


@pytest.fixture
def make_plan(reference_plan: PlanArtifact) -> Callable[..., PlanArtifact]:
    """The reference plan with some fields replaced (validated again)."""

    def make(**changes: Any) -> PlanArtifact:
        data = reference_plan.model_dump(mode="json")
        fingerprint = changes.pop("fingerprint", {})
        data["fingerprint"].update(fingerprint)
        data.update(changes)
        return PlanArtifact.model_validate(data)

    return make


@pytest.fixture
def infeasible_plan(make_plan: Callable[..., PlanArtifact]) -> PlanArtifact:
    stop = {"name": "slo_ceiling", "verdict": "stop", "message": "W_max <= 0"}
    findings = [stop, *make_plan().model_dump(mode="json")["findings"]]
    return make_plan(feasible=False, findings=findings)


@pytest.fixture(scope="session")
def emulated_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A plan measured through the local cloud on the reference image (an emulated ladder and
    T_total from synthetic raw data), with everything it was made from."""
    folder = tmp_path_factory.mktemp("emulated")
    fingerprint = EMULATED_FINGERPRINT.model_copy(update={"image_digest": REFERENCE_DIGEST})
    measured_set(folder, fingerprint, "emulated")
    return folder


@pytest.fixture
def emulated_plan(emulated_folder: Path) -> PlanArtifact:
    (path,) = emulated_folder.glob("plan-*.json")
    return load_artifact(path, PlanArtifact)


SOURCE_FOLDERS = (REPO / "measurements",)


def write_plans(folder: Path, plans: list[PlanArtifact], search: tuple[Path, ...]) -> None:
    """`plans` as `plan-test-<i>.json` in `folder`, beside the artifacts each names (copied,
    with their raw data, from the first of `search` that holds them)."""
    folder.mkdir(exist_ok=True)
    for index, plan in enumerate(plans):
        (folder / f"plan-test-{index}.json").write_text(plan.model_dump_json(), encoding="utf-8")
        wanted = {source.sha256 for source in plan.sources.values()}
        for where in search:
            for path, digest in json_digests(where).items():
                if digest in wanted:
                    for part in beside(path):
                        shutil.copy(part, folder / part.name)


@pytest.fixture
def plans_dir(tmp_path: Path, emulated_folder: Path) -> Callable[..., Path]:
    """A measurements folder holding exactly the given plans and the artifacts they name."""

    def make(*plans: PlanArtifact, name: str = "measurements") -> Path:
        folder = tmp_path / name
        write_plans(folder, list(plans), (*SOURCE_FOLDERS, emulated_folder))
        return folder

    return make


DEV_CONFIG = {
    "aws:region": "us-east-1",
    "tts-bench:endpointName": "speech-kokoro-82m",
    "tts-bench:model": "kokoro-82m",
    "tts-bench:instanceType": "ml.g5.xlarge",
    "tts-bench:image": f"{REGISTRY_REPO}@{REFERENCE_DIGEST}",
    "tts-bench:minInstances": 1,
    "tts-bench:maxInstances": 300,
    "tts-bench:sloMs": 3000,
    "tts-bench:surgeRatio": 1.25,
    "tts-bench:measurementsDir": "measurements",
    "tts-bench:planRule": "published",
    "tts-bench:modelRevision": "fbba31e67ad83eb66394c926627e99d35abeb087",
}


def copy_program(
    parent: Path,
    plans: list[PlanArtifact] | None = None,
    search: tuple[Path, ...] = SOURCE_FOLDERS,
    **config: Any,
) -> Path:
    """The repo's program in `parent/program`, with a `dev` stack of DEV_CONFIG updated by
    `config` (None removes a key) and a measurements folder holding `plans` (default: the
    committed reference plan) and the artifacts they name (found in `search`)."""
    folder = parent / "program"
    folder.mkdir()
    for name in ("__main__.py", "Pulumi.yaml"):
        shutil.copy(REPO / name, folder / name)
    shutil.copytree(
        REPO / "components", folder / "components", ignore=shutil.ignore_patterns("__pycache__")
    )
    updates = {(k if ":" in k else f"tts-bench:{k}"): v for k, v in config.items()}
    values = {k: v for k, v in {**DEV_CONFIG, **updates}.items() if v is not None}
    (folder / "Pulumi.dev.yaml").write_text(json.dumps({"config": values}), encoding="utf-8")
    measurements = folder / "measurements"
    measurements.mkdir()
    if plans is not None:
        write_plans(measurements, plans, search)
        return folder
    shutil.copy(REFERENCE_PLAN, measurements)
    for source in load_artifact(REFERENCE_PLAN, PlanArtifact).sources.values():
        shutil.copy(REPO / source.path, measurements)
    return folder


@pytest.fixture
def program_copy(tmp_path: Path, emulated_folder: Path) -> Callable[..., Path]:
    """`copy_program` into this test's folder (an emulated plan's sources found too)."""

    def make(plans: list[PlanArtifact] | None = None, **config: Any) -> Path:
        return copy_program(tmp_path, plans, (*SOURCE_FOLDERS, emulated_folder), **config)

    return make


# A day the fleet rule cannot follow: 10 requests/s, then 300 from minute 60 to 80.
SCHEDULED_DAY = [10.0] * 60 + [300.0] * 20 + [10.0] * 80


@pytest.fixture(scope="session")
def scheduled_fleet_plan(reference_plan_path: Path) -> PlanArtifact:
    """The committed fleet plan with the schedule `SCHEDULED_DAY` gives (`plan --schedule`)."""
    from tts_bench.planning.schedule.attach import with_schedule

    fleet = load_artifact(
        reference_plan_path.parent / "plan-kokoro-82m-fleet-g5xlarge-8b1b96bc.json", PlanArtifact
    )
    return with_schedule(fleet, "a hand-made day", SCHEDULED_DAY)


@pytest.fixture(scope="session")
def four_hourly_plan(reference_plan_path: Path) -> PlanArtifact:
    """The committed fleet plan with the schedule of a day that repeats every 4 h."""
    from tts_bench.planning.schedule.attach import with_schedule

    fleet = load_artifact(
        reference_plan_path.parent / "plan-kokoro-82m-fleet-g5xlarge-8b1b96bc.json", PlanArtifact
    )
    return with_schedule(fleet, "a 4 h day", SCHEDULED_DAY + [10.0] * 80, period_s=14_400)
