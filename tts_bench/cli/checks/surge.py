"""`tts-bench surge`: open-loop Poisson arrivals against one instance bounded at Q_max.

Records the shed share and the admitted requests' TTFAB (from each request's intended send
time) beside the birth–death model's prediction for the same rate and duration, from the
same qmax artifact. Without `--host` it starts a local server with MAX_QUEUE_DEPTH = Q_max; with
`--endpoint NAME --transport response-stream` it surges a SageMaker endpoint deployed with the
plan (its admission bound is Q_max), scaling frozen to one instance for the run.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tts_bench.artifacts.fingerprint import Transport
from tts_bench.deployment import DEFAULT_VARIANT
from tts_bench.measure.transport.contract import CONTRACT_HELP, CONTRACT_METAVAR

DEFAULT_DURATION_S = 60.0
DEFAULT_SEED = 1


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "surge",
        description=__doc__.splitlines()[0],
    )
    parser.add_argument("--qmax", type=Path, required=True, help="the ladder's qmax artifact")
    parser.add_argument(
        "--rate",
        type=float,
        action="append",
        required=True,
        metavar="RPS",
        help="Poisson arrival rate, requests/s; repeat for several runs, one after another",
    )
    parser.add_argument(
        "--duration-s",
        type=float,
        default=DEFAULT_DURATION_S,
        help="seconds of arrivals per rate (default: %(default)g)",
    )
    parser.add_argument(
        "--host",
        default=None,
        help="a server already bounded at Q_max (default: start one locally)",
    )
    parser.add_argument(
        "--endpoint", default=None, help="SageMaker endpoint (with --transport response-stream)"
    )
    parser.add_argument(
        "--variant", default=DEFAULT_VARIANT, help="production variant (default: %(default)s)"
    )
    parser.add_argument(
        "--region", default=None, help="AWS region (default: AWS_REGION or the profile's)"
    )
    parser.add_argument("--model", default="kokoro-82m", help="model id (default: %(default)s)")
    parser.add_argument(
        "--transport",
        default=Transport.LOCAL_HTTP.value,
        choices=[t.value for t in Transport],
        help="how requests reach the model (default: %(default)s)",
    )
    parser.add_argument(
        "--corpus", type=Path, default=None, help="utterance file (default: the shipped corpus)"
    )
    parser.add_argument("--contract", metavar=CONTRACT_METAVAR, help=CONTRACT_HELP)
    parser.add_argument(
        "--seed", type=int, default=DEFAULT_SEED, help="arrival schedule seed (default: 1)"
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=Path("measurements"),
        help="artifact directory (default: %(default)s)",
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from tts_bench.artifacts.files import load_artifact, usable_folder
    from tts_bench.artifacts.qmax import QmaxArtifact
    from tts_bench.measure.corpus import corpus_path, load_corpus
    from tts_bench.measure.surge.figures import check_schedules
    from tts_bench.measure.surge.run import (
        SurgeEndpoint,
        SurgeRequest,
        check_where,
        describe_run,
        measure_surge,
    )
    from tts_bench.measure.transport.contract import contract_of_ladder

    check_schedules(args.rate, args.duration_s, args.seed)  # every bound before anything is sent
    check_where(Transport(args.transport), args.host, args.endpoint is not None)
    qmax = load_artifact(args.qmax, QmaxArtifact)
    measured = qmax.fingerprint.contract if qmax.fingerprint else None
    contract = contract_of_ladder(args.contract, measured, str(args.qmax))
    corpus = corpus_path(args.corpus)
    request = SurgeRequest(
        qmax_path=args.qmax, qmax=qmax, rates_rps=args.rate, duration_s=args.duration_s,
        transport=Transport(args.transport), utterances=load_corpus(corpus), seed=args.seed,
        contract=contract,
    )  # fmt: skip
    usable_folder(args.out)  # before the run: a bad --out must not cost it
    endpoint = None
    if args.endpoint:
        from tts_bench.aws.session import AwsSession

        endpoint = SurgeEndpoint(
            AwsSession.from_environment(args.region), args.endpoint, args.variant, args.model
        )
    written = measure_surge(
        request, args.host, args.out, lambda line: print(f"surge: {line}", file=sys.stderr),
        endpoint=endpoint,
    )  # fmt: skip
    for surge_run in written.artifact.runs:
        print(describe_run(surge_run), file=sys.stderr)
    print(written.path)
    print(f"plot: {written.png}", file=sys.stderr)
    return 0
