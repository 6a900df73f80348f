"""The soak's flags, checked before anything starts: one line naming the flag and the fix."""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TARGETS = ("curve", "process", "server")
MIN_DURATION_S = 120.0
MAX_DURATION_S = 7 * 24 * 3600.0
MAX_RATE_RPS = 50.0  # two cores: past this the soak measures saturation, not leaks


class SoakUsageError(Exception):
    """A flag the soak cannot run with."""


@dataclass(frozen=True)
class SoakSettings:
    duration_s: float
    sample_s: float
    warmup_s: float
    idle_s: float
    rate_rps: float
    curve_rps: float
    wave_rps: float
    wave_s: float
    scale_every_s: float
    bidi_every_s: float
    bidi_hold_s: float
    time_scale: float
    out: Path
    targets: tuple[str, ...]

    @property
    def soak_s(self) -> float:
        """The loaded time between the baseline and the final idle windows."""
        return self.duration_s - self.warmup_s - 2 * self.idle_s


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="scripts/soak",
        description="Soak the local cloud (curve and process instances) and a plain tts_server "
        "under mixed hostile traffic; sample their resources; judge the bounds.",
    )
    add = p.add_argument
    add("--duration-s", type=float, default=1800.0, help="wall time of the soak (default 1800)")
    add("--sample-s", type=float, help="seconds between samples (default 60, ≤ duration/3)")
    add(
        "--warmup-s",
        type=float,
        help="loaded warm-up before the baseline (default duration/6, ≤ 300)",
    )
    add(
        "--idle-s",
        type=float,
        help="each idle window, baseline and final (default duration/6, ≤ 90)",
    )
    add("--rate-rps", type=float, default=0.15, help="mixed arrivals/s at each synthesising target")
    add("--curve-rps", type=float, default=1.0, help="mixed arrivals/s at the curve cloud")
    add(
        "--wave-rps",
        type=float,
        default=2.5,
        help="good requests/s added at the curve cloud in a wave",
    )
    add("--wave-s", type=float, default=240.0, help="a wave's period; its first half is loaded")
    add("--scale-every-s", type=float, default=300.0,
        help="the process cloud's desired count toggles 1 ↔ 2 this often")  # fmt: skip
    add("--bidi-every-s", type=float, default=30.0, help="an idle bidi session opened this often")
    add("--bidi-hold-s", type=float, default=60.0, help="how long each idle session stays open")
    add("--time-scale", type=float, default=60.0, help="the curve cloud's clock compression")
    add(
        "--out",
        type=Path,
        default=REPO / "measurements" / "lab",
        help="folder for soak.md / soak.png",
    )
    add("--only", default=",".join(TARGETS), help=f"comma-separated subset of {','.join(TARGETS)}")
    return p


def _positive(flag: str, value: float, low: float = 0.0, high: float = math.inf) -> None:
    if not (math.isfinite(value) and low < value <= high):
        top = "" if high == math.inf else f" and at most {high:g}"
        raise SoakUsageError(f"--{flag} {value:g}: give a number above {low:g}{top}")


def parse_settings(argv: list[str] | None) -> SoakSettings:
    args = parser().parse_args(argv)
    if not (math.isfinite(args.duration_s) and MIN_DURATION_S <= args.duration_s <= MAX_DURATION_S):
        raise SoakUsageError(
            f"--duration-s {args.duration_s:g}: give {MIN_DURATION_S:g} to {MAX_DURATION_S:g} s "
            "(a warm-up, two idle windows and some load between them)"
        )
    warmup_s = args.warmup_s if args.warmup_s is not None else min(300.0, args.duration_s / 6)
    idle_s = args.idle_s if args.idle_s is not None else min(90.0, args.duration_s / 6)
    _positive("warmup-s", warmup_s)
    _positive("idle-s", idle_s)
    if idle_s < 20:
        raise SoakUsageError(f"--idle-s {idle_s:g}: give at least 20 s (idle must outlast a drain)")
    sample_s = args.sample_s if args.sample_s is not None else min(60.0, args.duration_s / 3)
    _positive("sample-s", sample_s, 0.9, args.duration_s / 3)
    for flag in ("rate-rps", "curve-rps", "wave-rps"):
        _positive(flag, getattr(args, flag.replace("-", "_")), 0.0, MAX_RATE_RPS)
    for flag in ("wave-s", "scale-every-s", "bidi-every-s", "bidi-hold-s"):
        _positive(flag, getattr(args, flag.replace("-", "_")), 1.0)
    _positive("time-scale", args.time_scale, 0.0, 1000.0)
    targets = tuple(t.strip() for t in args.only.split(",") if t.strip())
    unknown = [t for t in targets if t not in TARGETS]
    if not targets or unknown:
        raise SoakUsageError(f"--only {args.only!r}: name some of {', '.join(TARGETS)}")
    if args.out.exists() and not args.out.is_dir():
        raise SoakUsageError(f"--out {args.out}: exists and is not a folder")
    settings = SoakSettings(
        duration_s=args.duration_s,
        sample_s=sample_s,
        warmup_s=warmup_s,
        idle_s=idle_s,
        rate_rps=args.rate_rps,
        curve_rps=args.curve_rps,
        wave_rps=args.wave_rps,
        wave_s=args.wave_s,
        scale_every_s=args.scale_every_s,
        bidi_every_s=args.bidi_every_s,
        bidi_hold_s=args.bidi_hold_s,
        time_scale=args.time_scale,
        out=args.out,
        targets=targets,
    )
    if settings.soak_s <= 0:
        raise SoakUsageError(
            f"--duration-s {args.duration_s:g}: shorter than the warm-up ({warmup_s:g} s) and two "
            f"idle windows ({idle_s:g} s each); lengthen it or shorten those"
        )
    return settings
