"""Artifacts a later run left behind: they name, by sha256, a file that run replaced.

A run that writes `qmax-X.json` again replaces the ladder a plan, a T_total, a surge or a
simulation in the same folder was made from; that artifact no longer follows from anything
there (`tts-bench verify` refuses it), so the run removes it, with its raw data and plot, and
says so. Only what names a replaced file goes (and, in turn, what names that): nothing else in
the folder is touched.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from pathlib import Path

from tts_bench.artifacts.companions import beside, json_digests

Say = Callable[[str], None]


def named_digests(path: Path) -> set[str]:
    """The sha256s an artifact names: a plan's sources, a ladder a T_total or a surge was
    judged against, the files a simulation read."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return set()
    if not isinstance(data, dict):
        return set()
    inputs = data.get("inputs")
    entries = [
        *_values(data.get("sources")),
        *_values(inputs.get("files") if isinstance(inputs, dict) else None),
        {"sha256": data.get("qmax_sha256")},
    ]
    return {
        e["sha256"] for e in entries if isinstance(e, dict) and isinstance(e.get("sha256"), str)
    }


def _values(mapping: object) -> list[object]:
    return list(mapping.values()) if isinstance(mapping, dict) else []


def replaced(before: dict[Path, str], folder: Path) -> set[str]:
    """The sha256s of the files in `before` that `folder` no longer holds as they were."""
    now = json_digests(folder)
    return {digest for path, digest in before.items() if now.get(path) != digest}


def dependents(folder: Path, gone: Iterable[str]) -> list[Path]:
    """Every artifact in `folder` naming a sha256 in `gone`, and what names those in turn."""
    gone = set(gone)
    digests = json_digests(folder)
    found: list[Path] = []
    while True:
        new = [
            path
            for path, digest in digests.items()
            if path not in found and named_digests(path) & gone
        ]
        if not new:
            return found
        found += new
        gone |= {digests[path] for path in new}


def retire_replaced(before: dict[Path, str], folder: Path, say: Say) -> list[Path]:
    """Remove what names a file replaced since `before` (with its raw data and plot)."""
    stale = dependents(folder, replaced(before, folder))
    for path in stale:
        parts = [*beside(path), path.with_suffix(".png")]
        for part in parts:
            part.unlink(missing_ok=True)
        say(f"removed {path.name}: it was made from a file this run replaced")
    return stale
