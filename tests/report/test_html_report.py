"""`tts-bench report --html`: one page holding every artifact given, loading nothing, showing
every string read from an artifact as text; a bad argument is a one-line refusal."""

from __future__ import annotations

import base64
import re
import shutil
from pathlib import Path

import pytest

from tts_bench.cli import main

from .conftest import HOSTILE

SECTIONS = ("ladder", "ttotal", "plan", "surge", "simulation", "rehearsal", "provenance")


@pytest.fixture(scope="module")
def page(run_files: list[Path], tmp_path_factory) -> str:
    out = tmp_path_factory.mktemp("pngs")
    html = out / "run.html"
    assert main(["report", *map(str, run_files), "--out", str(out), "--html", str(html)]) == 0
    return html.read_text(encoding="utf-8")


def test_the_page_has_every_section_and_loads_nothing(page):
    for anchor in SECTIONS:
        assert f'<section id="{anchor}">' in page
    # Every source and link is a data URI or an anchor on the page; a policy forbids the rest.
    assert re.findall(r'\b(?:src|href)="(?!data:image/png;base64,|#)', page) == []
    assert "default-src 'none'; img-src data:" in page
    assert "<script" not in page.lower().replace("&lt;script", "")


def test_the_plots_are_embedded_pngs(page):
    images = re.findall(r'<img src="data:image/png;base64,([A-Za-z0-9+/=]+)"', page)
    # the ladder, T_total and surge drawn; the simulation's and the rehearsal's PNGs beside them
    assert len(images) == 5
    assert all(base64.b64decode(data).startswith(b"\x89PNG") for data in images)


def test_strings_from_artifacts_are_text(page):
    assert HOSTILE not in page
    assert "&lt;img src=x onerror=&quot;document.title=&#x27;pwned&#x27;&quot;&gt;" in page


def test_the_plan_shows_every_deployed_number_its_derivation_and_findings(page):
    plan = page[page.index('<section id="plan">') : page.index('<section id="surge">')]
    for shown in ("826.544", "743.89", "queue_max_depth", "ratio ×1.000 (by-definition)",
                  "λ_out = X(Q_max) · (1 − margin) / surge", "surge_survival",
                  "As <code>tts-bench plan</code> prints it", "Feasible: yes"):  # fmt: skip
        assert shown in plan, shown


def test_the_rehearsal_shows_its_runs_agreement_and_detection_lags(page):
    rehearsal = page[page.index('<section id="rehearsal">') : page.index('<section id="prov')]
    for shown in (
        "d6de5fd9cda1 (fleet rule)",  # the plan rehearsed
        "3 (0.3846 %)",  # the rehearsed run's sheds
        "2 (0.2564 %)",  # its replay's
        "4 of 4 minutes (100.0%)",  # desired counts against the primary replay
        "agrees with 90.0% of the replays",
        "mean 0.4100 %, sd 0.1200 %",  # the replays' shed shares
        "within 0.5100 % of the mean",
        "<td>burst</td><td>15 s</td><td>14 s</td><td>12 s</td>",  # detection lags
        "Rehearsal timelines",  # the PNG beside the artifact, embedded
    ):
        assert shown in rehearsal, shown
    assert rehearsal.count('class="ok">agrees<') == 2
    assert "scaled out before shedding</th><td>yes</td>" in rehearsal


def test_provenance_pairs_each_artifact_with_the_files_it_names(page):
    provenance = page[page.index('<section id="provenance">') :]
    assert provenance.count("yes: qmax-kokoro-82m-response-stream-g5xlarge-8b1b96bc.json") >= 3
    assert "not among these files" not in provenance.split("simulate-")[0]


def test_a_plan_without_its_sources_says_what_to_pass(run_files, tmp_path):
    (plan,) = [p for p in run_files if p.name.startswith("plan-")]
    html = tmp_path / "plan.html"
    assert main(["report", str(plan), "--html", str(html)]) == 0
    assert "pass them to `tts-bench report` too" in html.read_text()


@pytest.mark.parametrize(
    ("make", "expected"),
    [
        (lambda d: (d / "x.json", '{"artifact": "bogus"}'), "'bogus' is not a kind the report shows"),
        (lambda d: (d / "x.json", "[1, 2"), "x.json: not JSON"),
        (lambda d: (d / "x.json", b"\xff\xfe"), "not UTF-8 text"),
        (lambda d: (d / "missing.json", None), "missing.json: no such file"),
    ],
)  # fmt: skip
def test_a_bad_artifact_is_one_line_and_nothing_is_written(make, expected, tmp_path, capsys):
    path, content = make(tmp_path)
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif content is not None:
        path.write_text(content)
    html = tmp_path / "page.html"
    assert main(["report", str(path), "--html", str(html)]) == 2
    err = capsys.readouterr().err
    assert expected in err and len(err.strip().splitlines()) == 1 and not html.exists()


def test_the_page_never_replaces_an_artifact_or_a_folder(run_files, tmp_path, capsys):
    ttotal = next(p for p in run_files if p.name.startswith("ttotal-"))
    before = ttotal.read_bytes()
    assert main(["report", str(ttotal), "--html", str(ttotal), "--out", str(tmp_path)]) == 2
    assert "is one of the artifacts" in capsys.readouterr().err and ttotal.read_bytes() == before
    assert main(["report", str(ttotal), "--html", str(tmp_path), "--out", str(tmp_path)]) == 2
    assert "is a folder" in capsys.readouterr().err


def test_a_file_beside_that_is_no_png_is_named_not_embedded(run_files, tmp_path):
    simulation = next(p for p in run_files if p.name.startswith("simulate-"))
    copy = Path(shutil.copy(simulation, tmp_path / simulation.name))
    copy.with_suffix(".png").write_text("<svg onload=alert(1)>")
    html = tmp_path / "sim.html"
    assert main(["report", str(copy), "--html", str(html)]) == 0
    text = html.read_text()
    assert "is not a PNG" in text and "<img" not in text and "<svg" not in text


def test_without_html_the_report_plots_and_names_what_it_skipped(run_files, tmp_path, capsys):
    assert main(["report", *map(str, run_files), "--out", str(tmp_path)]) == 0
    out, err = capsys.readouterr()
    assert sorted(Path(line).suffix for line in out.split()) == [".png"] * 3
    assert err.count("nothing to plot, skipped") == 3  # plan, simulation, rehearsal
