"""`tts-bench preview`: the program under mocks, judged by the policy pack (no Pulumi CLI)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from tts_bench.cli.project import project_root
from tts_bench.errors import TtsBenchError


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "preview",
        description=(
            "A local stand-in for `pulumi preview --policy-pack policies`: runs the program under "
            "Pulumi's mocks with the stack's config, records every resource, evaluates the pack "
            "with pulumi-policy's own analyzer, prints the resource tree and each policy's result. "
            "Exits 1 on any mandatory violation."
        ),
    )
    parser.add_argument(
        "--stack", default="dev", help="stack whose Pulumi.<stack>.yaml to use (default dev)"
    )
    parser.add_argument(
        "--program",
        type=Path,
        default=None,
        help="Pulumi Python program folder (default: the project in the current folder, else "
        "this checkout's)",
    )
    parser.add_argument(
        "--policy-pack",
        type=Path,
        default=None,
        help="policy pack folder (default: the project's policies/)",
    )
    parser.add_argument(
        "--policy-config",
        type=Path,
        default=None,
        help='JSON as for `pulumi preview --policy-pack-config`, e.g. {"<policy>": {"plansDir": "…"}}',
    )
    parser.add_argument("--json", action="store_true", help="print the result as JSON instead")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from tts_bench.infra.preview import PreviewError, dump, render, run_preview

    root = project_root()
    program = (args.program or root).resolve()
    pack = (args.policy_pack or root / "policies").resolve()
    config = None
    if args.policy_config is not None:
        try:
            config = json.loads(args.policy_config.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise TtsBenchError(
                f"{args.policy_config}: cannot read policy config ({exc})"
            ) from None
        if not isinstance(config, dict):
            raise PreviewError(f"{args.policy_config}: policy config must be a JSON object")
    print(f"tts-bench preview: program {program}, stack {args.stack}, pack {pack}", file=sys.stderr)
    result = run_preview(program, args.stack, pack, config)
    print(dump(result) if args.json else "\n".join(render(result)))
    if not result.mandatory_violations:
        print(
            "tts-bench preview: next, with an AWS account and the Pulumi CLI: "
            f"pulumi up --stack {args.stack} --policy-pack policies",
            file=sys.stderr,
        )
    return 1 if result.mandatory_violations else 0
