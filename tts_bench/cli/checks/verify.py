"""`tts-bench verify`: each artifact checked against what it was made from (`tts_bench.custody`)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from tts_bench.cli.project import project_root
from tts_bench.errors import TtsBenchError, printable

MEASUREMENTS = "measurements"


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "verify",
        description=(
            "A qmax against its raw samples and raw record, a ttotal against its events, a plan "
            "re-derived from the qmax and ttotal it names (found by sha256 beside it), a surge "
            "against its samples and ladder, a simulation against its inputs' hashes, a GPU "
            "summary against its two ladders. One line per file; exit 0 when every file "
            "checks, 1 otherwise. Without files: every *.json in the measurements folder of the "
            "project in the current folder (docs/artifacts.md)."
        ),
    )
    parser.add_argument("artifacts", nargs="*", type=Path, metavar="ARTIFACT")
    parser.add_argument("--json", action="store_true", help="one JSON object per file instead")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from tts_bench.custody.folder import ArtifactFolder

    paths = list(args.artifacts) or _project_artifacts()
    folders: dict[Path, ArtifactFolder] = {}
    failed = 0
    for path in paths:
        folder = folders.setdefault(path.parent, ArtifactFolder(path.parent))
        try:
            checked = folder.check(path)
        except TtsBenchError as exc:
            failed += 1
            _say(args.json, {"path": str(path), "ok": False, "reason": str(exc)}, f"FAIL {exc}")
            continue
        _say(
            args.json,
            {"path": str(path), "ok": True, "kind": checked.kind, "how": checked.how,
             "notes": list(checked.notes)},
            checked.line(),
        )  # fmt: skip
    print(
        f"tts-bench verify: {len(paths) - failed} of {len(paths)} checked"
        + (f"; {failed} failed" if failed else ""),
        file=sys.stderr,
    )
    return 1 if failed else 0


def _project_artifacts() -> list[Path]:
    folder = project_root() / MEASUREMENTS
    found = sorted(folder.glob("*.json"))
    if not found:
        raise TtsBenchError(f"no *.json in {folder}: name the artifacts to verify")
    return found


def _say(as_json: bool, record: dict[str, object], line: str) -> None:
    if as_json:
        print(printable(json.dumps(record, ensure_ascii=False)))
    else:
        print(printable(line))
