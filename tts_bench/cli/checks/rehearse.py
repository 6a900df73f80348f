"""`tts-bench rehearse`: a plan's deployed policy on open-loop traffic, replayed in `simulate`.

Sends the arrivals of a synthetic spec or a trace to an endpoint over response-stream, with its
deployed policy live, and records per 10 s what was offered, admitted and shed, the p95 TTFAB,
the desired and InService counts, the scaling metrics' datapoints (CloudWatch), the alarms'
state changes and the scaling activities; replays the same arrivals in the simulator; writes
`rehearsal-….json` with both runs and their agreement, and one PNG of both timelines. Refuses,
in one line and before anything is sent, an endpoint without a deployed plan or with scaling
frozen. `--dry-run` prints the instance-hours and cost and sends nothing (SPEC §13).
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from tts_bench.cli.aws_options import add_semantics_option
from tts_bench.deployment import DEFAULT_VARIANT
from tts_bench.measure.transport.contract import CONTRACT_HELP, CONTRACT_METAVAR
from tts_bench.simulate.traffic import SYNTHETIC_HELP


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("rehearse", description=__doc__.splitlines()[0])
    p.add_argument("--plan", type=Path, required=True, help="the plan deployed on the endpoint")
    p.add_argument("--endpoint", metavar="NAME", help="SageMaker endpoint (not with --dry-run)")
    p.add_argument("--variant", default=DEFAULT_VARIANT, help="production variant")
    p.add_argument("--region", help="AWS region (default: AWS_REGION or the profile's)")
    traffic = p.add_mutually_exclusive_group(required=True)
    traffic.add_argument("--synthetic", help=SYNTHETIC_HELP + " (the fleet's rates; Poisson)")
    traffic.add_argument(
        "--trace", type=Path, help="CSV with a timestamp_s column (sorted), or minute,count"
    )
    p.add_argument("--duration-s", type=float, help="seconds of the service's clock to run")
    p.add_argument(
        "--time-scale",
        type=float,
        help="the service's seconds per wall second: 1 on AWS; on a local cloud its own "
        "(TTS_BENCH_TIME_SCALE; a different value is refused)",
    )
    p.add_argument("--seed", type=int, default=1, help="arrivals' and replays' seed (default 1)")
    p.add_argument(
        "--replays",
        type=int,
        default=10,
        help="simulated replays of the same arrivals, for the shed share's spread (default 10)",
    )
    p.add_argument("--price-per-hour", type=float, help="USD per instance-hour, for the cost")
    p.add_argument("--qmax", type=Path, help="the plan's qmax artifact (default: as it names)")
    p.add_argument("--ttotal", type=Path, help="the plan's ttotal artifact (default: as it names)")
    p.add_argument("--model", default="kokoro-82m", help="model id (default: %(default)s)")
    p.add_argument("--corpus", type=Path, help="utterances (default: the shipped English corpus)")
    p.add_argument("--contract", metavar=CONTRACT_METAVAR, help=CONTRACT_HELP)
    p.add_argument("--out", type=Path, default=Path("measurements"), help="artifact directory")
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="print the plan's instance-hours and cost on this traffic (simulated) and exit",
    )
    add_semantics_option(p)
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from tts_bench.artifacts.files import usable_folder
    from tts_bench.rehearse.arrivals import TrafficSpec
    from tts_bench.rehearse.run import RehearsalRequest, dry_run, rehearse, summary

    request = RehearsalRequest(
        plan=args.plan, endpoint=args.endpoint, variant=args.variant,
        traffic=TrafficSpec(args.synthetic, args.trace, args.duration_s),
        time_scale=args.time_scale, seed=args.seed, out=args.out, dry_run=args.dry_run,
        price_per_hour_usd=args.price_per_hour, qmax=args.qmax, ttotal=args.ttotal,
        replays=args.replays, model=args.model, corpus=args.corpus,
        semantics=args.aws_semantics, contract=args.contract,
        command="tts-bench " + shlex.join(sys.argv[1:]) if sys.argv[1:2] == ["rehearse"] else None,
    )  # fmt: skip
    if args.dry_run:
        print(f"dry run, nothing sent: {dry_run(request)}")
        return 0
    usable_folder(args.out)  # before anything is sent: a bad --out must not cost the run
    from tts_bench.aws.session import AwsSession

    session = AwsSession.from_environment(args.region)
    result = rehearse(
        request, session, lambda line: print(f"rehearse: {line}", file=sys.stderr, flush=True)
    )
    for line in summary(result.artifact):
        print(line)
    print(f"Wrote {result.path} and {result.png}")
    return 0
