"""`tts-bench simulate`: replay traffic against a fleet under each policy (SPEC §12)."""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path

from tts_bench.cli.aws_options import add_semantics_option
from tts_bench.simulate.policies import POLICY_NAMES
from tts_bench.simulate.traffic import SYNTHETIC_HELP


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "simulate",
        description="Replays a trace or synthetic traffic against a fleet governed by each "
        "policy, from the measured curves; writes a simulation artifact and its timeline PNG. "
        "Exit 0, or 2 on a refusal or usage error.",
    )
    p.add_argument("--plan", type=Path, required=True, help="plan artifact")
    p.add_argument("--qmax", type=Path, required=True, help="the qmax artifact the plan came from")
    p.add_argument(
        "--ttotal", type=Path, required=True, help="the ttotal artifact the plan came from"
    )
    traffic = p.add_mutually_exclusive_group(required=True)
    traffic.add_argument(
        "--trace", type=Path, help="CSV with a timestamp_s column (sorted), or minute,count"
    )
    traffic.add_argument("--synthetic", help=SYNTHETIC_HELP + " (Poisson arrivals)")
    p.add_argument(
        "--duration-s",
        type=float,
        help="seconds to simulate (default: the trace's length, one diurnal period, "
        "or an hour for steady traffic)",
    )
    p.add_argument(
        "--policy",
        action="append",
        dest="policies",
        metavar="NAME",
        help=f"{', '.join(POLICY_NAMES)}; repeat to compare (default: plan)",
    )
    p.add_argument("--seed", type=int, default=1, help="random seed (default 1)")
    add_semantics_option(p)
    p.add_argument("--price-per-hour", type=float, help="USD per instance-hour, for cost_usd")
    p.add_argument(
        "--out",
        type=Path,
        default=Path("measurements"),
        help="artifact directory (default measurements/)",
    )
    p.add_argument(
        "--json",
        action="store_true",
        help='print {"policies", "inputs", "provenance"} as JSON and nothing else on stdout',
    )
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    # Imported here: the fleet model loads numba, which no other subcommand needs.
    from tts_bench.simulate.from_files import SimulationRequest, simulate_from_files
    from tts_bench.simulate.outcome import render_table

    request = SimulationRequest(
        plan=args.plan,
        qmax=args.qmax,
        ttotal=args.ttotal,
        trace=args.trace,
        synthetic=args.synthetic,
        duration_s=args.duration_s,
        policies=tuple(args.policies or ["plan"]),
        seed=args.seed,
        price_per_hour_usd=args.price_per_hour,
        out=args.out,
        semantics=args.aws_semantics,
        command="tts-bench " + shlex.join(sys.argv[1:]) if sys.argv[1:2] == ["simulate"] else None,
    )
    result = simulate_from_files(request)
    artifact = result.artifact
    if args.json:
        payload = artifact.model_dump(mode="json", include={"policies", "inputs", "provenance"})
        sys.stdout.write(json.dumps(payload, indent=2) + "\n")
    else:
        print(render_table(artifact.policies))
        print(f"Wrote {result.path} and {result.plot}")
    return 0
