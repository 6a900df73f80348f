"""`tts-bench ttotal`: T_total, on a SageMaker endpoint (`--endpoint`) or beside a local server.

`--endpoint NAME --qmax PATH`: SPEC §4 step 4. A free instance quota first; under the freeze a
probe holds load, one more instance is forced (UpdateEndpointWeightsAndCapacities, bypassing
the policies), each stage is timed from its own source until the probe recovers, and the
capacity is restored. `--trigger organic --plan P`: nothing is frozen; an open-loop probe steps
past the deployed plan's scale-out level and the policy scales out by itself, its detection
timed stage by stage (load crossed, first datapoint over the target, alarm, scaling activity,
desired set) before the same stages through recovered (SPEC §13). `--local --qmax PATH --host
URL`: a fresh local server process beside the loaded one; it must report the same build as the
ladder's artifact, or nothing is written. `--contract` is the ladder's endpoint contract (the
probe builds its requests and reads its events by it); another than the ladder's is refused.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from tts_bench.cli.server_options import serve_flags
from tts_bench.deployment import DEFAULT_POLICY_LAG_BOUND_S, DEFAULT_VARIANT
from tts_bench.measure.transport.contract import CONTRACT_HELP, CONTRACT_METAVAR
from tts_bench.measure.ttotal import sagemaker as live
from tts_bench.measure.ttotal.local import DEFAULT_PROBE_CONCURRENCY
from tts_bench.measure.ttotal.organic import DEFAULT_LOAD_FACTOR

if TYPE_CHECKING:
    from tts_bench.artifacts.ttotal import TtotalArtifact


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "ttotal",
        description=__doc__.splitlines()[0],
    )
    parser.add_argument("--qmax", type=Path, required=True, help="the ladder's qmax artifact")
    where = parser.add_argument_group("on a SageMaker endpoint")
    where.add_argument("--endpoint", metavar="NAME", help="SageMaker endpoint name")
    add_organic_flags(where)
    where.add_argument("--variant", default=DEFAULT_VARIANT, help="production variant")
    where.add_argument("--region", help="AWS region (default: AWS_REGION or the profile's)")
    where.add_argument("--model", default="kokoro-82m", help="model id (default: %(default)s)")
    where.add_argument(
        "--bound-rung",
        type=int,
        default=live.DEFAULT_BOUND_RUNG,
        help="the ladder rung whose p95 TTFAB bounds recovery (default: %(default)s)",
    )
    where.add_argument(
        "--recovery-factor",
        type=float,
        default=live.DEFAULT_RECOVERY_FACTOR,
        help="recovered within this multiple of that p95 (default: %(default)g)",
    )
    where.add_argument(
        "--recovery-hold-s",
        type=float,
        default=live.DEFAULT_RECOVERY_HOLD_S,
        help="and held there this long (default: %(default)g)",
    )
    where.add_argument(
        "--warmup-s",
        type=float,
        default=live.DEFAULT_WARMUP_S,
        help="probe load before the forced count, recorded, not counted (default: %(default)g)",
    )
    where.add_argument(
        "--timeout-s",
        type=float,
        default=live.DEFAULT_TIMEOUT_S,
        help="give up this long after desired_set (default: %(default)g)",
    )
    where.add_argument(
        "--allow-config-mismatch",
        action="store_true",
        help="warn instead of refusing when the endpoint is not the ladder's build",
    )
    local = parser.add_argument_group("beside a local server (--local)")
    local.add_argument("--local", action="store_true", help="a fresh local server process")
    local.add_argument(
        "--host", help="the running server the probe loads, e.g. http://127.0.0.1:8080"
    )
    local.add_argument("--backend", choices=["onnx", "torch"], help="fresh server's --backend")
    local.add_argument("--model-dir", type=Path, help="fresh server's --model-dir")
    local.add_argument("--serial", action="store_true", help="fresh server's --serial")
    parser.add_argument(
        "--probe-concurrency",
        type=int,
        default=None,
        help=f"closed-loop probe users (default: {live.DEFAULT_PROBE_CONCURRENCY} on an "
        f"endpoint, {DEFAULT_PROBE_CONCURRENCY} locally)",
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
    parser.add_argument("--contract", metavar=CONTRACT_METAVAR, help=CONTRACT_HELP)
    parser.add_argument("--out", type=Path, default=Path("measurements"), help="artifact directory")
    parser.set_defaults(handler=run)


def add_organic_flags(group: argparse._ArgumentGroup) -> None:
    group.add_argument(
        "--trigger",
        choices=("force-desired", "organic"),
        default="force-desired",
        help="force-desired: one more instance forced, the policy bypassed (default); organic: "
        "the deployed policy scales out on the probe's own load (needs --plan)",
    )
    group.add_argument("--plan", type=Path, help="organic: the plan deployed on the endpoint")
    group.add_argument(
        "--load-factor",
        type=float,
        default=DEFAULT_LOAD_FACTOR,
        help="organic: the probe's load over the plan's scale-out level (default: %(default)g)",
    )


def print_result(artifact: TtotalArtifact, path: Path) -> None:
    for stage in artifact.stages:
        counted = "" if stage.counted else "  (not counted)"
        print(f"  {stage.name:<44} {stage.seconds:8.3f} s{counted}")
    print(
        f"T_total {artifact.measured_total_s:.1f} s measured + {artifact.policy_lag_bound_s:g} s "
        f"policy lag bound = {artifact.planned_total_s:.1f} s planned"
    )
    if (found := artifact.detection) is not None:
        tracking = found.policy_role.endswith("-target")
        use = (
            "plan uses it for a plan of this deploy shape"
            if tracking
            else "not target tracking's: plan keeps the bound for target tracking's lag"
        )
        print(
            f"detection lag {found.lag_s:.1f} s measured ({found.policy_role}: {found.alarm}; "
            f"modelled {found.modelled_s:g} s); {use}"
        )
    print(path)


def run(args: argparse.Namespace) -> int:
    from tts_bench.artifacts.files import usable_folder
    from tts_bench.errors import RefusalError
    from tts_bench.measure.ladder.schedule import MAX_PHASE_S

    if args.probe_concurrency is not None and args.probe_concurrency < 1:
        raise RefusalError("--probe-concurrency must be at least 1")
    if not 0 <= args.policy_lag_s <= MAX_PHASE_S:
        raise RefusalError(f"--policy-lag-s {args.policy_lag_s:g}: give 0 to {MAX_PHASE_S:g} s")
    usable_folder(args.out)  # before the measurement: a bad --out must not cost it
    if args.local and args.endpoint:
        raise RefusalError("pass either --local (a fresh local server) or --endpoint, not both")
    if args.trigger == "organic":
        if args.local or not args.endpoint or args.plan is None:
            raise RefusalError(
                "--trigger organic needs --endpoint NAME and --plan P (the plan deployed there): "
                "a policy scales the endpoint, so there is none locally"
            )
        return run_organic(args)
    if args.plan is not None:
        raise RefusalError("--plan is for --trigger organic; force-desired bypasses the policy")
    if args.endpoint:
        return run_on_endpoint(args)
    if not args.local:
        raise RefusalError(
            "say where: --endpoint NAME (force one more instance on SageMaker) or --local "
            "(a fresh local server process)"
        )
    return run_local(args)


def run_on_endpoint(args: argparse.Namespace) -> int:
    from tts_bench.artifacts.files import write_artifact
    from tts_bench.artifacts.fingerprint import ttotal_filename
    from tts_bench.artifacts.ttotal import Trigger
    from tts_bench.aws.session import AwsSession
    from tts_bench.measure.corpus import corpus_path, load_corpus
    from tts_bench.measure.transport.contract import contract_of_ladder

    _, fingerprint = live.sagemaker_qmax(args.qmax)  # a wrong ladder: refused before AWS
    contract = contract_of_ladder(args.contract, fingerprint.contract, str(args.qmax))
    corpus = load_corpus(corpus_path(args.corpus))
    request = live.SageMakerTtotalRequest(
        qmax_path=args.qmax, endpoint=args.endpoint, variant=args.variant, model=args.model,
        utterances=corpus,
        probe_concurrency=args.probe_concurrency or live.DEFAULT_PROBE_CONCURRENCY,
        bound_rung=args.bound_rung, recovery_factor=args.recovery_factor,
        recovery_hold_s=args.recovery_hold_s, warmup_s=args.warmup_s, timeout_s=args.timeout_s,
        policy_lag_bound_s=args.policy_lag_s, allow_config_mismatch=args.allow_config_mismatch,
        contract=contract,
    )  # fmt: skip
    session = AwsSession.from_environment(args.region)
    artifact = live.measure_sagemaker_ttotal(
        session, request, lambda line: print(f"ttotal: {line}", file=sys.stderr, flush=True)
    )
    name = ttotal_filename(fingerprint, Trigger.FORCE_DESIRED.value, artifact.provenance.kind)
    path = write_artifact(artifact, args.out, name)
    print_result(artifact, path)
    print(f"next: tts-bench plan --qmax {args.qmax} --ttotal {path} --peak-rps R", file=sys.stderr)
    return 0


def run_organic(args: argparse.Namespace) -> int:
    from tts_bench.artifacts.files import write_artifact
    from tts_bench.artifacts.fingerprint import ttotal_filename
    from tts_bench.artifacts.ttotal import Trigger
    from tts_bench.aws.session import AwsSession
    from tts_bench.measure.corpus import corpus_path, load_corpus
    from tts_bench.measure.transport.contract import contract_of_ladder
    from tts_bench.measure.ttotal.organic import OrganicTtotalRequest, measure_organic_ttotal

    _, fingerprint = live.sagemaker_qmax(args.qmax)  # a wrong ladder: refused before AWS
    contract = contract_of_ladder(args.contract, fingerprint.contract, str(args.qmax))
    request = OrganicTtotalRequest(
        qmax_path=args.qmax, plan_path=args.plan, endpoint=args.endpoint, variant=args.variant,
        model=args.model, utterances=load_corpus(corpus_path(args.corpus)),
        load_factor=args.load_factor, bound_rung=args.bound_rung,
        recovery_factor=args.recovery_factor, recovery_hold_s=args.recovery_hold_s,
        warmup_s=args.warmup_s, timeout_s=args.timeout_s, policy_lag_bound_s=args.policy_lag_s,
        allow_config_mismatch=args.allow_config_mismatch, contract=contract,
    )  # fmt: skip
    session = AwsSession.from_environment(args.region)
    artifact = measure_organic_ttotal(
        session, request, lambda line: print(f"ttotal: {line}", file=sys.stderr, flush=True)
    )
    name = ttotal_filename(fingerprint, Trigger.ORGANIC.value, artifact.provenance.kind)
    path = write_artifact(artifact, args.out, name)
    print_result(artifact, path)
    print(
        f"next: tts-bench plan --qmax {args.qmax} --ttotal {path} --peak-rps R (the measured lag "
        "applies to a plan of this deploy shape)",
        file=sys.stderr,
    )
    return 0


def run_local(args: argparse.Namespace) -> int:
    from tts_bench.artifacts.files import write_artifact
    from tts_bench.artifacts.fingerprint import ttotal_filename
    from tts_bench.artifacts.ttotal import Trigger
    from tts_bench.errors import RefusalError
    from tts_bench.measure.corpus import corpus_path, load_corpus
    from tts_bench.measure.ttotal.local import LocalTtotalRequest, local_qmax, measure_local_ttotal

    local_qmax(args.qmax)
    if args.contract not in (None, "", "kokoro"):
        raise RefusalError(
            f"--contract {args.contract} --local: a fresh `python -m tts_server` is Kokoro's "
            "contract; measure another container's T_total on an endpoint (a local cloud can "
            "host it: local-cloud --container-cmd)"
        )
    if not args.host:
        raise RefusalError("--local needs --host: the running server the ladder measured")
    corpus = load_corpus(corpus_path(args.corpus))
    request = LocalTtotalRequest(
        qmax_path=args.qmax, host=args.host, utterances=corpus, server_args=serve_flags(args),
        probe_concurrency=args.probe_concurrency or DEFAULT_PROBE_CONCURRENCY,
        policy_lag_bound_s=args.policy_lag_s,
    )  # fmt: skip
    artifact = measure_local_ttotal(
        request, lambda line: print(f"ttotal: {line}", file=sys.stderr, flush=True)
    )
    path = write_artifact(
        artifact, args.out, ttotal_filename(artifact.fingerprint, Trigger.LOCAL_PROCESS.value)
    )
    print_result(artifact, path)
    print(f"next: tts-bench plan --qmax {args.qmax} --ttotal {path} --peak-rps R", file=sys.stderr)
    return 0
