"""The report page as a browser shows it: every section laid out, every image decoded, no
string from an artifact run as script (headless Chromium, one per session)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tts_bench.cli import main

pytestmark = pytest.mark.slow

SECTIONS = ["ladder", "ttotal", "plan", "surge", "simulation", "rehearsal", "provenance"]


def test_the_page_renders_with_every_section_and_image(run_files, browser_page, tmp_path):
    html = tmp_path / "run.html"
    assert main(["report", *map(str, run_files), "--out", str(tmp_path), "--html", str(html)]) == 0
    browser_page.goto(html.as_uri())
    seen = browser_page.evaluate(
        """(() => ({
            sections: [...document.querySelectorAll('section')].map(s => s.id),
            heights: [...document.querySelectorAll('section')].map(s => s.offsetHeight),
            images: [...document.images].map(i => [i.complete, i.naturalWidth, i.offsetWidth]),
            title: document.title,
            scripts: document.scripts.length,
            toc: [...document.querySelectorAll('nav a')].map(a => a.getAttribute('href')),
        }))()"""
    )
    assert seen["sections"] == SECTIONS
    assert all(h > 100 for h in seen["heights"]), seen["heights"]
    assert len(seen["images"]) == 5
    assert all(done and natural >= 800 and shown > 300 for done, natural, shown in seen["images"])
    assert seen["title"] == "tts-bench run report" and seen["scripts"] == 0
    assert seen["toc"] == [f"#{s}" for s in SECTIONS]
    shot = browser_page.screenshot(tmp_path / "report.png")
    assert shot.read_bytes().startswith(b"\x89PNG") and shot.stat().st_size > 100_000
    # Keep the screenshot beside the page for a person to look at (pytest's basetemp).
    (tmp_path / "seen.json").write_text(json.dumps(seen["heights"]))
    assert Path(shot).is_file()
