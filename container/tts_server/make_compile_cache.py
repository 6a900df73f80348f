"""Compile the torch backend once and save its mega-cache file (on the GPU host, or in the image).

    python -m tts_server.make_compile_cache --model-dir DIR --out FILE

Prints the cold compile's warm-up time, the file's size and the backend's settings as one JSON
line; exits 1 when the compile left nothing to save. The library it drives is
`tts_server.engine.compile_cache`; the file's use is described in `container/compile-cache/`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from tts_server.engine.compile_cache import COMPILE_CACHE_ENV, save_cache


def main() -> int:
    from tts_server.engine.torch_backend import COMPILE_ENV, TorchBackend

    parser = argparse.ArgumentParser(description="Compile the torch backend and save its cache.")
    parser.add_argument("--model-dir", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True, help="the mega-cache file to write")
    parser.add_argument("--device", default="cuda")
    args = parser.parse_args()
    os.environ[COMPILE_ENV] = "1"
    os.environ.pop(COMPILE_CACHE_ENV, None)  # measure and save a cold compile
    backend = TorchBackend(args.model_dir, device=args.device)
    warm_s = backend.warm()
    size = save_cache(args.out)
    print(
        json.dumps({"compile_warmup_s": round(warm_s, 2), "cache_bytes": size, **backend.settings})
    )
    return 0 if size else 1


if __name__ == "__main__":
    sys.exit(main())
