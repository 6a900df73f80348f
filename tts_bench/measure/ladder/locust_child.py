"""Run `loadtest/qmax.py` under Locust, headless, in a child process, and return its artifact.

Locust monkey-patches the standard library when imported (and must be imported before
anything loads ssl), so the ladder never runs inside the calling process. Its progress lines
(logger `qmax`) are passed on to `progress`; the rest of Locust's output is kept only to
explain a failure.
"""

from __future__ import annotations

import collections
import os
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import tts_bench
from tts_bench.artifacts.fingerprint import Fingerprint, qmax_filename
from tts_bench.artifacts.qmax import DEFAULT_Q_MAX_BASIS, QmaxBasis
from tts_bench.errors import TtsBenchError
from tts_bench.measure.ladder.quantile_interval import DEFAULT_CONFIDENCE
from tts_bench.measure.ladder.schedule import LadderSchedule

REPO_ROOT = Path(tts_bench.__file__).resolve().parents[1]
LOCUSTFILE = REPO_ROOT / "loadtest" / "qmax.py"
# Requests in flight when a rung ends are cancelled (see loadtest/qmax.py): no --stop-timeout.
SHUTDOWN_WAIT_S = 30  # how long Locust gets to write its artifact after a Ctrl-C
_PROGRESS_TAG = "/qmax: "


class LadderRunError(TtsBenchError):
    """Locust ended without writing the ladder's artifact."""


@dataclass(frozen=True, slots=True)
class LadderRequest:
    host: str
    schedule: LadderSchedule
    slo_ms: float
    transport: str
    corpus: Path | None
    model: str
    out: Path
    processes: int | None = None
    refine_pct: float | None = None
    underrun_slo: float | None = None
    confidence: float = DEFAULT_CONFIDENCE
    contract: str | None = None  # --contract as given; None: kokoro
    repeat: int = 1
    q_max_basis: QmaxBasis = DEFAULT_Q_MAX_BASIS  # --q-max-basis
    curve_check: bool = False

    def locust_command(self) -> list[str]:
        s = self.schedule
        command = [
            sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--headless", "--only-summary",
            "--host", self.host,
            "--rungs", ",".join(map(str, s.rungs)), "--hold-s", f"{s.hold_s:g}",
            "--measure-s", f"{s.measure_s:g}", "--idle-s", f"{s.idle_s:g}",
            "--slo-ms", f"{self.slo_ms:g}", "--transport", self.transport,
            "--model", self.model, "--out", str(self.out),
        ]  # fmt: skip
        if s.max_hold_s is not None:
            command += ["--max-hold-s", f"{s.max_hold_s!r}"]
        if any(s.extended_s):
            command += ["--extend-s", ",".join(f"{e!r}" for e in s.extended_s)]
        if s.unstable_max_hold_s is not None:
            command += ["--unstable-max-hold-s", f"{s.unstable_max_hold_s!r}"]
        if s.whole_minutes is not None:
            command += ["--whole-minutes", str(s.whole_minutes)]
        if self.corpus is not None:
            command += ["--corpus", str(self.corpus)]
        if self.processes:
            command += ["--processes", str(self.processes)]
        if self.refine_pct is not None:
            command += ["--refine", f"{self.refine_pct!r}"]
        if self.underrun_slo is not None:
            command += ["--underrun-slo", f"{self.underrun_slo!r}"]
        if self.confidence != DEFAULT_CONFIDENCE:
            command += ["--confidence", f"{self.confidence!r}"]
        if self.contract is not None:
            command += ["--contract", self.contract]
        if self.repeat != 1:
            command += ["--repeat", str(self.repeat)]
        if self.q_max_basis != DEFAULT_Q_MAX_BASIS:
            command += ["--q-max-basis", self.q_max_basis]
        if self.curve_check:
            command += ["--curve-check"]
        return command


def child_env() -> dict[str, str]:
    """The caller's environment with this checkout first on the import path."""
    env = dict(os.environ)
    paths = [str(REPO_ROOT), str(REPO_ROOT / "container")]
    env["PYTHONPATH"] = os.pathsep.join([*paths, *filter(None, [env.get("PYTHONPATH")])])
    return env


def run_ladder(
    request: LadderRequest,
    fingerprint: Fingerprint,
    progress: Callable[[str], None],
    extra_args: Sequence[str] = (),
    provenance_kind: str = "measured",
) -> Path:
    """Run the ladder to its end; return the artifact path (named after `fingerprint`)."""
    if not LOCUSTFILE.is_file():
        raise LadderRunError(f"{LOCUSTFILE} is missing: run from a clone of the repository")
    target = request.out / qmax_filename(fingerprint, provenance_kind)
    before = target.stat().st_mtime_ns if target.exists() else None
    tail: collections.deque[str] = collections.deque(maxlen=40)
    with subprocess.Popen(
        [*request.locust_command(), *extra_args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=child_env(),
        cwd=REPO_ROOT,
    ) as child:
        try:
            pipe = child.stdout
            for line in pipe or ():
                line = line.rstrip("\n")
                tail.append(line)
                if _PROGRESS_TAG in line:
                    progress(line.split(_PROGRESS_TAG, 1)[1])
            code = child.wait()
        except BaseException:
            child.terminate()
            child.wait(timeout=SHUTDOWN_WAIT_S)
            raise
    written = target.exists() and target.stat().st_mtime_ns != before
    if code != 0 or not written:
        detail = "\n".join(tail)
        raise LadderRunError(
            f"Locust exited with code {code} without writing {target}; its last lines:\n{detail}"
        )
    return target
