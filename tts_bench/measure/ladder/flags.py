"""The ladder's flags, defined once: `tts-bench qmax` and `loadtest/qmax.py` register the same set.

`add_ladder_arguments(parser)` adds them to an argparse parser; the Locust file passes
`include_in_web_ui=True` through it, so each appears in Locust's web UI with its help (the
ladder is built when the test starts, from the values the UI sends). Values stay plain strings
and numbers, because Locust ships the parsed options to its workers as msgpack; the web UI
sends text, and a field left blank means the flag's absence. `ladder_options` reads either
back, checked, into one `LadderOptions`; `ladder_arguments` writes them out again as the
command line that repeats the run.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, get_args

from tts_bench.artifacts.fingerprint import Transport
from tts_bench.artifacts.qmax import DEFAULT_Q_MAX_BASIS, QmaxBasis
from tts_bench.deployment import DEFAULT_VARIANT
from tts_bench.measure.corpus import corpus_path
from tts_bench.measure.ladder.quantile_interval import DEFAULT_CONFIDENCE, check_confidence
from tts_bench.measure.ladder.refine import DEFAULT_REFINE_PCT, check_refine_pct
from tts_bench.measure.ladder.schedule import (
    DEFAULT_HOLD_S,
    DEFAULT_IDLE_S,
    DEFAULT_MEASURE_S,
    DEFAULT_RUNGS,
    DEFAULT_SLO_MS,
    LadderError,
    LadderSchedule,
    check_slo_ms,
    parse_rungs,
)
from tts_bench.measure.playback import check_underrun_slo
from tts_bench.measure.transport.contract import KOKORO, EndpointContract, load_contract

DEFAULT_MODEL = "kokoro-82m"
DEFAULT_OUT = "measurements"

# (flag, argparse keywords): every keyword but `help` is the flag's behaviour, `help` its text.
# Help is plain text, defaults written in: Locust's web UI shows it as given, where argparse
# would expand %-templates (so no help holds a % sign).
LADDER_FLAGS: tuple[tuple[str, dict[str, Any]], ...] = (
    (
        "--rungs",
        {
            "default": ",".join(map(str, DEFAULT_RUNGS)),
            "help": "concurrency levels, comma-separated, ascending (default: "
            f"{','.join(map(str, DEFAULT_RUNGS))})",
        },
    ),
    (
        "--hold-s",
        {
            "type": float,
            "default": DEFAULT_HOLD_S,
            "help": f"seconds each rung is held (default: {DEFAULT_HOLD_S:g})",
        },
    ),
    (
        "--measure-s",
        {
            "type": float,
            "default": DEFAULT_MEASURE_S,
            "help": "trailing seconds of each hold that are measured (default: "
            f"{DEFAULT_MEASURE_S:g})",
        },
    ),
    (
        "--idle-s",
        {
            "type": float,
            "default": DEFAULT_IDLE_S,
            "help": f"seconds without load between rungs (default: {DEFAULT_IDLE_S:g})",
        },
    ),
    (
        "--max-hold-s",
        {
            "type": float,
            "default": None,
            "metavar": "S",
            "help": "hold a rung whose window is unstable one --measure-s longer at a time, up "
            "to S seconds in all (default: off; the rung is recorded unstable); a steady rung "
            "whose p95 interval straddles the SLO is held too, its window widening",
        },
    ),
    (
        "--extend-s",
        {
            "default": None,
            "metavar": "S,S,...",
            "help": "seconds each rung is held past --hold-s, comma-separated in rung order, "
            "within --max-hold-s (default: none; the verification holds the fleet rule's "
            "level so for its whole minutes)",
        },
    ),
    (
        "--unstable-max-hold-s",
        {
            "type": float,
            "default": None,
            "metavar": "S",
            "help": "with --extend-s: the longest an unstable rung is held, below --max-hold-s "
            "(default: --max-hold-s; the verification keeps its other rungs to the ladder's own)",
        },
    ),
    (
        "--whole-minutes",
        {
            "type": int,
            "default": None,
            "metavar": "N",
            "help": "with --extend-s: a rung given an extension ends once it has held N whole "
            "minutes of the cloud's clock, at most its extension (the verification's fleet level)",
        },
    ),
    (
        "--slo-ms",
        {
            "type": float,
            "default": DEFAULT_SLO_MS,
            "help": f"p95 TTFAB SLO in milliseconds (default: {DEFAULT_SLO_MS:g})",
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
            f"percent of Q_max) (PCT: {DEFAULT_REFINE_PCT:g} when the flag is given bare; in the "
            "web UI a blank field is off)",
        },
    ),
    (
        "--repeat",
        {
            "type": int,
            "default": 1,
            "metavar": "R",
            "help": "with --refine, bisect around the knee R times, the repeats' probes taking "
            "turns so that a drift of the machine falls on all of them; Q_max is then the lowest "
            "repeat's conservative value (default: 1, one bisection)",
        },
    ),
    (
        "--q-max-basis",
        {
            "default": DEFAULT_Q_MAX_BASIS,
            "choices": list(get_args(QmaxBasis)),
            "help": "what the artifact's Q_max is: conservative, the highest rung with every "
            "rung up to it passed on its p95 interval; point, the highest whose point p95 met "
            "the SLO, for rungs too short to decide (a plan on it gates only a local image) "
            "(default: conservative)",
        },
    ),
    (
        "--confidence",
        {
            "type": float,
            "default": DEFAULT_CONFIDENCE,
            "metavar": "LEVEL",
            "help": "level of each rung's p95 TTFAB interval, which passes a rung only when its "
            f"upper end meets the SLO (default: {DEFAULT_CONFIDENCE:g})",
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
            "help": f"how requests reach the model (default: {Transport.LOCAL_HTTP.value})",
        },
    ),
    (
        "--contract",
        {
            "default": None,
            "metavar": "kokoro|sonic3|FILE",
            "help": "the endpoint contract: how requests are built and events and refusals read "
            "(default: kokoro, this project's container; sonic3: Cartesia Sonic-3's published "
            "one; or a JSON or YAML contract file)",
        },
    ),
    (
        "--corpus",
        {"default": None, "help": "utterance file (default: the shipped English corpus)"},
    ),
    ("--model", {"default": DEFAULT_MODEL, "help": f"model id (default: {DEFAULT_MODEL})"}),
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
    ("--out", {"default": DEFAULT_OUT, "help": f"artifact directory (default: {DEFAULT_OUT})"}),
    (
        "--curve-check",
        {
            "nargs": "?",
            "const": "on",
            "default": None,
            "metavar": "on",
            "help": "measure a local cloud's curve instance, whose service times are set, to check "
            "the ladder against a known truth (otherwise refused); its artifact is marked "
            "simulated (in the web UI type on; a blank field is off)",
        },
    ),
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
    model: str = DEFAULT_MODEL
    endpoint: str | None = None
    variant: str | None = None
    region: str | None = None
    confidence: float = DEFAULT_CONFIDENCE
    contract: EndpointContract = KOKORO
    contract_arg: str | None = None  # the flag as given (a built-in's name or a file)
    repeat: int = 1  # --repeat: bisections around the knee, interleaved
    q_max_basis: QmaxBasis = DEFAULT_Q_MAX_BASIS  # --q-max-basis: what the artifact's q_max is
    curve_check: bool = False  # --curve-check: a curve instance is the target, knowingly


def _text(options: argparse.Namespace, dest: str) -> str | None:
    """A text flag's value; blank (a web UI field left empty) is the flag's absence."""
    value = getattr(options, dest)
    if value is None:
        return None
    return str(value).strip() or None


def _number(options: argparse.Namespace, dest: str) -> float | None:
    """A number flag's value (the web UI sends text); blank is the flag's absence."""
    value = getattr(options, dest)
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if (text := _text(options, dest)) is None:
        return None
    try:
        return float(text)
    except ValueError:
        raise LadderError(f"{_flag(dest)} {text!r}: not a number") from None


def _switch(options: argparse.Namespace, dest: str) -> bool:
    """A flag given bare (or `on` in the web UI's text field); blank or absent is off."""
    text = _text(options, dest)
    if text is None:
        return False
    if text.lower() != "on":
        raise LadderError(f"{_flag(dest)} {text!r}: give the flag bare (in the web UI: on)")
    return True


MAX_REPEAT = 20


def check_repeat(repeat: float, refine_pct: float | None) -> int:
    """A `--repeat` the ladder can run: a whole number from 1 to MAX_REPEAT, and only with
    --refine (the repeats are bisections)."""
    if not (math.isfinite(repeat) and repeat == int(repeat) and 1 <= repeat <= MAX_REPEAT):
        raise LadderError(f"--repeat {repeat:g}: give a whole number from 1 to {MAX_REPEAT}")
    if repeat > 1 and refine_pct is None:
        raise LadderError(
            f"--repeat {repeat:g} repeats the refinement around the knee: add --refine"
        )
    return int(repeat)


def _basis(text: str | None) -> QmaxBasis:
    """--q-max-basis (the web UI sends text; blank is the default)."""
    if text is None:
        return DEFAULT_Q_MAX_BASIS
    if text not in get_args(QmaxBasis):
        raise LadderError(f"--q-max-basis {text!r}: give {' or '.join(get_args(QmaxBasis))}")
    return text  # type: ignore[return-value]


def _required(value: Any, dest: str) -> Any:
    if value is None:
        raise LadderError(f"{_flag(dest)} is blank: give a value")
    return value


def _flag(dest: str) -> str:
    return "--" + dest.replace("_", "-")


def schedule_of(options: argparse.Namespace) -> LadderSchedule:
    return LadderSchedule(
        rungs=parse_rungs(_required(_text(options, "rungs"), "rungs")),
        hold_s=_required(_number(options, "hold_s"), "hold_s"),
        measure_s=_required(_number(options, "measure_s"), "measure_s"),
        idle_s=_required(_number(options, "idle_s"), "idle_s"),
        max_hold_s=_number(options, "max_hold_s"),
        extended_s=_extensions(_text(options, "extend_s")),
        unstable_max_hold_s=_number(options, "unstable_max_hold_s"),
        whole_minutes=_whole(_number(options, "whole_minutes"), "whole_minutes"),
    )


def _whole(value: float | None, dest: str) -> int | None:
    if value is not None and not value.is_integer():
        raise LadderError(f"{_flag(dest)} {value:g}: give a whole number")
    return None if value is None else int(value)


def _extensions(text: str | None) -> tuple[float, ...]:
    """`--extend-s 150,0` → (150.0, 0.0); the schedule checks them against --max-hold-s."""
    if not text:
        return ()
    try:
        seconds = tuple(float(part) for part in text.split(","))
    except ValueError:
        raise LadderError(f"--extend-s {text!r}: expected comma-separated seconds") from None
    if not all(math.isfinite(s) and s >= 0 for s in seconds):
        raise LadderError(f"--extend-s {text!r}: each must be a finite number of seconds ≥ 0")
    return seconds


def _transport(options: argparse.Namespace) -> Transport:
    name = _text(options, "transport")
    try:
        return Transport(name)
    except ValueError:
        names = ", ".join(t.value for t in Transport)
        raise LadderError(f"--transport {name!r}: one of {names}") from None


def _contract(options: argparse.Namespace, transport: Transport) -> EndpointContract:
    contract = load_contract(_text(options, "contract"))
    if contract is not KOKORO and transport in (Transport.LOCAL_WS, Transport.BIDI_STREAM):
        # Both speak this project's WebSocket protocol; a contract describes one HTTP stream.
        raise LadderError(
            f"--contract {contract.name} --transport {transport.value}: another contract than "
            "kokoro is measured over local-http or response-stream"
        )
    return contract


def ladder_options(options: argparse.Namespace) -> LadderOptions:
    """Every ladder flag checked, each refusal one line naming the flag (`TtsBenchError`)."""
    refine, underrun = _number(options, "refine"), _number(options, "underrun_slo")
    transport = _transport(options)
    return LadderOptions(
        schedule=schedule_of(options),
        slo_ms=check_slo_ms(_required(_number(options, "slo_ms"), "slo_ms")),
        transport=transport,
        corpus=corpus_path(_text(options, "corpus")),
        refine_pct=None if refine is None else check_refine_pct(refine),
        underrun_slo=None if underrun is None else check_underrun_slo(underrun),
        out=Path(_required(_text(options, "out"), "out")),
        model=_required(_text(options, "model"), "model"),
        endpoint=_text(options, "endpoint"),
        variant=_text(options, "variant"),
        region=_text(options, "region"),
        confidence=check_confidence(_required(_number(options, "confidence"), "confidence")),
        contract=_contract(options, transport),
        contract_arg=_text(options, "contract"),
        repeat=check_repeat(_required(_number(options, "repeat"), "repeat"), refine),
        q_max_basis=_basis(_text(options, "q_max_basis")),
        curve_check=_switch(options, "curve_check"),
    )


def ladder_arguments(options: LadderOptions) -> list[str]:
    """The ladder flags that repeat a run of `options` (what a web UI run records as its
    command)."""
    s = options.schedule
    args = [
        "--rungs", ",".join(map(str, s.rungs)), "--hold-s", _plain(s.hold_s),
        "--measure-s", _plain(s.measure_s), "--idle-s", _plain(s.idle_s),
        "--slo-ms", _plain(options.slo_ms), "--transport", options.transport.value,
        "--corpus", str(options.corpus), "--model", options.model, "--out", str(options.out),
    ]  # fmt: skip
    optional = (
        ("--max-hold-s", s.max_hold_s),
        ("--extend-s", ",".join(map(_plain, s.extended_s)) if any(s.extended_s) else None),
        ("--unstable-max-hold-s", s.unstable_max_hold_s),
        ("--whole-minutes", None if s.whole_minutes is None else str(s.whole_minutes)),
        ("--refine", options.refine_pct),
        ("--confidence", None if options.confidence == DEFAULT_CONFIDENCE else options.confidence),
        ("--underrun-slo", options.underrun_slo), ("--endpoint", options.endpoint),
        ("--variant", options.variant), ("--region", options.region),
        ("--contract", options.contract_arg),
        ("--repeat", None if options.repeat == 1 else str(options.repeat)),
        ("--q-max-basis", None if options.q_max_basis == DEFAULT_Q_MAX_BASIS else options.q_max_basis),
    )  # fmt: skip
    if options.curve_check:
        args.append("--curve-check")
    for flag, value in optional:
        if value is not None:
            args += [flag, _plain(value) if isinstance(value, float) else value]
    return args


def _plain(value: float) -> str:
    """A number as short as it reads back exactly."""
    short = f"{value:g}"
    return short if float(short) == value else repr(value)
