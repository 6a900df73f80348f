"""`tts-bench validate`: the deployed scaling settings and admission bound against a plan's."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from tts_bench.cli.aws_options import add_bounds_option, add_endpoint_options


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "validate",
        description="Read-only. Print the deployed image digest (or model package and its "
        "network isolation), target value, scale-in threshold, both "
        "cooldowns, min/max (the plan's clamped into --bounds when given) and the container's "
        "MAX_QUEUE_DEPTH side by side with the plan's, with a verdict each; exit 0 only when "
        "all match.",
    )
    parser.add_argument("--plan", type=Path, required=True, metavar="PATH", help="plan artifact")
    add_endpoint_options(parser)
    add_bounds_option(parser)
    parser.add_argument("--json", action="store_true", help="print the comparison as JSON")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from tts_bench.artifacts.files import load_artifact
    from tts_bench.artifacts.plan import PlanArtifact
    from tts_bench.aws.session import AwsSession
    from tts_bench.aws.validate import (
        format_value,
        read_and_compare,
        render_table,
        require_feasible,
        require_scaling_bounds,
    )

    plan = load_artifact(args.plan, PlanArtifact)
    require_feasible(plan, str(args.plan))
    require_scaling_bounds(args.bounds)
    session = AwsSession.from_environment(args.region)
    rows = read_and_compare(session, args.endpoint, plan, args.bounds, args.variant)
    bad = [r for r in rows if not r.ok]
    if args.json:
        print(json.dumps([r.model_dump(mode="json") for r in rows], indent=2))
    else:
        print(render_table(rows))
    summary = (
        f"validate: all {len(rows)} settings match plan {plan.plan_id}"
        if not bad
        else f"validate: {len(bad)} of {len(rows)} settings differ from plan {plan.plan_id}: "
        + "; ".join(
            f"{r.setting.value} deployed {format_value(r.deployed)}, plan {format_value(r.planned)}"
            for r in bad
        )
    )
    print(summary, file=sys.stderr if args.json else sys.stdout)
    return 0 if not bad else 1
