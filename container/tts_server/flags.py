"""The command-line flags of `python -m tts_server` and `tts-bench serve` (argparse only).

Kept apart from `settings` (pydantic) so the entry point can parse its flags and open its
listening socket before anything heavy is imported.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8080


def add_serve_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags shared by `tts-bench serve` and `python -m tts_server`."""
    parser.add_argument("--backend", choices=("onnx", "torch"), help="engine backend (onnx)")
    parser.add_argument("--model-dir", type=Path, help="Hugging Face layout weights directory")
    parser.add_argument("--host", help=f"address to listen on ({DEFAULT_HOST})")
    parser.add_argument(
        "--port", type=int, help=f"port to listen on ({DEFAULT_PORT}; 0 picks a free one)"
    )
    parser.add_argument(
        "--serial", action="store_true", help="serve one request at a time (the published design)"
    )


def parse_serve_argv(argv: Sequence[str] | None, prog: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog=prog, description="Serve Kokoro-82M (SageMaker contract)")
    # SageMaker starts a container as `docker run IMAGE serve`.
    parser.add_argument("verb", nargs="?", choices=("serve",), help=argparse.SUPPRESS)
    add_serve_arguments(parser)
    return parser.parse_args(argv)
