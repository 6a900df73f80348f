"""`tts-bench qmax`: the closed-loop Q_max ladder (Locust, headless) against a server or endpoint.

`--dry-run` prints the schedule and its wall-clock estimate and touches nothing else.
`--contract kokoro|sonic3|FILE` names the endpoint contract (default kokoro, this project's
container): how requests are built and events and refusals read; it goes into the fingerprint. A local
run needs `--host` (a `tts-bench serve`) and a local transport. A SageMaker run takes
`--endpoint NAME [--variant V] --transport response-stream|bidi-stream`: a preflight drift, the
freeze around the Locust run (restored on every exit path), the fingerprint from the endpoint,
and each rung's CloudWatch ratio.
"""

from __future__ import annotations

import argparse
import os
import sys

from tts_bench.deployment import DEFAULT_VARIANT
from tts_bench.measure.ladder.flags import LadderOptions, add_ladder_arguments, ladder_options
from tts_bench.measure.ladder.live.verification import (
    DEFAULT_PLAN_SURGE_RATIO,
    describe_verification,
)
from tts_bench.measure.ladder.schedule import describe_q_max_basis, describe_schedule


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "qmax",
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
        "--no-fleet-level",
        dest="fleet_level",
        action="store_false",
        help="SageMaker: hold no verification rung at the fleet rule's level (it is held three "
        "minutes of the cloud's clock to read InvocationsPerInstance); `plan --rule fleet` then "
        "assumes that metric's ratio 1.0 by AWS's definition and warns. For a ladder you will "
        "plan with the published rule",
    )
    parser.add_argument(
        "--metric-wait-s",
        type=float,
        default=None,
        help="SageMaker: how long to wait for CloudWatch's last period (default: 180)",
    )
    add_ladder_arguments(parser)
    parser.set_defaults(handler=run)


# The longest wait for CloudWatch's last period that means anything (its default is 180 s).
MAX_METRIC_WAIT_S = 3600.0


def check_run_flags(args: argparse.Namespace) -> None:
    """The flags beside the ladder's own, checked before anything is sent (or printed)."""
    from tts_bench.errors import RefusalError

    cores = os.cpu_count() or 1
    if args.processes is not None and not 1 <= args.processes <= cores:
        raise RefusalError(
            f"--processes {args.processes}: give 1 to {cores} (this machine's cores; more Locust "
            "workers than cores only compete for them), or leave it out"
        )
    if not args.fleet_level and args.endpoint is None:
        raise RefusalError(
            "--no-fleet-level leaves out a verification rung, which only a SageMaker ladder "
            "(--endpoint) holds: drop the flag"
        )
    if args.metric_wait_s is not None and not 0 <= args.metric_wait_s <= MAX_METRIC_WAIT_S:
        raise RefusalError(
            f"--metric-wait-s {args.metric_wait_s:g}: give 0 to {MAX_METRIC_WAIT_S:g} s"
        )


def run(args: argparse.Namespace) -> int:
    from tts_bench.artifacts.files import usable_folder
    from tts_bench.errors import RefusalError
    from tts_bench.measure.corpus import load_corpus

    options = ladder_options(args)
    check_run_flags(args)
    schedule, transport = options.schedule, options.transport
    load_corpus(options.corpus)
    verify = args.endpoint is not None and not transport.is_local
    plan = (
        describe_verification(schedule, args.plan_surge_ratio, args.fleet_level) if verify else None
    )
    if args.dry_run:
        print(
            "\n".join(
                filter(
                    None,
                    (
                        describe_schedule(
                            schedule, options.slo_ms, options.refine_pct, options.repeat
                        ),
                        describe_q_max_basis(options.confidence, options.q_max_basis),
                        plan,
                    ),
                )
            )
        )
        return 0
    if args.endpoint:
        return run_on_endpoint(args, options)
    if not transport.is_local:
        raise RefusalError(
            f"--transport {transport.value} measures a SageMaker endpoint: pass --endpoint NAME"
        )
    if not args.host:
        raise RefusalError("a local ladder needs --host, e.g. --host http://127.0.0.1:8080")
    usable_folder(options.out)  # before the ladder: a bad --out must not cost the run

    from tts_bench.measure.ladder.conductor import local_target
    from tts_bench.measure.ladder.locust_child import LadderRequest, run_ladder

    target = local_target(args.host, options)
    request = LadderRequest(
        host=args.host, schedule=schedule, slo_ms=options.slo_ms, transport=transport.value,
        corpus=options.corpus, model=args.model, out=options.out, processes=args.processes,
        refine_pct=options.refine_pct, underrun_slo=options.underrun_slo,
        confidence=options.confidence, contract=options.contract_arg, repeat=options.repeat,
        q_max_basis=options.q_max_basis, curve_check=options.curve_check,
    )  # fmt: skip
    print(
        describe_schedule(schedule, options.slo_ms, options.refine_pct, options.repeat),
        describe_q_max_basis(options.confidence, options.q_max_basis),
        sep="\n",
        file=sys.stderr,
    )
    path = run_ladder(
        request,
        target.fingerprint,
        lambda line: print(f"qmax: {line}", file=sys.stderr, flush=True),
        provenance_kind=target.provenance_kind,
    )
    print(path)
    print(f"next: tts-bench ttotal --local --qmax {path} --host {args.host}", file=sys.stderr)
    return 0


def run_on_endpoint(args: argparse.Namespace, options: LadderOptions) -> int:
    """The live ladder: preflight drift, freeze from this (main) thread, Locust, CloudWatch."""
    from tts_bench.aws.session import AwsSession
    from tts_bench.errors import RefusalError
    from tts_bench.measure.ladder.live.cloudwatch_join import DEFAULT_METRIC_WAIT_S
    from tts_bench.measure.ladder.live.live_ladder import LiveLadderRequest, run_live_ladder

    transport, schedule = options.transport, options.schedule
    if transport.is_local:
        raise RefusalError(
            f"--transport {transport.value} measures `tts-bench serve` (--host), not an endpoint; "
            "use --transport response-stream or bidi-stream with --endpoint"
        )
    if args.host:
        raise RefusalError("pass either --host (a local server) or --endpoint, not both")
    session = AwsSession.from_environment(args.region)
    variant = args.variant or DEFAULT_VARIANT
    request = LiveLadderRequest(
        endpoint=args.endpoint, variant=variant, transport=transport, schedule=schedule,
        slo_ms=options.slo_ms, model=args.model, out=options.out, corpus=options.corpus,
        processes=args.processes,
        metric_wait_s=DEFAULT_METRIC_WAIT_S if args.metric_wait_s is None else args.metric_wait_s,
        refine_pct=options.refine_pct, underrun_slo=options.underrun_slo,
        confidence=options.confidence, plan_surge_ratio=args.plan_surge_ratio,
        contract=options.contract_arg, repeat=options.repeat, fleet_level=args.fleet_level,
        q_max_basis=options.q_max_basis, curve_check=options.curve_check,
    )  # fmt: skip
    print(
        describe_schedule(schedule, options.slo_ms, options.refine_pct, options.repeat),
        describe_q_max_basis(options.confidence, options.q_max_basis),
        sep="\n",
        file=sys.stderr,
    )
    print(describe_verification(schedule, args.plan_surge_ratio, args.fleet_level), file=sys.stderr)

    def say(line: str) -> None:
        print(f"qmax: {line}", file=sys.stderr, flush=True)

    path = run_live_ladder(session, request, say, say)
    print(path)
    print(
        f"next: tts-bench ttotal --endpoint {args.endpoint} --variant {variant} --qmax {path}",
        file=sys.stderr,
    )
    return 0
