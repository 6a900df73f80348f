"""The ladder's flags, defined once: `tts-bench qmax` and `loadtest/qmax.py` register the same set.

`add_ladder_arguments(parser)` adds them to an argparse parser; the Locust file passes
`include_in_web_ui=False` through it (ladder flags are read at start-up only). Values stay
plain strings and numbers, because Locust ships the parsed options to its workers as msgpack.
`ladder_options` reads them back, checked, into one `LadderOptions` for either side.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tts_bench.artifacts.fingerprint import Transport
from tts_bench.deployment import DEFAULT_VARIANT
from tts_bench.measure.corpus import corpus_path
from tts_bench.measure.ladder import (
    DEFAULT_HOLD_S,
    DEFAULT_IDLE_S,
    DEFAULT_MEASURE_S,
    DEFAULT_RUNGS,
    DEFAULT_SLO_MS,
    LadderSchedule,
    check_slo_ms,
    parse_rungs,
)
from tts_bench.measure.playback import check_underrun_slo
from tts_bench.measure.refine import DEFAULT_REFINE_PCT, check_refine_pct

# (flag, argparse keywords): every keyword but `help` is the flag's behaviour, `help` its text.
LADDER_FLAGS: tuple[tuple[str, dict[str, Any]], ...] = (
    (
        "--rungs",
        {
            "default": ",".join(map(str, DEFAULT_RUNGS)),
            "help": "concurrency levels, comma-separated, ascending (default: %(default)s)",
        },
    ),
    (
        "--hold-s",
        {
            "type": float,
            "default": DEFAULT_HOLD_S,
            "help": "seconds each rung is held (default: %(default)g)",
        },
    ),
    (
        "--measure-s",
        {
            "type": float,
            "default": DEFAULT_MEASURE_S,
            "help": "trailing seconds of each hold that are measured (default: %(default)g)",
        },
    ),
    (
        "--idle-s",
        {
            "type": float,
            "default": DEFAULT_IDLE_S,
            "help": "seconds without load between rungs (default: %(default)g)",
        },
    ),
    (
        "--max-hold-s",
        {
            "type": float,
            "default": None,
            "metavar": "S",
            "help": "hold a rung whose window is unstable one --measure-s longer at a time, up "
            "to S seconds in all (default: off; the rung is recorded unstable)",
        },
    ),
    (
        "--slo-ms",
        {
            "type": float,
            "default": DEFAULT_SLO_MS,
            "help": "p95 TTFAB SLO in milliseconds (default: %(default)g)",
        },
    ),
    (
        "--refine",
        {
            "type": float,
            "nargs": "?",
            "const": DEFAULT_REFINE_PCT,
            "default": None,
            "metavar": "PCT",
            "help": "after a bracketed ladder, bisect until the gap is at most max(1 user, PCT "
            f"%% of Q_max) (PCT defaults to {DEFAULT_REFINE_PCT:g})",
        },
    ),
    (
        "--underrun-slo",
        {
            "type": float,
            "default": None,
            "metavar": "SHARE",
            "help": "a rung whose share of stalled streams exceeds SHARE fails (e.g. 0.05)",
        },
    ),
    (
        "--transport",
        {
            "default": Transport.LOCAL_HTTP.value,
            "choices": [t.value for t in Transport],
            "help": "how requests reach the model (default: %(default)s)",
        },
    ),
    (
        "--corpus",
        {"default": None, "help": "utterance file (default: the shipped English corpus)"},
    ),
    ("--model", {"default": "kokoro-82m", "help": "model id (default: %(default)s)"}),
    (
        "--endpoint",
        {"default": None, "help": "SageMaker endpoint name (a live ladder on SageMaker)"},
    ),
    (
        "--variant",
        {
            "default": None,
            "help": f"SageMaker production variant (default: {DEFAULT_VARIANT} for the "
            "fingerprint and the freeze; requests go where the endpoint routes them)",
        },
    ),
    ("--region", {"default": None, "help": "AWS region (default: AWS_REGION or the profile's)"}),
    ("--out", {"default": "measurements", "help": "artifact directory (default: %(default)s)"}),
)


def add_ladder_arguments(parser: argparse.ArgumentParser, **extra: Any) -> None:
    """Register every ladder flag on `parser` (`extra`: keywords its own `add_argument` takes)."""
    for flag, keywords in LADDER_FLAGS:
        parser.add_argument(flag, **keywords, **extra)


@dataclass(frozen=True, slots=True)
class LadderOptions:
    """The ladder's flags, read and checked: what both the CLI and the Locust file act on."""

    schedule: LadderSchedule
    slo_ms: float
    transport: Transport
    corpus: Path
    refine_pct: float | None
    underrun_slo: float | None
    out: Path


def schedule_of(options: argparse.Namespace) -> LadderSchedule:
    return LadderSchedule(
        rungs=parse_rungs(options.rungs),
        hold_s=options.hold_s,
        measure_s=options.measure_s,
        idle_s=options.idle_s,
        max_hold_s=options.max_hold_s,
    )


def ladder_options(options: argparse.Namespace) -> LadderOptions:
    """Every ladder flag checked, each refusal one line naming the flag (`TtsBenchError`)."""
    return LadderOptions(
        schedule=schedule_of(options),
        slo_ms=check_slo_ms(options.slo_ms),
        transport=Transport(options.transport),
        corpus=corpus_path(options.corpus),
        refine_pct=None if options.refine is None else check_refine_pct(options.refine),
        underrun_slo=(
            None if options.underrun_slo is None else check_underrun_slo(options.underrun_slo)
        ),
        out=Path(options.out),
    )
