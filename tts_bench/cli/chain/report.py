"""`tts-bench report ARTIFACT… [--html FILE]`: plots of a run's artifacts, and its report page.

Each plot (qmax: p95 TTFAB against concurrency; ttotal: its stages; surge: occupancy) is
written next to its artifact (`<artifact name without .json>.png`) or into `--out`. With
`--html FILE`, one self-contained page shows every artifact given (ladder, T_total, plan,
surge, simulation, rehearsal), their plots embedded, and the provenance of each file; it loads
nothing from the network.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "report",
        description=__doc__.splitlines()[0],
    )
    parser.add_argument(
        "artifacts",
        nargs="+",
        type=Path,
        metavar="ARTIFACT",
        help="qmax, ttotal, plan, surge, simulation or rehearsal JSON",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="directory for the PNGs (default: beside each artifact)",
    )
    parser.add_argument(
        "--html",
        type=Path,
        default=None,
        metavar="FILE",
        help="also write one self-contained HTML page of every artifact given",
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from tts_bench.errors import ArtifactError
    from tts_bench.report.build import PLOTTED_KINDS, write_report

    written = write_report(args.artifacts, args.html, args.out)
    for png in written.pngs:
        print(png)
    if written.page is not None:
        print(written.page)
        return 0
    for item in written.items:
        if item.kind not in PLOTTED_KINDS:
            print(
                f"report: {item.path} is a {item.kind} artifact: nothing to plot, skipped "
                "(--html FILE shows it)",
                file=sys.stderr,
            )
    if not written.pngs:
        raise ArtifactError(
            f"no {', '.join(sorted(PLOTTED_KINDS))} artifact among the arguments: nothing "
            "plotted (--html FILE writes a page of any artifact)"
        )
    return 0
