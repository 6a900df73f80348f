"""`torch.compile` of the synthesis half, and the cache that lets a fresh process start warm.

Compiling takes tens of seconds on the H200, on every start. What compilation
produces (Inductor's graphs and Triton's kernels) is portable between processes of the same
torch, Triton and GPU: `torch.compiler.save_cache_artifacts` packs it into one file (the
"mega-cache"), and a fresh process that loads that file before compiling finds every kernel
built and only re-traces the Python (seconds). The image ships such a file when one was made
for its torch and GPU (`container/compile-cache/`, made on a GPU
host); a file made for another torch or GPU is simply a miss, and the process compiles as if
there were none. The command that makes the file is `tts_server.make_compile_cache`: this
module is the library the backend imports, and imports no backend.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

COMPILE_CACHE_ENV = "ENGINE_COMPILE_CACHE"  # a mega-cache file to load before compiling


def load_cache(path: Path) -> bool:
    """Load a mega-cache file into this process's compile caches; False if there is none."""
    import torch

    if not path.is_file():
        return False
    try:
        return torch.compiler.load_cache_artifacts(path.read_bytes()) is not None
    except Exception:  # a file from another torch is a miss: compile as if there were none
        return False


def save_cache(path: Path) -> int:
    """Write what this process compiled as one mega-cache file; its size in bytes (0: none)."""
    import torch

    artifacts = torch.compiler.save_cache_artifacts()
    if artifacts is None:
        return 0
    payload, _ = artifacts
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_bytes(payload)
    tmp.replace(path)
    return len(payload)


def compiled_adain_act() -> Callable[..., Any]:
    """`masked_decoder.adain_act` under `torch.compile` (dynamic shapes: any batch, width and
    length), after loading `$ENGINE_COMPILE_CACHE` when it names a file."""
    import torch

    from tts_server.engine.masked_decoder import adain_act

    cache = os.environ.get(COMPILE_CACHE_ENV)
    if cache:
        load_cache(Path(cache))
    # Snake or leaky ReLU, masked or not, batch 1 or more: a handful of graphs; room to spare.
    config = torch._dynamo.config
    for name in ("recompile_limit", "cache_size_limit"):  # the newer name, then the older
        if hasattr(config, name):
            setattr(config, name, max(getattr(config, name), 32))
    return torch.compile(adain_act, dynamic=True)
