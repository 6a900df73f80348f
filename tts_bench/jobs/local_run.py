"""The local end-to-end job: server, ladder, T_total, plan and plots on this machine, no cloud.

1. start `python -m tts_server` (real offline Kokoro weights) on a free loopback port;
2. state a local SLO: a CPU serves Kokoro tens of times slower than the GPU the 3000 ms
   production SLO is meant for, so unless `--slo-ms` is given the SLO is a fixed multiple of
   this machine's own uncontended p95 TTFAB, measured first (calibration), which a short
   ladder brackets within a few rungs (the engine shares the CPU, so TTFAB grows with N);
3. run the short ladder (Locust, headless, child process), write the qmax artifact;
4. time a fresh server process beside the loaded one (local T_total), write the ttotal artifact;
5. run `tts-bench plan` over the pair, then draw both plots;
6. stop the server whatever happens.
"""

from __future__ import annotations

import math
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tts_bench.artifacts.fingerprint import Transport, ttotal_filename
from tts_bench.artifacts.schema import QmaxArtifact, Trigger, load_artifact, write_artifact
from tts_bench.errors import TtsBenchError
from tts_bench.measure.corpus import Utterance
from tts_bench.measure.ladder import LadderSchedule, format_duration
from tts_bench.measure.ladder_locust import LadderRequest, run_ladder
from tts_bench.measure.local_server import LocalServer
from tts_bench.measure.ttotal_local import LocalTtotalRequest, measure_local_ttotal, speak
from tts_bench.planning.from_files import plan_from_files
from tts_bench.planning.plan import PlanRequest
from tts_bench.planning.report import render_plan

# Chosen to finish in a few minutes on 2 cores and to bracket at SLO_MULTIPLE × c=1 TTFAB.
LOCAL_RUNGS = (1, 2, 4, 8)
LOCAL_HOLD_S = 40.0
LOCAL_MEASURE_S = 25.0
LOCAL_IDLE_S = 2.0
SLO_MULTIPLE = 3.0
CALIBRATION_REQUESTS = 4
MAX_LOCAL_SLO_MS = 59_000.0  # under SageMaker's 60 s invocation ceiling, or the plan stops
LOCAL_PEAK_RPS = 1.0  # illustrative local traffic for the plan's fleet size
LOCAL_TROUGH_RPS = 0.2


class LocalRunError(TtsBenchError):
    """A step of the local job failed; the message names the step."""


@dataclass(frozen=True, slots=True)
class LocalRunSettings:
    out: Path
    schedule: LadderSchedule
    corpus_path: Path
    utterances: Sequence[Utterance]
    slo_ms: float | None  # None: calibrate
    transport: Transport = Transport.LOCAL_HTTP
    server_args: Sequence[str] = ()
    peak_rps: float = LOCAL_PEAK_RPS
    trough_rps: float = LOCAL_TROUGH_RPS
    model: str = "kokoro-82m"


@dataclass(frozen=True, slots=True)
class LocalRunResult:
    qmax_path: Path
    ttotal_path: Path
    plan_path: Path | None
    plan_exit_code: int
    pngs: tuple[Path, ...]
    slo_ms: float
    slo_reason: str
    q_max: int | None
    bracketed: bool
    measured_total_s: float
    elapsed_s: float


def calibrated_slo_ms(ttfab_ms: Sequence[float]) -> float:
    """SLO_MULTIPLE × the uncontended p95 TTFAB, rounded up to 100 ms, under the 60 s ceiling."""
    p95 = float(np.percentile(ttfab_ms, 95))
    return min(MAX_LOCAL_SLO_MS, math.ceil(SLO_MULTIPLE * p95 / 100.0) * 100.0)


