"""Options shared by the subcommands that start the serving container's code (not a subcommand).

`serve_flags` turns `--backend`, `--model-dir` and `--serial` into the flags of a fresh
`python -m tts_server`; `EngineCommandError` is the one-line refusal of the commands that run
the engine in this process (`synth`, `weights`).
"""

from __future__ import annotations

import argparse

from tts_bench.errors import TtsBenchError


class EngineCommandError(TtsBenchError):
    """The engine refused the input or could not load its weights."""


def serve_flags(args: argparse.Namespace) -> list[str]:
    """The server flags the parsed `--backend`, `--model-dir` and `--serial` ask for."""
    flags = []
    if args.backend:
        flags += ["--backend", args.backend]
    if args.model_dir:
        flags += ["--model-dir", str(args.model_dir)]
    if args.serial:
        flags.append("--serial")
    return flags
