"""`tts-bench import-reference PUBLISHED.json`: rebuild the reference qmax and ttotal artifacts."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tts_bench.artifacts import write_artifact
from tts_bench.fingerprint import qmax_filename, ttotal_filename
from tts_bench.reference import build_reference


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "import-reference",
        help="rebuild the reference artifacts from the published run's figures",
        description="Turn the published measurement run's figures into qmax and ttotal "
        "artifacts (provenance 'reference') that `plan` and `report` read.",
    )
    parser.add_argument("published", type=Path, help="published-g5xlarge-run.json")
    parser.add_argument(
        "--out", type=Path, default=Path("measurements"), help="default: measurements/"
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    qmax, ttotal = build_reference(args.published)
    fp = qmax.fingerprint
    if fp is None:  # build_reference always sets one
        raise RuntimeError("reference artifacts lack a fingerprint")
    for path in (
        write_artifact(qmax, args.out, qmax_filename(fp)),
        write_artifact(ttotal, args.out, ttotal_filename(fp, ttotal.trigger.value)),
    ):
        print(path)
    print(
        f"next: tts-bench plan --qmax {args.out / qmax_filename(fp)} "
        f"--ttotal {args.out / ttotal_filename(fp, ttotal.trigger.value)} --peak-rps 5000 --trough-rps 10",
        file=sys.stderr,
    )
    return 0
