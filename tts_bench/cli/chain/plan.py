"""`tts-bench plan`: derive the autoscaling plan from a qmax and a ttotal artifact (SPEC §6)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tts_bench.artifacts.files import dump_json
from tts_bench.planning.findings import DEFAULT_SHED_BUDGET
from tts_bench.planning.from_files import plan_from_files
from tts_bench.planning.report import next_step, render_plan
from tts_bench.planning.steps import DEFAULT_RULE, PlanRequest

BARE_TRAFFIC = "default"


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
        "--rule",
        choices=("published", "fleet"),
        default=DEFAULT_RULE,
        help="fleet: levels in load per instance on a load-linear metric (default); "
        "published: SPEC §6's fractions of Q_max in concurrency",
    )
    p.add_argument(
        "--allow-config-mismatch",
        action="store_true",
        help="plan from artifacts of different fingerprints (a warning instead of a refusal)",
    )
    add_traffic_options(p)
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


def add_traffic_options(p: argparse.ArgumentParser) -> None:
    """`--traffic`/`--traffic-trace` and what goes with them: the check, the schedule, the
    forecast errors."""
    traffic = p.add_mutually_exclusive_group()
    traffic.add_argument(
        "--traffic",
        nargs="?",
        const=BARE_TRAFFIC,
        metavar="SPEC",
        help="check the plan on simulated days and record both rules' figures; bare: a day "
        "from --trough-rps to --peak-rps with a --surge-ratio surge at the steepest point",
    )
    traffic.add_argument(
        "--traffic-trace", type=Path, metavar="FILE", help="check the plan on a trace instead"
    )
    p.add_argument(
        "--schedule",
        action="store_true",
        help="with --traffic or --traffic-trace: add scheduled MinCapacity steps a planned "
        "T_total ahead of the ramps the reactive rule cannot follow (fleet rule; times in UTC)",
    )
    p.add_argument(
        "--forecast-errors",
        action="store_true",
        help="with --schedule: also simulate the day shifted ±30 min and its load ×0.8 and ×1.2 "
        "(the same schedule; 16 more simulated days per seed)",
    )
    p.add_argument(
        "--seeds", type=int, default=5, help="simulated days for the check, seeds 1..N (default 5)"
    )
    p.add_argument(
        "--shed-budget",
        type=float,
        default=DEFAULT_SHED_BUDGET,
        metavar="FRACTION",
        help="mean shed share over the seeds past which the plan is stop "
        f"(default {DEFAULT_SHED_BUDGET:g})",
    )


def traffic_check(args: argparse.Namespace, request: PlanRequest):  # -> PlanCheck | None
    """The `--traffic` check, refused in one line before anything runs when its flags are bad."""
    from tts_bench.errors import TtsBenchError
    from tts_bench.planning.traffic_check import check_budget, default_traffic

    check_budget(args.shed_budget)
    if args.forecast_errors and not args.schedule:
        raise TtsBenchError("--forecast-errors judges a schedule: add --schedule")
    if args.traffic is None and args.traffic_trace is None:
        if args.schedule:
            raise TtsBenchError(
                "--schedule is made from the day: give --traffic or --traffic-trace"
            )
        return None
    if args.schedule and request.rule != "fleet":
        raise TtsBenchError(
            "--schedule needs the fleet rule's load level λ_out; drop --rule published"
        )

    if args.seeds < 1:
        raise TtsBenchError(f"--seeds {args.seeds} must be at least 1")
    # Imported here: the simulation loads numba, which a plan without --traffic never needs.
    from tts_bench.simulate.check import CheckTraffic, checked_plan
    from tts_bench.simulate.traffic import parse_synthetic

    if args.traffic_trace is not None:
        traffic = CheckTraffic(trace=args.traffic_trace)
    else:
        spec = args.traffic
        if spec == BARE_TRAFFIC:
            spec = default_traffic(request.peak_rps, request.trough_rps, request.surge_ratio)
        parse_synthetic(spec)  # a bad spec is refused before the plan is derived
        traffic = CheckTraffic(spec=spec)

    def check(plan, qmax, ttotal, sources):  # type: ignore[no-untyped-def]
        return checked_plan(
            plan, qmax, ttotal, request, sources, traffic, args.seeds, args.shed_budget,
            args.schedule, args.forecast_errors,
        )  # fmt: skip

    return check


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
            rule=args.rule,
        )
    except ValidationError as exc:
        first = exc.errors()[0]
        raise TtsBenchError(f"--{str(first['loc'][0]).replace('_', '-')}: {first['msg']}") from None
    written = plan_from_files(
        args.qmax, args.ttotal, request, args.out, traffic_check(args, request)
    )
    plan = written.plan
    if args.json:
        sys.stdout.write(dump_json(plan))
    else:
        print(render_plan(plan, written.qmax, written.ttotal))
        print(f"Wrote {written.path}")
    print(next_step(plan, str(written.path)), file=sys.stderr)
    return 0 if plan.feasible else 1
