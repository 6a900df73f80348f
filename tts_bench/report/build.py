"""Reading a run's artifacts, drawing their plots and writing the report page.

`read_items` reads and validates every file before anything is drawn or written, so a broken
file costs nothing; `draw_plots` draws what `measure.plots` draws (ladder, T_total, surge) into
the PNG folder and takes any other artifact's plot from the PNG beside it (simulate and
rehearse write one); `render` builds the page and `write_page` writes it atomically.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from tts_bench.artifacts.files import (
    ARTIFACT_MODELS,
    load_artifact,
    parse_artifact_json,
    usable_file,
    usable_folder,
    write_atomically,
)
from tts_bench.artifacts.rehearsal import RehearsalArtifact
from tts_bench.artifacts.surge import SurgeArtifact
from tts_bench.errors import ArtifactError
from tts_bench.report.page import Html, esc, join, page, tag
from tts_bench.report.sections import SECTIONS, Item, part, provenance_section

KNOWN: dict[str, type[BaseModel]] = {
    **ARTIFACT_MODELS,
    "surge": SurgeArtifact,
    "rehearsal": RehearsalArtifact,
}
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
MAX_EMBEDDED_PNG_BYTES = 20 * 1024 * 1024


def _plotters() -> dict[str, Callable[[Any, Path], Path]]:
    from tts_bench.measure.plots import plot_qmax, plot_surge, plot_ttotal  # matplotlib: slow

    return {"qmax": plot_qmax, "ttotal": plot_ttotal, "surge": plot_surge}


PLOTTED_KINDS = frozenset({"qmax", "ttotal", "surge"})


def png_name(path: Path) -> str:
    return path.name.removesuffix(".json") + ".png"


def read_item(path: Path, anchor: str) -> Item:
    """One artifact file, validated by its kind's model; else a one-line error."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise ArtifactError(f"{path}: no such file") from None
    except OSError as exc:
        raise ArtifactError(f"{path}: cannot read: {exc.strerror or exc}") from None
    try:
        data = parse_artifact_json(raw.decode("utf-8"), path)
    except UnicodeDecodeError:
        raise ArtifactError(f"{path}: not UTF-8 text, so not an artifact") from None
    kind = data.get("artifact") if isinstance(data, dict) else None
    if kind not in KNOWN:
        raise ArtifactError(
            f"{path}: artifact: {kind!r} is not a kind the report shows ({', '.join(sorted(KNOWN))})"
        )
    artifact: Any = load_artifact(path, KNOWN[kind])  # type: ignore[type-var]
    return Item(path, str(kind), artifact, hashlib.sha256(raw).hexdigest(), anchor=anchor)


def read_items(paths: Sequence[Path]) -> list[Item]:
    """Every file read and checked (the same file given twice is shown once)."""
    seen: dict[Path, Path] = {}
    for path in paths:
        seen.setdefault(Path(os.path.abspath(path)), Path(path))
    return [read_item(path, f"file-{i + 1}") for i, path in enumerate(seen.values())]


def check_destinations(items: Sequence[Item], png_dir: Path | None, html: Path | None) -> None:
    """Every folder a PNG goes to, and the page's file, usable before anything is drawn."""
    for item in items:
        if item.kind in PLOTTED_KINDS:
            usable_folder(png_dir or item.path.parent)
    if html is None:
        return
    usable_file(html, "--html")
    if any(os.path.abspath(html) == os.path.abspath(item.path) for item in items):
        raise ArtifactError(f"--html {html}: is one of the artifacts; name another file")


def _beside(item: Item) -> Item:
    """The PNG the command that wrote this artifact left beside it, when there is one."""
    png = item.path.with_name(png_name(item.path))
    try:
        data = png.read_bytes()
    except OSError:
        return replace(item, png_note=f"no {png.name} beside the artifact")
    if not data.startswith(PNG_MAGIC):
        return replace(item, png_note=f"{png.name} beside the artifact is not a PNG")
    if len(data) > MAX_EMBEDDED_PNG_BYTES:
        return replace(item, png_note=f"{png.name} is too large to embed ({len(data):,} bytes)")
    return replace(item, png=data, png_note=f"{png.name}, found beside the artifact")


def draw_plots(items: Sequence[Item], png_dir: Path | None) -> tuple[list[Item], list[Path]]:
    """Each item with its plot: drawn (into `png_dir`, or beside the artifact) for the kinds
    `measure.plots` draws, found beside the artifact for the others. Also the PNGs drawn."""
    plotters = _plotters() if any(i.kind in PLOTTED_KINDS for i in items) else {}
    drawn, out = [], []
    for item in items:
        if item.kind in plotters:
            target = (png_dir or item.path.parent) / png_name(item.path)
            plotters[item.kind](item.artifact, target)
            drawn.append(target)
            out.append(replace(item, png=target.read_bytes(), png_note=f"drawn as {target.name}"))
        elif item.kind != "plan":
            out.append(_beside(item))
        else:
            out.append(item)
    return out, drawn


def render(items: Sequence[Item]) -> str:
    """The page: one section per kind present, in the chain's order, then provenance."""
    sections = []
    for anchor, title, kinds in SECTIONS:
        chosen = [item for item in items if item.kind in kinds]
        if chosen:
            sections.append((anchor, title, join(part(item, items) for item in chosen)))
    sections.append(("provenance", "Provenance and fingerprints", provenance_section(items)))
    files = tag(
        "ul",
        *(
            tag("li", Html(f'<a href="#{esc(item.anchor)}">{esc(item.path.name)}</a>'), f" ({item.kind})")
            for item in items
        ),
    )  # fmt: skip
    intro = join([tag("p", "Made from these files:"), files])
    return page("tts-bench run report", intro, sections)


def write_page(text: str, path: Path) -> Path:
    try:
        write_atomically(path, text.encode("utf-8"))
        path.chmod(0o644)  # a page to share: readable as any file written by hand
    except OSError as exc:
        raise ArtifactError(f"--html {path}: cannot write ({exc.strerror or exc})") from None
    return path


@dataclass(frozen=True, slots=True)
class Written:
    items: tuple[Item, ...]  # every artifact read, with its plot
    pngs: tuple[Path, ...]  # the plots drawn
    page: Path | None


def write_report(paths: Sequence[Path], html: Path | None, png_dir: Path | None = None) -> Written:
    """Read every artifact, draw the plots, and (with `html`) write the page: what `tts-bench
    report` and the main job do."""
    items = read_items(paths)
    check_destinations(items, png_dir, html)
    items, drawn = draw_plots(items, png_dir)
    written = None if html is None else write_page(render(items), html)
    return Written(tuple(items), tuple(drawn), written)
