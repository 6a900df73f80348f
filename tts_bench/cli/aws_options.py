"""Options shared by the subcommands that read or change a deployed endpoint (not a subcommand)."""

from __future__ import annotations

import argparse

from pydantic import ValidationError

from tts_bench.deployment import DEFAULT_VARIANT, OperatorBounds
from tts_bench.planning.aws.semantics import NAMED, AwsSemantics


def add_endpoint_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--endpoint", required=True, metavar="NAME", help="SageMaker endpoint name")
    parser.add_argument(
        "--variant",
        default=DEFAULT_VARIANT,
        metavar="NAME",
        help=f"production variant (default {DEFAULT_VARIANT})",
    )
    parser.add_argument(
        "--region",
        metavar="REGION",
        help="AWS region (default: AWS_REGION, AWS_DEFAULT_REGION or the profile's)",
    )


def bounds(text: str) -> OperatorBounds:
    """`--bounds MIN:MAX`, the stack's operator bounds."""
    try:
        return OperatorBounds.parse(text)
    except ValidationError as exc:
        message = exc.errors()[0]["msg"].removeprefix("Value error, ")
        raise argparse.ArgumentTypeError(message) from None
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_bounds_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--bounds",
        type=bounds,
        metavar="MIN:MAX",
        help="the stack's operator bounds (minInstances:maxInstances); the plan's min/max are "
        "compared after clamping into them, as the stack deploys them",
    )


def aws_semantics(text: str) -> AwsSemantics:
    """`--aws-semantics NAME|FILE`: a named variant set, or a JSON file of one."""
    from pathlib import Path

    from tts_bench.planning.aws.semantics import (
        SemanticsError,
        semantics_from_json,
        semantics_named,
    )

    try:
        if text in NAMED:
            return semantics_named(text)
        path = Path(text)
        if not path.is_file():
            raise SemanticsError(
                f"{text!r} is neither a variant set ({', '.join(NAMED)}) nor a readable file"
            )
        try:
            body = path.read_text(encoding="utf-8-sig")
        except (OSError, UnicodeDecodeError) as exc:
            raise SemanticsError(f"{path}: cannot be read ({exc})") from None
        return semantics_from_json(body, str(path))
    except SemanticsError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_semantics_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--aws-semantics",
        type=aws_semantics,
        default=NAMED["documented"],
        metavar="NAME|FILE",
        help="how AWS behaves where its documentation leaves it open: documented (default), "
        "pessimistic, or a JSON file of the same fields (docs/aws-semantics.md)",
    )
