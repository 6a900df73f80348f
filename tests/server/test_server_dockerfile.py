"""What can be checked of the container image without a Docker engine."""

from __future__ import annotations

import importlib.util
import json
import re
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from tts_server.flags import parse_serve_argv
from tts_server.settings import settings_from_args

REPO = Path(__file__).resolve().parents[2]
DOCKERFILE = REPO / "container" / "Dockerfile"
REQUIREMENTS = REPO / "container" / "requirements.txt"


def _instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    pairs = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            keyword, _, rest = line.partition(" ")
            pairs.append((keyword.upper(), rest.strip()))
    return pairs


def _all(keyword: str) -> list[str]:
    return [rest for kw, rest in _instructions() if kw == keyword]


def test_the_image_is_a_cuda_runtime_base_labelled_for_bidirectional_streaming():
    (base,) = _all("FROM")
    assert base.startswith("nvidia/cuda:") and "runtime" in base
    assert any(
        "com.amazonaws.sagemaker.capabilities.bidirectional-streaming=true" in label
        for label in _all("LABEL")
    )


def test_the_server_runs_as_a_non_root_user():
    users = _all("USER")
    assert users and users[-1] not in ("root", "0")


def test_it_listens_on_8080_with_the_model_directory_sagemaker_mounts():
    assert "8080" in _all("EXPOSE")
    env = " ".join(_all("ENV"))
    assert "MODEL_DIR=/opt/ml/model" in env and "ENGINE_BACKEND=torch" in env
    entrypoint = json.loads(_all("ENTRYPOINT")[-1])
    cmd = json.loads(_all("CMD")[-1])
    assert entrypoint[:3] == ["python", "-m", "tts_server"]
    assert importlib.util.find_spec("tts_server.__main__") is not None
    args = parse_serve_argv(entrypoint[3:] + cmd, prog="tts_server")
    settings = settings_from_args(args, {"MODEL_DIR": "/opt/ml/model", "ENGINE_BACKEND": "torch"})
    assert (settings.host, settings.port) == ("0.0.0.0", 8080)
    assert str(settings.model_dir) == "/opt/ml/model" and settings.backend == "torch"


def test_every_copied_path_exists_in_the_repository():
    for args in _all("COPY"):
        sources = [a for a in args.split()[:-1] if not a.startswith("--")]
        for source in sources:
            assert (REPO / source).exists(), source


def test_requirements_are_pinned_and_cover_the_serve_extra():
    pins = {}
    for line in REQUIREMENTS.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            requirement = Requirement(line)
            (spec,) = requirement.specifier
            assert spec.operator == "==", line
            pins[requirement.name.lower().replace("_", "-")] = spec.version
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    needed = [Requirement(r) for r in extras["engine"] + extras["serve"]]
    for requirement in needed:
        name = requirement.name.lower().replace("_", "-")
        if name == "tts-bench":
            continue
        assert name in pins, f"{name} is not pinned"
        assert requirement.specifier.contains(pins[name], prereleases=True), name
    assert pins["torch"] == "2.13.0"


@pytest.mark.parametrize("argv", [["serve"], ["--port", "8080", "serve"], []])
def test_sagemaker_s_serve_argument_is_accepted(argv):
    assert parse_serve_argv(argv, prog="tts_server").verb in ("serve", None)
