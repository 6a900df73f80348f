"""`tts-bench plan`: derive the autoscaling plan from a qmax and a ttotal artifact (SPEC §6)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tts_bench.artifacts.schema import dump_json
from tts_bench.planning.from_files import plan_from_files
from tts_bench.planning.plan import PlanRequest
from tts_bench.planning.report import next_step, render_plan


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "plan",
        description="Pure arithmetic over a qmax and a ttotal artifact; no AWS. Exit 0 when "
        "feasible, 1 when a finding is 'stop', 2 on a refusal or usage error.",
    )
    p.add_argument("--qmax", type=Path, required=True, help="qmax artifact (the ladder)")
    p.add_argument("--ttotal", type=Path, required=True, help="ttotal artifact (the scale-out)")
    p.add_argument(
        "--peak-rps", type=float, required=True, help="peak traffic to size max_instances for"
    )
    p.add_argument(
        "--trough-rps", type=float, default=0.0, help="trough traffic for min_instances (default 0)"
    )
    p.add_argument(
        "--slo-ms", type=float, default=3000.0, help="p95 TTFAB SLO in ms (default 3000)"
    )
    p.add_argument(
        "--surge-ratio",
        type=float,
        default=1.25,
        help="surge to survive, 1 < r < 1.5 (default 1.25)",
    )
    p.add_argument(
        "--min-floor", type=int, default=1, help="lowest min_instances allowed (default 1)"
    )
    p.add_argument(
        "--allow-config-mismatch",
        action="store_true",
        help="plan from artifacts of different fingerprints (a warning instead of a refusal)",
    )
    p.add_argument(
        "--out",
        type=Path,
        default=Path("measurements"),
        help="where to write the plan (default measurements/)",
    )
    p.add_argument(
        "--json",
        action="store_true",
        help="print the plan artifact as JSON and nothing else on stdout",
    )
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from pydantic import ValidationError

    from tts_bench.errors import TtsBenchError

    try:
        request = PlanRequest(
            peak_rps=args.peak_rps,
            trough_rps=args.trough_rps,
            slo_ms=args.slo_ms,
            surge_ratio=args.surge_ratio,
            min_floor=args.min_floor,
            allow_config_mismatch=args.allow_config_mismatch,
        )
    except ValidationError as exc:
        first = exc.errors()[0]
        raise TtsBenchError(f"--{str(first['loc'][0]).replace('_', '-')}: {first['msg']}") from None
    written = plan_from_files(args.qmax, args.ttotal, request, args.out)
    plan = written.plan
    if args.json:
        sys.stdout.write(dump_json(plan))
    else:
        print(render_plan(plan, written.qmax, written.ttotal))
        print(f"Wrote {written.path}")
    print(next_step(plan, str(written.path)), file=sys.stderr)
    return 0 if plan.feasible else 1
