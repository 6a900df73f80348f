"""`tts-bench simulate`: replay traffic against a fleet under each policy (SPEC §12)."""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path

from tts_bench.cli.aws_options import add_semantics_option
from tts_bench.simulate.oracle import OracleFleet
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
        help='print {"policies", "inputs", "provenance", "oracle"} as JSON, nothing else on stdout',
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
        payload["oracle"] = oracle_record(result.oracle)
        sys.stdout.write(json.dumps(payload, indent=2) + "\n")
    else:
        hours = result.oracle.instance_hours if result.oracle else None
        print(render_table(artifact.policies, hours))
        print(oracle_line(result.oracle))
        print(f"Wrote {result.path} and {result.plot}")
    return 0


def oracle_record(oracle: OracleFleet | None) -> dict[str, float | int] | None:
    if oracle is None:
        return None
    return {
        "instance_hours": round(oracle.instance_hours, 3),
        "launches": oracle.launches,
        "peak_instances": oracle.peak,
        "per_instance_rps": oracle.per_instance_rps,
        "lead_s": oracle.lead_s,
    }


def oracle_line(oracle: OracleFleet | None) -> str:
    if oracle is None:
        return "oracle: none (the fleet rule gives no λ_out for these inputs)"
    return (
        f"oracle: {oracle.instance_hours:,.1f} instance-h, peak {oracle.peak}: a clairvoyant fleet "
        f"at λ_out {oracle.per_instance_rps:.3f} rps each, launched {oracle.lead_s:g} s ahead "
        "(docs/simulation.md#the-clairvoyant-fleet)"
    )
