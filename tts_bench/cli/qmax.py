"""`tts-bench qmax`: the closed-loop Q_max ladder (Locust, headless) against a server or endpoint.

`--dry-run` prints the schedule and its wall-clock estimate and touches nothing else. A local
run needs `--host` (a `tts-bench serve`) and a local transport. A SageMaker run takes
`--endpoint NAME [--variant V] --transport response-stream|bidi-stream`: a preflight drift, the
freeze around the Locust run (restored on every exit path), the fingerprint from the endpoint,
and each rung's CloudWatch ratio.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tts_bench.artifacts.fingerprint import Transport
from tts_bench.deployment import DEFAULT_VARIANT
from tts_bench.measure.ladder import (
    DEFAULT_HOLD_S,
    DEFAULT_IDLE_S,
    DEFAULT_MEASURE_S,
    DEFAULT_RUNGS,
    DEFAULT_SLO_MS,
    LadderSchedule,
    describe_schedule,
    parse_rungs,
)
from tts_bench.measure.playback import check_underrun_slo
from tts_bench.measure.refine import DEFAULT_REFINE_PCT, check_refine_pct
from tts_bench.measure.verification import DEFAULT_PLAN_SURGE_RATIO, describe_verification


def add_ladder_arguments(parser: argparse.ArgumentParser) -> None:
    """The ladder's flags, with the names and defaults of `loadtest/qmax.py`."""
    parser.add_argument(
        "--rungs",
        default=",".join(map(str, DEFAULT_RUNGS)),
        help="concurrency levels, ascending (default: %(default)s)",
    )
    parser.add_argument(
        "--hold-s",
        type=float,
        default=DEFAULT_HOLD_S,
        help="seconds each rung is held (default: %(default)g)",
    )
    parser.add_argument(
        "--measure-s",
        type=float,
        default=DEFAULT_MEASURE_S,
        help="trailing seconds of each hold that are measured (default: %(default)g)",
    )
    parser.add_argument(
        "--idle-s",
        type=float,
        default=DEFAULT_IDLE_S,
        help="seconds without load between rungs (default: %(default)g)",
    )
    parser.add_argument(
        "--max-hold-s",
        type=float,
        default=None,
        metavar="S",
        help="hold a rung whose window is unstable one --measure-s longer at a time, up to S "
        "seconds in all (default: off; the rung is recorded unstable)",
    )
    parser.add_argument(
        "--slo-ms",
        type=float,
        default=DEFAULT_SLO_MS,
        help="p95 TTFAB SLO, ms (default: %(default)g)",
    )
    parser.add_argument(
        "--refine",
        type=float,
        nargs="?",
        const=DEFAULT_REFINE_PCT,
        default=None,
        metavar="PCT",
        help="after a bracketed ladder, bisect until the gap is at most max(1 user, PCT %% of "
        f"Q_max) (PCT defaults to {DEFAULT_REFINE_PCT:g})",
    )
    parser.add_argument(
        "--underrun-slo",
        type=float,
        default=None,
        metavar="SHARE",
        help="a rung whose share of stalled streams exceeds SHARE fails (e.g. 0.05)",
    )
    parser.add_argument(
        "--transport",
        default=Transport.LOCAL_HTTP.value,
        choices=[t.value for t in Transport],
        help="how requests reach the model (default: %(default)s)",
    )
    parser.add_argument(
        "--corpus",
        type=Path,
        default=None,
        help="utterance file (default: the shipped English corpus)",
    )
    parser.add_argument("--model", default="kokoro-82m", help="model id (default: %(default)s)")
    parser.add_argument(
        "--endpoint", default=None, help="SageMaker endpoint name (a live ladder on SageMaker)"
    )
    parser.add_argument(
        "--variant", default=DEFAULT_VARIANT, help="production variant (default: %(default)s)"
    )
    parser.add_argument(
        "--region", default=None, help="AWS region (default: AWS_REGION or the profile's)"
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=Path("measurements"),
        help="artifact directory (default: %(default)s)",
    )


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "qmax",
        help="measure Q_max with the closed-loop ladder",
        description=__doc__.splitlines()[0],
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="print the schedule and estimate only; no network"
    )
    parser.add_argument(
        "--host", default=None, help="local server to measure, e.g. http://127.0.0.1:8080"
    )
    parser.add_argument(
        "--processes", type=int, default=None, help="Locust worker processes (default: one process)"
    )
    parser.add_argument(
        "--plan-surge-ratio",
        type=float,
        default=DEFAULT_PLAN_SURGE_RATIO,
        help="SageMaker: after the ladder, hold C_scale_max and C_scale_min for this surge ratio "
        "to measure CloudWatch's ratio where the plan's thresholds sit (default: %(default)g; "
        "give the ratio you will plan with)",
    )
    parser.add_argument(
        "--metric-wait-s",
        type=float,
        default=None,
        help="SageMaker: how long to wait for CloudWatch's last period (default: 180)",
    )
    add_ladder_arguments(parser)
    parser.set_defaults(handler=run)


