"""Build the serving container, push it to the stack's ECR repository, and pin the stack to it.

`docker buildx build --push` reports the pushed manifest's digest in its metadata file; the
stack config then gets `<registry>/<repository>@sha256:<digest>`, never a tag. Nothing is
written when the build or the push fails or no digest comes back.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from tts_bench.artifacts.fingerprint import DIGEST_PATTERN
from tts_bench.errors import TtsBenchError
from tts_bench.infra.image_ref import EcrImage, parse_pinned, parse_repository
from tts_bench.infra.stack_config import IMAGE_KEY, project_name, set_stack_value, stack_values

DIGEST_KEY = "containerimage.digest"
# SageMaker serves x86 GPU instances; one platform, no attestation index, one plain manifest.
DEFAULT_PLATFORM = "linux/amd64"


class ImagePushError(TtsBenchError):
    """The image could not be built, pushed, or recorded."""


@dataclass(frozen=True)
class PushRequest:
    program_dir: Path
    stack: str
    context: Path
    dockerfile: Path
    tag: str
    platform: str = DEFAULT_PLATFORM


def default_tag(context: Path) -> str:
    """`<git short sha>-<UTC time>`: ECR tags are immutable, so every push needs a fresh one."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    try:
        sha = subprocess.run(
            ["git", "-C", str(context), "rev-parse", "--short=12", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return f"build-{stamp}"
    return f"{sha}-{stamp}"


def build_command(docker: str, target: str, request: PushRequest, metadata: Path) -> list[str]:
    return [
        docker,
        "buildx",
        "build",
        "--platform",
        request.platform,
        "--provenance=false",
        "--file",
        str(request.dockerfile),
        "--tag",
        target,
        "--metadata-file",
        str(metadata),
        "--push",
        str(request.context),
    ]


def push_image(request: PushRequest) -> EcrImage:
    """Build and push; record and return the digest-pinned reference."""
    project = project_name(request.program_dir)
    current = stack_values(request.program_dir, request.stack).get(f"{project}:{IMAGE_KEY}")
    if not isinstance(current, str) or not current:
        raise ImagePushError(
            f"stack {request.stack} has no {project}:{IMAGE_KEY}; set it to the ECR repository "
            "(<account>.dkr.ecr.<region>.amazonaws.com/<repository>) first"
        )
    repo = parse_repository(current)
    registry, repository = repo.registry, repo.repository
    if not re.fullmatch(r"[\w][\w.-]{0,127}", request.tag):
        raise ImagePushError(f"tag {request.tag!r} is not a valid image tag")
    if not request.dockerfile.is_file():
        raise ImagePushError(f"{request.dockerfile}: no such Dockerfile; pass --file")
    docker = shutil.which("docker")
    if docker is None:
        raise ImagePushError("docker is not on PATH; install Docker with the buildx plugin")
    target = f"{registry}/{repository}:{request.tag}"
    with tempfile.TemporaryDirectory(prefix="tts-bench-image-") as tmp:
        metadata = Path(tmp) / "metadata.json"
        command = build_command(docker, target, request, metadata)
        print(f"image push: {' '.join(command)}", file=sys.stderr)
        # Build progress to file descriptor 2: stdout carries only the resulting reference.
        done = subprocess.run(command, stdout=2, stderr=2, check=False)
        if done.returncode != 0:
            raise ImagePushError(
                f"docker buildx build exited {done.returncode}; nothing recorded. If the push was "
                f"refused, log in first: aws ecr get-login-password | docker login --username AWS "
                f"--password-stdin {registry}"
            )
        try:
            digest = json.loads(metadata.read_text(encoding="utf-8")).get(DIGEST_KEY)
        except (OSError, ValueError, AttributeError):
            digest = None
    if not isinstance(digest, str) or not re.fullmatch(DIGEST_PATTERN, digest):
        raise ImagePushError(
            f"the build reported no image digest ({DIGEST_KEY}: {digest!r}); refusing to record the "
            f"tag-only reference {target}"
        )
    image = parse_pinned(f"{registry}/{repository}@{digest}")
    set_stack_value(request.program_dir, request.stack, IMAGE_KEY, image.reference)
    return image
