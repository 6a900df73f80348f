"""What this server is, for the fingerprint `/ping` reports: model, instance type, image digest.

On SageMaker the deploy sets `INSTANCE_TYPE` and `IMAGE_DIGEST`; locally the instance type is
`local-<cpu or gpu model>` and the digest is sha256 over the container's source, its pinned
requirements and the engine's weights, so a change to any of them is a new build.
"""

from __future__ import annotations

import hashlib
import platform
import re
from pathlib import Path

MODEL_ID = "kokoro-82m"
PACKAGE_DIR = Path(__file__).resolve().parent
REQUIREMENTS = PACKAGE_DIR.parent / "requirements.txt"


def local_instance_type(device: str | None) -> str:
    """`local-<gpu model>` when serving on CUDA, else `local-<cpu model>`."""
    if device and device.startswith("cuda"):
        try:
            import torch  # the torch backend has imported it already

            return f"local-{torch.cuda.get_device_name(device)}"
        except (ImportError, RuntimeError, AssertionError):
            pass
    return f"local-{_cpu_model()}"


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return re.sub(r"\s+", " ", line.split(":", 1)[1]).strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "cpu"


def source_digest(weights_sha256: str) -> str:
    """`sha256:<hex>` over the server package's source files, the requirements and the weights."""
    digest = hashlib.sha256()
    files = sorted(p for p in PACKAGE_DIR.rglob("*.py") if "__pycache__" not in p.parts)
    if REQUIREMENTS.is_file():
        files.append(REQUIREMENTS)
    for path in files:
        digest.update(path.relative_to(PACKAGE_DIR.parent).as_posix().encode() + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    digest.update(weights_sha256.encode())
    return f"sha256:{digest.hexdigest()}"
