"""`tts-bench local-cloud`: a SageMaker endpoint on this machine for the real AWS clients (SPEC §11).

Starts moto and the SageMaker runtime on loopback, deploys what the Pulumi program records for
the stack, and once the endpoint is InService prints the variables to export (stdout) and
writes them to `--env-file` (atomically, only then, mode 0600, in a folder no other user can
write: the file holds keys, and a shell will source it). Instance start-ups, fleet changes and
scaling decisions are shown as they happen (stderr). Ctrl-C or SIGTERM stops every process it
started and exits 0; the env file is removed then, since it points at nothing any more. Once
stopping has begun, further stop signals (`timeout` sends two) are ignored until it is done.
With `--container-cmd` each instance runs that command (any container keeping SageMaker's
contract, e.g. another vendor's stand-in) instead of `python -m tts_server`.
With `--instance-model curve` the instances are curve instances built from a ladder (`--qmax`),
many in this process, and `--time-scale` may compress the cloud's clocks (SPEC §13).
"""

from __future__ import annotations

import argparse
import os
import shlex
import signal
import sys
import threading
import time
from pathlib import Path
from types import FrameType

from tts_bench.aws.clock import CLOUDWATCH_DELAY_S
from tts_bench.cli.aws_options import add_semantics_option


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "local-cloud",
        description="Start moto and the SageMaker runtime on loopback, deploy the stack's "
        "recorded resources, and print the AWS_* variables that point boto3 at them.",
    )
    parser.add_argument("--stack", default="dev", help="stack config to deploy (default dev)")
    parser.add_argument(
        "--instances", type=int, help="initial instance count (default: the stack's)"
    )
    parser.add_argument("--env-file", type=Path, help="write KEY=VALUE lines here once InService")
    parser.add_argument(
        "--provision-delay-s",
        type=float,
        default=0.0,
        help="emulated EC2 provisioning + image pull before each instance starts (default 0)",
    )
    parser.add_argument(
        "--program", type=Path, help="the Pulumi program folder (default: this checkout)"
    )
    parser.add_argument(
        "--server-args",
        default="",
        help="extra `python -m tts_server` flags for every instance, e.g. '--backend onnx'",
    )
    parser.add_argument(
        "--container-cmd",
        metavar="COMMAND",
        help="run this command per instance instead of `python -m tts_server`: any container "
        "keeping SageMaker's contract (GET /ping, POST /invocations); its port is in "
        "SAGEMAKER_BIND_TO_PORT and replaces {port} in the command",
    )
    curve = parser.add_argument_group("curve instances (service times from a measured ladder)")
    curve.add_argument(
        "--instance-model",
        choices=("process", "curve"),
        default="process",
        help="process: real `python -m tts_server` processes (default); curve: the ladder's "
        "service curve, no synthesis, 50 and more on 2 cores",
    )
    curve.add_argument("--qmax", type=Path, help="the ladder curve instances serve by (curve)")
    curve.add_argument(
        "--plan", type=Path, help="the plan whose scaling to deploy (curve; default: none)"
    )
    curve.add_argument(
        "--ttotal", type=Path, help="the start-up stages (curve; default: the plan's ttotal)"
    )
    curve.add_argument(
        "--rate-scale",
        type=float,
        default=1.0,
        help="divide every X(n) by S and multiply service times by S (curve; default 1)",
    )
    curve.add_argument("--seed", type=int, help="the curve instances' random streams (curve)")
    curve.add_argument(
        "--time-scale",
        type=float,
        default=1.0,
        help="run metric periods, alarms, cooldowns and start-ups K times faster; timestamps "
        "become virtual (curve; default 1)",
    )
    parser.add_argument(
        "--cloudwatch-delay-s",
        type=float,
        default=CLOUDWATCH_DELAY_S,
        help="seconds from a 10 s window's end until its datapoint is readable and alarms see "
        f"it (default {CLOUDWATCH_DELAY_S:g}: an assumption, see docs/rehearsal.md)",
    )
    parser.add_argument(
        "--max-instances", type=int, help="the operator's maxInstances (default: the stack's)"
    )
    parser.add_argument(
        "--min-instances", type=int, help="the operator's minInstances (default: the stack's)"
    )
    add_semantics_option(parser)
    parser.set_defaults(handler=handle)


def _stop_once(signum: int, frame: FrameType | None) -> None:
    """The first stop signal interrupts; the ones after it must not cut the cleanup short."""
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_IGN)
    raise KeyboardInterrupt


