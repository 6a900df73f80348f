"""The working tree's local image digest: what `/ping` of a server started with these flags reports.

The digest is the container's own (`tts_server.build_info.source_digest` over its source, its
requirements and the weights the flags select). It is computed in a child process, because
`tts_bench` may not import the container package.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping, Sequence

from tts_bench.local_cloud.errors import DeployError

_SCRIPT = """
import os, sys
from tts_server.build_info import source_digest
from tts_server.engine import create_engine
from tts_server.flags import parse_serve_argv
from tts_server.settings import settings_from_args
settings = settings_from_args(parse_serve_argv(sys.argv[1:], "tts_server"), os.environ)
engine = create_engine(settings.backend, settings.mode, settings.model_dir, settings.device)
print(source_digest(engine.weights_sha256))
"""


def local_image_digest(server_args: Sequence[str], env: Mapping[str, str]) -> str:
    done = subprocess.run(
        [sys.executable, "-c", _SCRIPT, *server_args],
        capture_output=True,
        text=True,
        env=dict(env),
        timeout=300,
    )
    digest = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
    if done.returncode != 0 or not digest.startswith("sha256:"):
        last = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise DeployError(f"could not compute the local image digest: {last}")
    return digest
