"""The `tts-bench` command line: one module per subcommand, each thin over the library.

Each subcommand module exposes ``register(subparsers)``, which adds its parser and sets
``handler`` to a function ``(args) -> int`` returning the exit code. `TtsBenchError` and its
subclasses become one line on stderr and their ``exit_code``; nothing else is caught, so a
real bug still shows its traceback.

May import: every part of `tts_bench`. Nothing imports `cli` but `tts_bench/__main__.py`: the
library below it never calls the command line (the main job calls `planning`, not `plan`).
"""

from __future__ import annotations

import argparse
import importlib
import math
import sys
from collections.abc import Sequence
from typing import NoReturn

from tts_bench import __version__
from tts_bench.errors import TtsBenchError

# Modules under tts_bench.cli, in the order `--help` lists them (the order of the tool chain).
COMMANDS = (
    # the serving container and its weights, locally
    "serve", "synth", "weights",
    # the main job: serve, ladder, T_total, plan and plots on this machine
    "local_run",
    # the measurement chain, in the order it runs (SPEC §4)
    "drift", "thaw", "qmax", "ttotal", "plan", "validate", "report", "import_reference",
    # checks of the plan's models: against a real run, a fleet replayed under the policy, and
    # the policy deployed on open-loop traffic beside its replay
    "surge", "simulate", "rehearse",
    # infrastructure
    "preview", "image",
    # a SageMaker endpoint on this machine (SPEC §11)
    "local_cloud",
)  # fmt: skip


class OneLineParser(argparse.ArgumentParser):
    """argparse that reports a usage mistake in one line (exit 2), like every refusal here;
    subcommand parsers inherit it."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


def non_finite_flag(args: argparse.Namespace) -> str | None:
    """The first flag holding inf or nan (argparse's float() takes both), as a message."""
    for name, value in vars(args).items():
        values = value if isinstance(value, list | tuple) else [value]
        for item in values:
            if isinstance(item, float) and not math.isfinite(item):
                return f"--{name.replace('_', '-')} {item}: not a finite number; give one"
    return None


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="tts-bench",
        description="Measure a TTS endpoint, derive its autoscaling plan, gate deployment on it.",
    )
    parser.add_argument("--version", action="version", version=f"tts-bench {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMANDS:
        importlib.import_module(f"tts_bench.cli.{name}").register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if (problem := non_finite_flag(args)) is not None:
        print(f"tts-bench {args.command}: {problem}", file=sys.stderr)
        return 2
    try:
        return int(args.handler(args))
    except TtsBenchError as exc:
        print(f"tts-bench {args.command}: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print(f"tts-bench {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
