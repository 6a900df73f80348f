"""`tts-bench drift`: read-only preflight; reconcile the deployed scaling with endpoint and plan."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tts_bench.cli.aws_options import add_bounds_option, add_endpoint_options

NEXT_STEP = (
    "next: measure Q_max with scaling frozen (`locust -f loadtest/qmax.py --headless`, "
    "or `tts-bench qmax`)"
)


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "drift",
        description="Reconcile what is deployed (scalable targets, policies, suspended state, "
        "alarm states, capacity) against the endpoint and, with --plan, the plan: the image "
        "digest or model package it was measured on and its scaling settings. Makes no "
        "change. Exit 0 with a `preflight-ok` line when clean, 1 when an error is found.",
    )
    add_endpoint_options(parser)
    parser.add_argument("--plan", type=Path, metavar="PATH", help="plan artifact to compare with")
    add_bounds_option(parser)
    parser.add_argument(
        "--insufficient-data-grace",
        type=float,
        default=None,
        metavar="SECONDS",
        help="an alarm in INSUFFICIENT_DATA for at least this long is stuck (an error); "
        "younger is a warning (default 900)",
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON on stdout")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from tts_bench.artifacts.files import load_artifact
    from tts_bench.artifacts.plan import PlanArtifact
    from tts_bench.aws.drift import DEFAULT_INSUFFICIENT_DATA_GRACE_S, read_and_check
    from tts_bench.aws.session import AwsSession
    from tts_bench.aws.validate import require_feasible

    plan = load_artifact(args.plan, PlanArtifact) if args.plan else None
    if plan is not None:
        require_feasible(plan, str(args.plan))
    session = AwsSession.from_environment(args.region)
    grace = args.insufficient_data_grace
    report = read_and_check(
        session,
        args.endpoint,
        variant=args.variant,
        plan=plan,
        bounds=args.bounds,
        insufficient_data_grace_s=DEFAULT_INSUFFICIENT_DATA_GRACE_S if grace is None else grace,
    )
    ok_line = (
        f"preflight-ok endpoint={report.endpoint} variant={report.variant} "
        f"region={report.region}" + (f" plan={report.plan_id}" if report.plan_id else "")
    )
    if args.json:
        print(report.model_dump_json(indent=2))
        status = sys.stderr
    else:
        width = max((len(f.rule.value) for f in report.findings), default=0)
        for finding in report.findings:
            print(
                f"{finding.severity.value:<7}  {finding.rule.value:<{width}}  "
                f"{finding.resource}: {finding.message}"
            )
        status = sys.stdout
    if report.clean:
        print(ok_line, file=status)
        print(NEXT_STEP, file=sys.stderr)
        return 0
    errors, warnings = len(report.errors), len(report.warnings)
    print(
        f"drift: {errors} error{'s' * (errors != 1)}, {warnings} warning{'s' * (warnings != 1)} "
        f"on endpoint {report.endpoint} ({report.region})",
        file=status,
    )
    return 1
