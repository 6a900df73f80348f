"""`tts-bench image push` with a stand-in `docker` on PATH that records its arguments (no Docker
engine here): the commands it would run, and what it writes into the stack file."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from tests.infra.conftest import OTHER_DIGEST, REFERENCE_DIGEST, REGISTRY_REPO
from tts_bench.cli import main

STAND_IN = """#!/bin/sh
# Records its arguments; writes the digest the test asks for into --metadata-file.
printf '%s\\n' "$@" > "$DOCKER_ARGS"
while [ $# -gt 0 ]; do
  if [ "$1" = "--metadata-file" ]; then printf '%s' "$DOCKER_METADATA" > "$2"; fi
  shift
done
exit "${DOCKER_EXIT:-0}"
"""
STACK = f"""# operator inputs
config:
  aws:region: us-east-1
  tts-bench:model: kokoro-82m  # the model id
  tts-bench:image: {REGISTRY_REPO}@{REFERENCE_DIGEST}
  tts-bench:minInstances: 1
"""


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    docker = bin_dir / "docker"
    docker.write_text(STAND_IN)
    docker.chmod(docker.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("DOCKER_ARGS", str(tmp_path / "docker-args"))
    folder = tmp_path / "project"
    (folder / "container").mkdir(parents=True)
    (folder / "container" / "Dockerfile").write_text("FROM scratch\n")
    (folder / "Pulumi.yaml").write_text("name: tts-bench\nruntime: python\n")
    (folder / "Pulumi.dev.yaml").write_text(STACK)
    return folder


@pytest.mark.parametrize(
    ("metadata", "exit_code", "expected", "expected_error"),
    [
        ({"containerimage.digest": OTHER_DIGEST}, 0, 0, None),
        ({"image.name": f"{REGISTRY_REPO}:v1"}, 0, 2, "refusing to record the tag-only reference"),
        ({"containerimage.digest": "sha256:short"}, 0, 2, "reported no image digest"),
        (
            {"containerimage.digest": OTHER_DIGEST},
            1,
            2,
            "docker buildx build exited 1; nothing recorded",
        ),
    ],
)
def test_image_push(
    project: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    metadata: dict[str, str],
    exit_code: int,
    expected: int,
    expected_error: str | None,
) -> None:
    monkeypatch.setenv("DOCKER_METADATA", json.dumps(metadata))
    monkeypatch.setenv("DOCKER_EXIT", str(exit_code))
    code = main(["image", "push", "--stack", "dev", "--program", str(project), "--tag", "v1"])
    out, err = capsys.readouterr()
    assert code == expected, err
    args = Path(os.environ["DOCKER_ARGS"]).read_text().splitlines()
    assert args[:2] == ["buildx", "build"]
    assert args[args.index("--tag") + 1] == f"{REGISTRY_REPO}:v1"
    assert args[args.index("--platform") + 1] == "linux/amd64"
    assert "--push" in args and "--provenance=false" in args
    assert args[args.index("--file") + 1] == str(project / "container" / "Dockerfile")
    assert args[-1] == str(project)
    stack = (project / "Pulumi.dev.yaml").read_text()
    if expected_error is None:
        assert out.strip() == f"{REGISTRY_REPO}@{OTHER_DIGEST}"
        assert stack == STACK.replace(REFERENCE_DIGEST, OTHER_DIGEST)  # comments and order kept
    else:
        assert expected_error in err
        assert stack == STACK  # nothing written


def test_push_needs_the_repository_in_the_stack(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (project / "Pulumi.dev.yaml").write_text("config:\n  aws:region: us-east-1\n")
    assert main(["image", "push", "--program", str(project), "--tag", "v1"]) == 2
    assert "has no tts-bench:image" in capsys.readouterr().err
    assert not Path(os.environ["DOCKER_ARGS"]).exists()