def schedule_of(args: argparse.Namespace) -> LadderSchedule:
    return LadderSchedule(
        rungs=parse_rungs(args.rungs),
        hold_s=args.hold_s,
        measure_s=args.measure_s,
        idle_s=args.idle_s,
        max_hold_s=args.max_hold_s,
    )


def run(args: argparse.Namespace) -> int:
    from tts_bench.artifacts.out_paths import usable_folder
    from tts_bench.errors import RefusalError
    from tts_bench.measure.corpus import load_corpus
    from tts_bench.measure.ladder import check_slo_ms

    schedule = schedule_of(args)
    check_slo_ms(args.slo_ms)
    refine_pct = None if args.refine is None else check_refine_pct(args.refine)
    underrun_slo = None if args.underrun_slo is None else check_underrun_slo(args.underrun_slo)
    if args.corpus is not None:
        load_corpus(args.corpus)
    transport = Transport(args.transport)
    verify = args.endpoint is not None and not transport.is_local
    plan = describe_verification(schedule, args.plan_surge_ratio) if verify else None
    if args.dry_run:
        print("\n".join(filter(None, (describe_schedule(schedule, args.slo_ms, refine_pct), plan))))
        return 0
    if args.endpoint:
        return run_on_endpoint(args, schedule, transport, refine_pct, underrun_slo)
    if not transport.is_local:
        raise RefusalError(
            f"--transport {transport.value} measures a SageMaker endpoint: pass --endpoint NAME"
        )
    if not args.host:
        raise RefusalError("a local ladder needs --host, e.g. --host http://127.0.0.1:8080")
    if args.processes is not None and args.processes < 1:
        raise RefusalError(f"--processes {args.processes}: give at least 1 (or leave it out)")
    usable_folder(args.out)  # before the ladder: a bad --out must not cost the run

    from tts_bench.measure.ladder_locust import LadderRequest, run_ladder
    from tts_bench.measure.server_ping import fetch_ping

    ping = fetch_ping(args.host)
    ping.refuse_curve_modelled()
    ping.refuse_bounded()
    if not ping.ready:
        raise RefusalError(f"{args.host}/ping says {ping.status!r}: wait until the server is ready")
    fingerprint = ping.fingerprint(transport)
    request = LadderRequest(
        host=args.host, schedule=schedule, slo_ms=args.slo_ms, transport=transport.value,
        corpus=args.corpus, model=args.model, out=args.out, processes=args.processes,
        refine_pct=refine_pct, underrun_slo=underrun_slo,
    )  # fmt: skip
    print(describe_schedule(schedule, args.slo_ms, refine_pct), file=sys.stderr)
    path = run_ladder(
        request, fingerprint, lambda line: print(f"qmax: {line}", file=sys.stderr, flush=True)
    )
    print(path)
    print(f"next: tts-bench ttotal --local --qmax {path} --host {args.host}", file=sys.stderr)
    return 0


def run_on_endpoint(
    args: argparse.Namespace,
    schedule: LadderSchedule,
    transport: Transport,
    refine_pct: float | None,
    underrun_slo: float | None,
) -> int:
    """The live ladder: preflight drift, freeze from this (main) thread, Locust, CloudWatch."""
    from tts_bench.aws.session import AwsSession
    from tts_bench.errors import RefusalError
    from tts_bench.measure.cloudwatch_join import DEFAULT_METRIC_WAIT_S
    from tts_bench.measure.live_ladder import LiveLadderRequest, run_live_ladder

    if transport.is_local:
        raise RefusalError(
            f"--transport {transport.value} measures `tts-bench serve` (--host), not an endpoint; "
            "use --transport response-stream or bidi-stream with --endpoint"
        )
    if args.host:
        raise RefusalError("pass either --host (a local server) or --endpoint, not both")
    session = AwsSession.from_environment(args.region)
    request = LiveLadderRequest(
        endpoint=args.endpoint, variant=args.variant, transport=transport, schedule=schedule,
        slo_ms=args.slo_ms, model=args.model, out=args.out, corpus=args.corpus,
        processes=args.processes,
        metric_wait_s=DEFAULT_METRIC_WAIT_S if args.metric_wait_s is None else args.metric_wait_s,
        refine_pct=refine_pct, underrun_slo=underrun_slo, plan_surge_ratio=args.plan_surge_ratio,
    )  # fmt: skip
    print(describe_schedule(schedule, args.slo_ms, refine_pct), file=sys.stderr)
    print(describe_verification(schedule, args.plan_surge_ratio), file=sys.stderr)

    def say(line: str) -> None:
        print(f"qmax: {line}", file=sys.stderr, flush=True)

    path = run_live_ladder(session, request, say, say)
    print(path)
    print(
        f"next: tts-bench ttotal --endpoint {args.endpoint} --variant {args.variant} --qmax {path}",
        file=sys.stderr,
    )
    return 0
