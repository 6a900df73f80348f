"""`tts-bench thaw`: restore an endpoint variant's scaling after an interrupted measurement."""

from __future__ import annotations

import argparse

from tts_bench.cli.aws_options import add_endpoint_options


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "thaw",
        description="Restore the scaling state recorded when a run froze the variant (local "
        "record under $TTS_BENCH_STATE_DIR, default ~/.local/state/tts-bench/freeze). With no "
        "record, un-suspend all scaling and leave min/max as they are. Safe to run twice; "
        "exit 0 when scaling is no longer suspended.",
    )
    add_endpoint_options(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from tts_bench.aws.freeze import thaw
    from tts_bench.aws.session import AwsSession
    from tts_bench.deployment import resource_id

    session = AwsSession.from_environment(args.region)
    result = thaw(session, args.endpoint, args.variant)
    rid = resource_id(args.endpoint, args.variant)
    if result.suspended_after is None:
        print(f"thaw: {rid} has no scalable target; nothing is suspended")
        return 0
    state = f"min {result.min_capacity}, max {result.max_capacity}"
    if not result.suspended:
        how = "restored from its freeze record" if result.record else "no freeze record"
        print(f"thaw: scaling of {rid} not suspended ({how}); {state}")
        return 0
    if result.record is not None and result.record.suspended == result.suspended_after:
        # The recorded prior state was itself suspended: restoring it is what thaw promises.
        print(
            f"thaw: {rid} restored to its state before the freeze, which had "
            f"{result.suspended_after.describe()} suspended; {state}"
        )
        return 0
    print(f"thaw: {rid} still has {result.suspended_after.describe()} suspended; {state}")
    return 1
