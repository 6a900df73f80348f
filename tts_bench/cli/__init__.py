"""The `tts-bench` command line: one module per subcommand, each thin over the library.

The subcommand modules live by group: `local` (the server, its weights and the main job on this
machine), `chain` (the measurement chain against an endpoint, in the order it runs), `checks`
(custody and the checks of the plan's models) and `infra` (the Pulumi preview and the image).
Beside this dispatcher: the option sets several subcommands share (`aws_options`,
`server_options`) and the project folder they run in (`project`).

Each subcommand module exposes ``register(subparsers)``, which adds its parser and sets
``handler`` to a function ``(args) -> int`` returning the exit code. `TtsBenchError` and its
subclasses become one line on stderr and their ``exit_code``; nothing else is caught, so a
real bug still shows its traceback.

Only the chosen subcommand's module is imported: the others' libraries (the engine, aiohttp,
Locust, moto, the main job) cost seconds to import, and `tts-bench --help` lists every command
from `COMMANDS` alone. So a command's one-line summary lives in `COMMANDS`, and its module's
``add_parser`` gives everything else (its description, its flags).

May import: every part of `tts_bench`. Nothing imports `cli` but `tts_bench/__main__.py`: the
library below it never calls the command line (the main job calls `planning`, not `plan`).
"""

from __future__ import annotations

import argparse
import importlib
import math
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from tts_bench import __version__
from tts_bench.errors import TtsBenchError, printable

# Every subcommand with its one-line summary, in the order `--help` lists them (the order of the
# tool chain); its module is tts_bench.cli.<group>.<name with - as _> (`GROUPS`).
COMMANDS: tuple[tuple[str, str], ...] = (
    # the serving container and its weights, locally
    ("serve", "run the Kokoro server locally (SageMaker contract on HTTP and WebSocket)"),
    ("synth", "synthesise text to a 24 kHz 16-bit mono WAV with the local Kokoro engine"),
    ("weights", "prepare Kokoro weights for the engine (offline)"),
    # the main job: serve, ladder, T_total, plan and plots on this machine
    ("local-run", "the whole chain on this machine through the local cloud: ladder, T_total, "
     "plan, redeploy, validate, plots"),
    # the measurement chain, in the order it runs (SPEC §4)
    ("drift", "read-only preflight: orphans, suspended scaling, stuck alarms, plan differences"),
    ("thaw", "restore the scaling state a frozen run left behind"),
    ("qmax", "measure Q_max with the closed-loop ladder"),
    ("ttotal", "measure T_total: force one more instance on an endpoint, or a fresh local server"),
    ("plan", "derive thresholds, cooldowns, fleet size, admission bound and alarm"),
    ("validate", "compare the deployed target value, thresholds, cooldowns, min/max and queue "
     "bound with a plan"),
    ("report", "plot a run's artifacts as PNG; with --html, one HTML page of the whole run"),
    ("interval", "judge a ladder's rungs again from its samples with p95 confidence intervals"),
    ("import-reference", "rebuild the reference artifacts from the published run's figures"),
    # custody: each artifact against what it was made from
    ("verify", "check each artifact against its raw data and sources, with the code that made it"),
    # checks of the plan's models: against a real run, a fleet replayed under the policy, and
    # the policy deployed on open-loop traffic beside its replay
    ("surge", "check the surge model with an open-loop run against one bounded instance"),
    ("simulate", "replay traffic on a plan's fleet, policies side by side (no AWS)"),
    ("rehearse", "rehearse a deployed plan on open-loop traffic, replayed beside it in simulate"),
    # infrastructure
    ("preview", "run the Pulumi program under mocks and evaluate the policy pack on it"),
    ("image", "build and push the serving container"),
    # a SageMaker endpoint on this machine (SPEC §11)
    ("local-cloud", "run a SageMaker endpoint on this machine (moto + real container processes)"),
)  # fmt: skip


# The subpackage each command's module lives in, by the groups `COMMANDS` lists them in.
GROUPS: dict[str, tuple[str, ...]] = {
    "local": ("serve", "synth", "weights", "local-run", "local-cloud"),
    "chain": (
        "drift", "thaw", "qmax", "ttotal", "plan", "validate", "report", "interval",
        "import-reference",
    ),
    "checks": ("verify", "surge", "simulate", "rehearse"),
    "infra": ("preview", "image"),
}  # fmt: skip
GROUP_OF: dict[str, str] = {name: group for group, names in GROUPS.items() for name in names}


def command_module(name: str) -> str:
    return f"tts_bench.cli.{GROUP_OF[name]}.{name.replace('-', '_')}"


class _Subcommands(argparse._SubParsersAction):  # type: ignore[type-arg]
    """Subparsers whose one-line summary comes from `COMMANDS`, never from the module."""

    def add_parser(self, name: str, **kwargs: Any) -> argparse.ArgumentParser:
        if "help" in kwargs:
            raise TypeError(f"{command_module(name)}: its summary belongs in cli.COMMANDS")
        return super().add_parser(name, help=dict(COMMANDS)[name], **kwargs)


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


def build_parser(chosen: str | None = None) -> argparse.ArgumentParser:
    """The parser with the chosen command's own parser registered by its module (imported now),
    and every other command as a name and summary only."""
    parser = OneLineParser(
        prog="tts-bench",
        description="Measure a TTS endpoint, derive its autoscaling plan, gate deployment on it.",
    )
    parser.add_argument("--version", action="version", version=f"tts-bench {__version__}")
    subparsers = parser.add_subparsers(
        dest="command", metavar="COMMAND", required=True, action=_Subcommands
    )
    for name, _ in COMMANDS:
        if name == chosen:
            importlib.import_module(command_module(name)).register(subparsers)
        else:
            subparsers.add_parser(name)
    return parser


def chosen_command(argv: Sequence[str]) -> str | None:
    """The subcommand `argv` names (its first word: the top level has only --help and
    --version), or None."""
    first = next(iter(argv), None)
    return first if first in dict(COMMANDS) else None


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(chosen_command(argv))
    args = parser.parse_args(argv)
    if (problem := non_finite_flag(args)) is not None:
        print(f"tts-bench {args.command}: {problem}", file=sys.stderr)
        return 2
    try:
        return int(args.handler(args))
    except TtsBenchError as exc:
        print(printable(f"tts-bench {args.command}: {exc}"), file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print(f"tts-bench {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
