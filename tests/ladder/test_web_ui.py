"""Locust's web UI drives the ladder: every ladder flag in its start form with its help, the host
chosen there and checked when the test starts (a refusal is the form's one-line error), the
Ladder tab live, and the artifact a headless run writes (headless Chromium; the server is a
serial curve instance, `--curve-check` on, as the session's headless `curve_ladder` measured)."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tts_bench.artifacts.files import load_artifact
from tts_bench.artifacts.fingerprint import Transport, qmax_filename
from tts_bench.artifacts.qmax import QmaxArtifact
from tts_bench.measure.ladder.conductor import CURVE_CHECK_NOTE
from tts_bench.measure.ladder.flags import LADDER_FLAGS
from tts_bench.serving.server_ping import fetch_ping

from .conftest import CORPORA, CURVE_FIRST_CHUNK_MS, CURVE_RATE_RPS, LOCUSTFILE

pytestmark = pytest.mark.slow

# Set a React-managed field as typing would: the native setter, then the events React hears.
FILL = """((values) => {
  for (const [name, value] of Object.entries(values)) {
    const field = document.querySelector(`[name="${name}"]`);
    const proto = field.tagName === 'SELECT' ? HTMLSelectElement : HTMLInputElement;
    Object.getOwnPropertyDescriptor(proto.prototype, 'value').set.call(field, value);
    field.dispatchEvent(new Event('input', {bubbles: true}));
    field.dispatchEvent(new Event('change', {bubbles: true}));
  }
  document.querySelector('button[type=submit]').click();
  return true;
})"""
LADDER_ROWS = """[...document.querySelectorAll('table tbody tr')].map(r => r.innerText)"""


def field_name(flag: str) -> str:
    """The start form's field for a flag: Locust names it in camelCase (`--hold-s`: holdS)."""
    return re.sub(r"_(\w)", lambda m: m.group(1).upper(), flag.removeprefix("--").replace("-", "_"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def web_ui(child_env, tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """`locust -f loadtest/qmax.py` with its web UI and no host: its URL and artifact folder."""
    out, port = tmp_path / "out", free_port()
    log = (tmp_path / "locust.log").open("w")
    locust = subprocess.Popen(
        [sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--web-host", "127.0.0.1",
         "--web-port", str(port), "--out", str(out)],
        stdout=log, stderr=subprocess.STDOUT, env=child_env, cwd=tmp_path,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}/"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert locust.poll() is None, (tmp_path / "locust.log").read_text()
            try:
                urllib.request.urlopen(url, timeout=2).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "Locust's web UI did not come up"
                time.sleep(0.2)
        yield url, out
    finally:
        locust.terminate()
        locust.wait(timeout=30)
        log.close()


@pytest.fixture
def curve_url() -> Iterator[str]:
    """A serial curve instance like the headless ladder's: the same fingerprint."""
    from tts_bench.local_cloud.instances.serial_curve import serial_curve

    with serial_curve(CURVE_RATE_RPS, CURVE_FIRST_CHUNK_MS, seed=11) as url:
        yield url


def test_the_ui_runs_the_ladder_and_writes_the_headless_artifact(
    web_ui, browser_page, curve_url: str, curve_ladder: Path, tmp_path: Path
) -> None:
    url, out = web_ui
    page = browser_page
    page.goto(url)
    page.wait_for("!!document.querySelector('[name=host]')")

    # Every ladder flag is in the start form, with its help beside it.
    shown = page.evaluate("document.body.innerText")
    for flag, keywords in LADDER_FLAGS:
        assert page.evaluate(f"!!document.querySelector('[name={field_name(flag)}]')"), flag
        assert keywords["help"] in shown, flag

    # A host nothing answers on, then a flag out of order: each the form's one-line error.
    for values, expected in (
        ({"host": f"http://127.0.0.1:{free_port()}"}, "cannot reach the server"),
        ({"host": curve_url, "rungs": "4,2"}, "--rungs '4,2': concurrencies must be"),
    ):
        page.evaluate(f"{FILL}({json.dumps(values)})")
        error = page.wait_for(
            "[...document.querySelectorAll('.MuiAlert-message')].map(a => a.innerText)"
            f".find(t => t.includes({json.dumps(expected)}))"
        )
        assert error.startswith("refused: ") and "\n" not in error.strip(), error
    assert not out.exists() or not list(out.iterdir())  # nothing ran

    # The server chosen in the form: one short rung, then the Ladder tab, live, then judged.
    settings = {
        "host": curve_url, "rungs": "1", "holdS": "8", "measureS": "5", "idleS": "0",
        "sloMs": "60000", "corpus": str(CORPORA / "short.txt"), "curveCheck": "on",
    }  # fmt: skip
    page.evaluate(f"{FILL}({json.dumps(settings)})")
    page.wait_for(
        "[...document.querySelectorAll('[role=tab]')].some(t => /ladder/i.test(t.innerText))"
    )
    page.evaluate("[...document.querySelectorAll('[role=tab]')].find(t => /ladder/i.test(t.innerText)).click()")  # fmt: skip
    live = page.wait_for(f"{LADDER_ROWS}.find(r => /window opens|measuring/.test(r))", 30)
    judged = page.wait_for(f"{LADDER_ROWS}.find(r => /passes|fails|unusable/.test(r))", 90)
    assert live.startswith("rung 1/1\t1\t") and judged.startswith("rung 1/1\t1\t")
    page.screenshot(tmp_path / "ladder-tab.png")

    # The artifact: named, fingerprinted and shaped as the headless ladder's of the same server.
    headless = load_artifact(curve_ladder, QmaxArtifact)
    deadline = time.monotonic() + 60
    while not (written := list(out.glob("qmax-*.json"))):
        assert time.monotonic() < deadline, "the ladder wrote no artifact"
        time.sleep(0.5)
    (path,) = written
    artifact = load_artifact(path, QmaxArtifact)
    fingerprint = fetch_ping(curve_url).fingerprint(Transport.LOCAL_HTTP)
    assert path.name == qmax_filename(fingerprint) and artifact.fingerprint == fingerprint
    assert artifact.fingerprint == headless.fingerprint
    assert artifact.model_dump().keys() == headless.model_dump().keys()
    assert artifact.ladder is not None and artifact.ladder.rungs == [1]
    assert (artifact.ladder.hold_s, artifact.ladder.measure_s, artifact.slo_ms) == (8, 5, 60000)
    assert artifact.provenance.kind == headless.provenance.kind == "simulated"
    assert artifact.provenance.notes == f"started from Locust's web UI; {CURVE_CHECK_NOTE}"
    command = artifact.provenance.command or ""
    assert f"--headless --host {curve_url} --rungs 1 --hold-s 8 --measure-s 5" in command
    assert path.with_name(path.name + ".samples.csv.gz").is_file()
