"""`tts-bench interval`: a ladder's rungs judged again from its samples with p95 intervals."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from tts_bench.artifacts.files import load_artifact
from tts_bench.artifacts.qmax import QmaxArtifact
from tts_bench.artifacts.rungs import Rung
from tts_bench.measure.ladder.interval_reanalysis import with_intervals
from tts_bench.measure.ladder.quantile_interval import DEFAULT_CONFIDENCE, check_confidence
from tts_bench.measure.samples import read_samples, samples_path


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "interval",
        description=(
            "For each qmax artifact, every rung's and probe's p95 TTFAB interval (binomial "
            "order statistics, distribution-free), its verdict (pass: the upper end meets the "
            "SLO; fail: the lower end misses it; else undecided) and Q_max's interval, from the "
            "samples beside it. Writes nothing; a ladder that predates the intervals is judged "
            "at --confidence (docs/measuring.md)."
        ),
    )
    parser.add_argument("artifacts", nargs="+", type=Path, metavar="ARTIFACT")
    parser.add_argument(
        "--confidence",
        type=float,
        default=DEFAULT_CONFIDENCE,
        metavar="LEVEL",
        help=f"the intervals' level (default: {DEFAULT_CONFIDENCE:g})",
    )
    parser.add_argument("--json", action="store_true", help="one JSON object per file instead")
    parser.set_defaults(handler=run)


def _row(rung: Rung) -> str:
    interval = rung.ttfab_p95_interval
    lower = upper = "-"
    if interval is not None and interval.lower_ms is not None:
        lower = f"{interval.lower_ms:.0f}"
    if interval is not None and interval.upper_ms is not None:
        upper = f"{interval.upper_ms:.0f}"
    p95 = "-" if rung.ttfab_p95_ms is None else f"{rung.ttfab_p95_ms:.0f}"
    worth = "-" if interval is None else f"{interval.effective_samples:.0f}"
    return (
        f"  c={rung.concurrency:<5} {rung.ok:>5} ok (worth {worth:>5})  p95 {p95:>6} ms  "
        f"[{lower:>6}, {upper:>6}] ms  {rung.verdict}"
    )


def run(args: argparse.Namespace) -> int:
    level = check_confidence(args.confidence)
    for path in args.artifacts:
        qmax = load_artifact(path, QmaxArtifact)
        judged = with_intervals(qmax, read_samples(samples_path(path)), level)
        interval = judged.q_max_interval
        if interval is None:  # with_intervals always sets it
            continue
        if args.json:
            print(json.dumps({"path": str(path), "q_max": judged.refined_q_max,
                              "q_max_interval": interval.model_dump(mode="json"),
                              "rungs": [r.model_dump(mode="json") for r in judged.curve_rungs]}))  # fmt: skip
            continue
        print(f"{path} (SLO {judged.slo_ms:g} ms, {level:.0%} intervals)")
        print("\n".join(_row(r) for r in judged.curve_rungs))
        above = "none failed above" if interval.failing_above is None else (
            f"fails at {interval.failing_above}"
        )  # fmt: skip
        print(
            f"  Q_max {judged.refined_q_max}; interval [{interval.low or '-'}, "
            f"{interval.high or '-'}], {above}; undecided: "
            f"{', '.join(map(str, interval.undecided)) or 'none'}"
        )
    return 0
