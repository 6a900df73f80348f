"""`tts-bench report ARTIFACT…`: PNG plots of qmax and ttotal artifacts.

Each plot is written next to its artifact (`<artifact name without .json>.png`) or into
`--out`. Plan artifacts have no plot; they are named and skipped.
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
        "artifacts", nargs="+", type=Path, metavar="ARTIFACT", help="qmax or ttotal JSON"
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="directory for the PNGs (default: beside each artifact)",
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from tts_bench.artifacts.out_paths import usable_folder
    from tts_bench.artifacts.schema import QmaxArtifact, TtotalArtifact, load_any
    from tts_bench.errors import ArtifactError
    from tts_bench.measure.plots import plot_qmax, plot_ttotal

    loaded = [(path, load_any(path)) for path in args.artifacts]  # every file checked first
    for path, _ in loaded:  # and every folder a PNG goes to
        usable_folder(args.out or path.parent)
    written = 0
    for path, artifact in loaded:
        directory = args.out or path.parent
        target = directory / (path.name.removesuffix(".json") + ".png")
        if isinstance(artifact, QmaxArtifact):
            print(plot_qmax(artifact, target))
        elif isinstance(artifact, TtotalArtifact):
            print(plot_ttotal(artifact, target))
        else:
            print(f"report: {path} is a plan artifact: nothing to plot, skipped", file=sys.stderr)
            continue
        written += 1
    if not written:
        raise ArtifactError("no qmax or ttotal artifact among the arguments: nothing plotted")
    return 0
