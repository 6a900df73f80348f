"""`tts-bench image push`: build and push the container, pin the stack config to its digest."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("image")
    actions = parser.add_subparsers(dest="image_command", metavar="ACTION", required=True)
    push = actions.add_parser(
        "push",
        help="docker buildx build --push to the stack's ECR repository; record the digest",
        description=(
            "Builds the container with docker buildx, pushes it to the ECR repository named by the "
            "stack's `image` config, and writes <repository>@sha256:<digest> back into "
            "Pulumi.<stack>.yaml. Needs Docker with buildx and a docker login to the registry."
        ),
    )
    push.add_argument("--stack", default="dev")
    push.add_argument("--program", type=Path, default=Path("."), help="the Pulumi project folder")
    push.add_argument(
        "--context", type=Path, default=None, help="build context (default: the project)"
    )
    push.add_argument(
        "--file", type=Path, default=None, help="Dockerfile (default container/Dockerfile)"
    )
    push.add_argument("--tag", default=None, help="image tag (default <git sha>-<UTC time>)")
    push.add_argument("--platform", default=None, help="target platform (default linux/amd64)")
    push.set_defaults(handler=run_push)


def run_push(args: argparse.Namespace) -> int:
    from tts_bench.infra.image_push import DEFAULT_PLATFORM, PushRequest, default_tag, push_image

    program = args.program.resolve()
    context = (args.context or program).resolve()
    request = PushRequest(
        program_dir=program,
        stack=args.stack,
        context=context,
        dockerfile=(args.file or program / "container" / "Dockerfile").resolve(),
        tag=args.tag or default_tag(context),
        platform=args.platform or DEFAULT_PLATFORM,
    )
    image = push_image(request)
    print(image.reference)
    print(
        f"image push: Pulumi.{args.stack}.yaml now pins {image.digest}; no plan matches a new image "
        "until it is measured: run the ladder and `tts-bench plan`, then `tts-bench preview`",
        file=sys.stderr,
    )
    return 0
