"""`tts-bench local-cloud`: a SageMaker endpoint on this machine for the real AWS clients (SPEC §11).

Starts moto and the SageMaker runtime on loopback, deploys what the Pulumi program records for
the stack, and once the endpoint is InService prints the variables to export (stdout) and
writes them to `--env-file` (atomically, only then, mode 0600, in a folder no other user can
write: the file holds keys, and a shell will source it). Instance start-ups, fleet changes and
scaling decisions are shown as they happen (stderr). Ctrl-C or SIGTERM stops every process it
started and exits 0; the env file is removed then, since it points at nothing any more. Once
stopping has begun, further stop signals (`timeout` sends two) are ignored until it is done.
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


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "local-cloud",
        help="run a SageMaker endpoint on this machine (moto + real container processes)",
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


def handle(args: argparse.Namespace) -> int:
    from tts_bench.artifacts.atomic_file import write_atomically
    from tts_bench.infra.stack_config import stack_file
    from tts_bench.local_cloud import LocalCloudSettings, local_cloud
    from tts_bench.local_cloud.cloud import ENV_KEYS, check_settings
    from tts_bench.local_cloud.errors import LocalCloudError

    if args.env_file:
        _check_env_file(args.env_file)
    if args.program and not (args.program / "__main__.py").is_file():
        raise LocalCloudError(f"--program: {args.program} holds no Pulumi program (__main__.py)")
    try:
        server_args = tuple(shlex.split(args.server_args))
    except ValueError as exc:
        raise LocalCloudError(f"--server-args: {exc}") from None
    settings = LocalCloudSettings(
        stack=args.stack,
        instances=args.instances,
        provision_delay_s=args.provision_delay_s,
        server_args=server_args,
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
