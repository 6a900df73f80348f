"""`tts-bench import-reference PUBLISHED.json`: rebuild the reference qmax and ttotal artifacts."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tts_bench.artifacts.files import load_artifact, write_artifact
from tts_bench.artifacts.fingerprint import qmax_filename, ttotal_filename
from tts_bench.artifacts.qmax import QmaxArtifact
from tts_bench.artifacts.reference import build_reference
from tts_bench.artifacts.ttotal import TtotalArtifact
from tts_bench.errors import ArtifactError


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "import-reference",
        description="Turn the published measurement run's figures into qmax and ttotal "
        "artifacts (provenance 'reference') that `plan` and `report` read.",
    )
    parser.add_argument("published", type=Path, help="published-g5xlarge-run.json")
    parser.add_argument(
        "--out", type=Path, default=Path("measurements"), help="default: measurements/"
    )
    parser.set_defaults(handler=run)


def _same_figures(path: Path, artifact: QmaxArtifact | TtotalArtifact) -> bool:
    """True when `path` already holds `artifact` but for the time it was imported."""
    if not path.exists():
        return False
    try:
        existing = load_artifact(path, type(artifact))
    except ArtifactError:
        return False  # write_artifact says why it will not replace it
    skip = {"provenance": {"created_at"}}
    return existing.model_dump(exclude=skip) == artifact.model_dump(exclude=skip)


def run(args: argparse.Namespace) -> int:
    qmax, ttotal = build_reference(args.published)
    fp = qmax.fingerprint
    if fp is None:  # build_reference always sets one
        raise RuntimeError("reference artifacts lack a fingerprint")
    for artifact, filename in (
        (qmax, qmax_filename(fp)),
        (ttotal, ttotal_filename(fp, ttotal.trigger.value)),
    ):
        path = args.out / filename
        if _same_figures(path, artifact):
            # Rewriting would only move created_at, change the file's sha256 and so the plan_id
            # of every plan derived from it.
            print(f"{path} (unchanged)")
        else:
            print(write_artifact(artifact, args.out, filename))
    print(
        f"next: tts-bench plan --qmax {args.out / qmax_filename(fp)} "
        f"--ttotal {args.out / ttotal_filename(fp, ttotal.trigger.value)} --peak-rps 5000 --trough-rps 10",
        file=sys.stderr,
    )
    return 0
