"""`tts-bench ttotal --local --qmax PATH --host URL`: local T_total beside a loaded server.

Without `--local` it refuses: SageMaker T_total (forcing one more instance) comes in a later
issue. The fresh server is started with the serve flags given here; it must report the same
build as the ladder's artifact, or nothing is written.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tts_bench.deployment import DEFAULT_POLICY_LAG_BOUND_S
from tts_bench.measure.ttotal_local import DEFAULT_PROBE_CONCURRENCY


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "ttotal",
        help="measure T_total: spawn to first served request of a fresh server (--local)",
        description=__doc__.splitlines()[0],
    )
    parser.add_argument("--local", action="store_true", help="a fresh local server process")
    parser.add_argument("--qmax", type=Path, required=True, help="the local qmax artifact")
    parser.add_argument(
        "--host", help="the running server the probe loads, e.g. http://127.0.0.1:8080"
    )
    parser.add_argument("--backend", choices=["onnx", "torch"], help="fresh server's --backend")
    parser.add_argument("--model-dir", type=Path, help="fresh server's --model-dir")
    parser.add_argument("--serial", action="store_true", help="fresh server's --serial")
    parser.add_argument(
        "--probe-concurrency",
        type=int,
        default=DEFAULT_PROBE_CONCURRENCY,
        help="closed-loop probe users on the running server (default: %(default)s)",
    )
    parser.add_argument(
        "--policy-lag-s",
        type=float,
        default=DEFAULT_POLICY_LAG_BOUND_S,
        help="policy detection lag bound added to planned T_total (default: %(default)g)",
    )
    parser.add_argument(
        "--corpus", type=Path, help="utterances (default: the shipped English corpus)"
    )
    parser.add_argument("--out", type=Path, default=Path("measurements"), help="artifact directory")
    parser.set_defaults(handler=run)


def serve_flags(args: argparse.Namespace) -> list[str]:
    flags = []
    if args.backend:
        flags += ["--backend", args.backend]
    if args.model_dir:
        flags += ["--model-dir", str(args.model_dir)]
    if args.serial:
        flags.append("--serial")
    return flags


def run(args: argparse.Namespace) -> int:
    from tts_bench.artifacts.fingerprint import ttotal_filename
    from tts_bench.artifacts.schema import Trigger, write_artifact
    from tts_bench.errors import RefusalError
    from tts_bench.measure.corpus import load_corpus
    from tts_bench.measure.ladder_locust import REPO_ROOT
    from tts_bench.measure.ttotal_local import LocalTtotalRequest, local_qmax, measure_local_ttotal

    if not args.local:
        raise RefusalError(
            "not yet available: SageMaker T_total comes in a later issue; "
            "pass --local to time a fresh local server process"
        )
    if args.probe_concurrency < 1:
        raise RefusalError("--probe-concurrency must be at least 1")
    local_qmax(args.qmax)
    if not args.host:
        raise RefusalError("--local needs --host: the running server the ladder measured")
    corpus = load_corpus(args.corpus or REPO_ROOT / "loadtest" / "corpus" / "en.txt")
    request = LocalTtotalRequest(
        qmax_path=args.qmax, host=args.host, utterances=corpus, server_args=serve_flags(args),
        probe_concurrency=args.probe_concurrency, policy_lag_bound_s=args.policy_lag_s,
    )  # fmt: skip
    artifact = measure_local_ttotal(
        request, lambda line: print(f"ttotal: {line}", file=sys.stderr, flush=True)
    )
    path = write_artifact(
        artifact, args.out, ttotal_filename(artifact.fingerprint, Trigger.LOCAL_PROCESS.value)
    )
    for stage in artifact.stages:
        counted = "" if stage.counted else "  (not counted)"
        print(f"  {stage.name:<44} {stage.seconds:8.3f} s{counted}")
    print(
        f"T_total {artifact.measured_total_s:.1f} s measured + {artifact.policy_lag_bound_s:g} s "
        f"policy lag bound = {artifact.planned_total_s:.1f} s planned"
    )
    print(path)
    print(f"next: tts-bench plan --qmax {args.qmax} --ttotal {path} --peak-rps R", file=sys.stderr)
    return 0
