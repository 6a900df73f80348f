"""This process's AWS settings pointed somewhere else for a block: the local cloud a job started.

The main job's target and its short rehearsal each start a local cloud and drive it with the AWS
clients a user would run, configured only by the environment, as a shell that sourced the cloud's
env file would be.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator


@contextlib.contextmanager
def aws_environment(env: dict[str, str]) -> Iterator[None]:
    """This process's AWS settings replaced by `env` (and no profile) for the block."""
    names = set(env) | {"AWS_PROFILE", "AWS_DEFAULT_PROFILE"}
    saved = {name: os.environ.get(name) for name in names}
    for name in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE"):
        os.environ.pop(name, None)
    os.environ.update(env)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