def _check_env_file(path: Path) -> None:
    from tts_bench.local_cloud.errors import LocalCloudError
    from tts_bench.local_cloud.private_files import check_private_folder

    folder = path.resolve().parent
    if not folder.is_dir():
        raise LocalCloudError(f"--env-file: no folder {folder}")
    check_private_folder(folder, "--env-file")
    if path.is_symlink() or (path.exists() and not path.is_file()):
        raise LocalCloudError(f"--env-file: {path} exists and is not a plain file")
    if path.exists() and path.stat().st_uid != os.geteuid():
        raise LocalCloudError(f"--env-file: {path} belongs to another user")


_CURVE_ONLY = ("qmax", "plan", "ttotal", "seed")


def _curve(args: argparse.Namespace, curve_type: type, error: type[Exception]) -> object:
    """The curve settings from the flags, or None for process instances; one line when a flag
    does not fit the instance model."""
    if args.instance_model == "process":
        given = [f"--{n}" for n in _CURVE_ONLY if getattr(args, n) is not None]
        given += ["--rate-scale"] if args.rate_scale != 1.0 else []
        if given:
            raise error(f"{', '.join(given)}: for curve instances; add --instance-model curve")
        return None
    if args.qmax is None:
        raise error("--instance-model curve needs --qmax: the ladder its instances serve by")
    if args.server_args:
        raise error("--server-args: curve instances run no server process")
    for flag in ("qmax", "plan", "ttotal"):
        path = getattr(args, flag)
        if path is not None and not path.is_file():
            raise error(f"--{flag}: no file {path}")
    return curve_type(
        qmax=args.qmax,
        ttotal=args.ttotal,
        plan=args.plan,
        rate_scale=args.rate_scale,
        seed=args.seed,
    )


def handle(args: argparse.Namespace) -> int:
    from tts_bench.artifacts.files import write_atomically
    from tts_bench.infra.stack_config import stack_file
    from tts_bench.local_cloud import LocalCloudSettings, local_cloud
    from tts_bench.local_cloud.cloud import ENV_KEYS, check_settings
    from tts_bench.local_cloud.errors import LocalCloudError
    from tts_bench.local_cloud.settings import CurveInstances

    if args.env_file:
        _check_env_file(args.env_file)
    if args.program and not (args.program / "__main__.py").is_file():
        raise LocalCloudError(f"--program: {args.program} holds no Pulumi program (__main__.py)")
    try:
        server_args = tuple(shlex.split(args.server_args))
    except ValueError as exc:
        raise LocalCloudError(f"--server-args: {exc}") from None
    bounds = {"maxInstances": args.max_instances, "minInstances": args.min_instances}
    for flag, value in bounds.items():
        if value is not None and value < 1:
            raise LocalCloudError(f"--{flag[:3]}-instances must be at least 1")
    low, high = args.min_instances, args.max_instances
    if low is not None and high is not None and low > high:
        raise LocalCloudError("--min-instances must not be above --max-instances")
    settings = LocalCloudSettings(
        stack=args.stack,
        instances=args.instances,
        provision_delay_s=args.provision_delay_s,
        server_args=server_args,
        container_cmd=args.container_cmd,
        curve=_curve(args, CurveInstances, LocalCloudError),
        time_scale=args.time_scale,
        cloudwatch_delay_s=args.cloudwatch_delay_s,
        stack_overrides={k: v for k, v in bounds.items() if v is not None},
        aws_semantics=args.aws_semantics,
        **({"program_dir": args.program.resolve()} if args.program else {}),
    )
    check_settings(settings)
    if not stack_file(settings.program_dir, settings.stack).is_file():
        raise LocalCloudError(
            f"--stack: no {stack_file(settings.program_dir, settings.stack).name} in "
            f"{settings.program_dir}"
        )
    started = time.time()

    def say(message: str) -> None:
        print(f"[{time.time() - started:7.1f} s] {message}", file=sys.stderr, flush=True)

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, _stop_once)
    written: Path | None = None
    try:
        with local_cloud(settings, say=say) as cloud:
            lines = [f"{key}={cloud.env[key]}" for key in ENV_KEYS if key in cloud.env]
            if args.env_file:
                written = args.env_file  # before writing: a signal mid-write still removes it
                try:
                    write_atomically(written, ("\n".join(lines) + "\n").encode())
                except OSError as exc:
                    raise LocalCloudError(f"--env-file: cannot write {written}: {exc}") from None
                say(f"wrote {written} (mode 0600)")
            print("\n".join(f"export {line}" for line in lines), flush=True)
            say("running; Ctrl-C stops it")
            threading.Event().wait()
    except KeyboardInterrupt:
        say("stopped")
    finally:
        if written is not None:
            written.unlink(missing_ok=True)
    return 0