def calibrate(url: str, utterances: Sequence[Utterance], say: Callable[[str], None]) -> list[float]:
    """TTFAB of a few one-at-a-time requests spread over the corpus (ms)."""
    step = max(1, len(utterances) // CALIBRATION_REQUESTS)
    picks = [utterances[(i * step) % len(utterances)] for i in range(CALIBRATION_REQUESTS)]
    out = []
    for i, utterance in enumerate(picks, start=1):
        served = speak(url, utterance)
        if not served.ok or served.ttfab_s is None:
            raise LocalRunError(f"calibration request {i} failed: {served.detail}")
        out.append(served.ttfab_s * 1000)
        say(f"calibration {i}/{len(picks)}: TTFAB {out[-1]:.0f} ms")
    return out


def run_local(settings: LocalRunSettings, say: Callable[[str], None]) -> LocalRunResult:
    from tts_bench.measure.plots import plot_qmax, plot_ttotal

    began = time.time()

    def step(text: str) -> None:
        say(f"[{format_duration(time.time() - began):>10}] {text}")

    settings.out.mkdir(parents=True, exist_ok=True)
    logs = Path(tempfile.mkdtemp(prefix="tts-bench-local-run-"))
    step(f"starting the local server (log: {logs / 'server.log'})")
    with LocalServer(settings.server_args, log_path=logs / "server.log") as server:
        server.wait_ready(progress=step)
        url = server.url
        step(f"server ready at {url}")

        if settings.slo_ms is not None:
            slo_ms, reason = settings.slo_ms, "given with --slo-ms"
        else:
            ttfab = calibrate(url, settings.utterances, step)
            slo_ms = calibrated_slo_ms(ttfab)
            reason = (
                f"{SLO_MULTIPLE:g} × this machine's uncontended p95 TTFAB "
                f"({np.percentile(ttfab, 95):.0f} ms over {len(ttfab)} requests), rounded up"
            )
        step(f"local SLO: p95 TTFAB <= {slo_ms:g} ms ({reason})")

        ping = server.wait_ready(timeout_s=5)
        fingerprint = ping.fingerprint(settings.transport)
        step(
            f"ladder: rungs {','.join(map(str, settings.schedule.rungs))}, hold "
            f"{settings.schedule.hold_s:g} s, measure {settings.schedule.measure_s:g} s, at most "
            f"{format_duration(settings.schedule.duration_s)}"
        )
        qmax_path = run_ladder(
            LadderRequest(
                host=url, schedule=settings.schedule, slo_ms=slo_ms,
                transport=settings.transport.value, corpus=settings.corpus_path,
                model=settings.model, out=settings.out,
            ),
            fingerprint,
            lambda line: step(f"qmax: {line}"),
        )  # fmt: skip
        qmax = load_artifact(qmax_path, QmaxArtifact)
        step(
            f"Q_max {qmax.q_max} at {slo_ms:g} ms ({'bracketed' if qmax.bracketed else 'NOT bracketed'}): {qmax_path}"
        )

        step("local T_total: a fresh server process beside the loaded one")
        ttotal = measure_local_ttotal(
            LocalTtotalRequest(
                qmax_path=qmax_path, host=url, utterances=settings.utterances,
                server_args=settings.server_args, probe_concurrency=min(2, qmax.q_max or 1),
                log_path=logs / "fresh-server.log",
            ),
            lambda line: step(f"ttotal: {line}"),
        )  # fmt: skip
        ttotal_path = write_artifact(
            ttotal, settings.out, ttotal_filename(ttotal.fingerprint, Trigger.LOCAL_PROCESS.value)
        )
        step(f"T_total {ttotal.measured_total_s:.1f} s measured: {ttotal_path}")
    step("server stopped")

    plan_path = None
    plan_code = 2
    if qmax.q_max is None:
        step("plan skipped: no rung met the SLO, so there is no Q_max to plan from")
    else:
        step("plan:")
        try:
            written = plan_from_files(
                qmax_path,
                ttotal_path,
                PlanRequest(
                    peak_rps=settings.peak_rps, trough_rps=settings.trough_rps, slo_ms=slo_ms
                ),
                settings.out,
            )
        except TtsBenchError as exc:
            step(f"plan refused: {exc}")
            plan_code = exc.exit_code
        else:
            say(render_plan(written.plan, written.qmax, written.ttotal))
            plan_path = written.path
            plan_code = 0 if written.plan.feasible else 1
            step(f"plan written: {plan_path}")
    pngs = (
        plot_qmax(qmax, qmax_path.with_suffix(".png")),
        plot_ttotal(ttotal, ttotal_path.with_suffix(".png")),
    )
    step(f"plots: {', '.join(str(p) for p in pngs)}")
    return LocalRunResult(
        qmax_path=qmax_path, ttotal_path=ttotal_path, plan_path=plan_path, plan_exit_code=plan_code,
        pngs=pngs, slo_ms=slo_ms, slo_reason=reason, q_max=qmax.q_max, bracketed=qmax.bracketed,
        measured_total_s=ttotal.measured_total_s, elapsed_s=time.time() - began,
    )  # fmt: skip
