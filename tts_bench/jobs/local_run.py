"""The main job's in-process target: a local server process, a local ladder, a fresh process.

`tts-bench local-run --in-process` runs the chain (`main_job`) against `python -m tts_server`
(real offline Kokoro weights) on a free loopback port: the ladder over a local transport
(Locust, headless, child process), local T_total (a fresh server process beside the loaded one)
and the surge check against a fresh server bounded at Q_max. No AWS client, nothing deployed.
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tts_bench.artifacts.files import write_artifact
from tts_bench.artifacts.fingerprint import Transport, ttotal_filename
from tts_bench.artifacts.qmax import QmaxArtifact
from tts_bench.artifacts.ttotal import Trigger, TtotalArtifact
from tts_bench.aws.validate import Comparison
from tts_bench.errors import TtsBenchError
from tts_bench.jobs.main_job import JobSettings, MainJobError, Say
from tts_bench.measure.corpus import Utterance
from tts_bench.measure.ladder.locust_child import LadderRequest, run_ladder
from tts_bench.measure.ladder.schedule import LadderSchedule, format_duration
from tts_bench.measure.ttotal.local import LocalTtotalRequest, measure_local_ttotal
from tts_bench.measure.ttotal.probe import ProbeSample, speak
from tts_bench.planning.from_files import WrittenPlan
from tts_bench.serving.local_server import LocalServer

# Chosen to finish in a few minutes on 2 cores and to bracket at SLO_MULTIPLE × c=1 TTFAB.
IN_PROCESS_SCHEDULE = LadderSchedule((1, 2, 4, 8), hold_s=40.0, measure_s=25.0, idle_s=2.0)


@dataclass
class LocalServerTarget:
    """A local server started for the job; its logs in a folder that outlives the job."""

    transport: Transport = Transport.LOCAL_HTTP
    server_args: Sequence[str] = ()
    logs: Path = field(
        default_factory=lambda: Path(tempfile.mkdtemp(prefix="tts-bench-local-run-"))
    )
    server: LocalServer | None = None
    stopped: str = "server stopped"
    uncontended: str = "this machine's"
    surge_ratio: float | None = None
    deploys: bool = False
    rehearses: bool = False  # a local-http ladder is no SageMaker build for curve instances

    @property
    def url(self) -> str:
        if self.server is None:
            raise MainJobError("the local server is not running")
        return self.server.url

    @property
    def where(self) -> str:
        return (
            f"local server {self.server.url if self.server else '-'} (stopped; logs in {self.logs})"
        )

    @contextlib.contextmanager
    def running(self, step: Say) -> Iterator[None]:
        step(f"starting the local server (log: {self.logs / 'server.log'})")
        with LocalServer(self.server_args, log_path=self.logs / "server.log") as server:
            self.server = server
            server.wait_ready(progress=step)
            step(f"server ready at {server.url}")
            yield

    def speak(self, utterance: Utterance) -> ProbeSample:
        return speak(self.url, utterance)

    def ladder(
        self, settings: JobSettings, schedule: LadderSchedule, slo_ms: float, step: Say
    ) -> Path:
        assert self.server is not None
        fingerprint = self.server.wait_ready(timeout_s=5).fingerprint(self.transport)
        step(
            f"ladder: rungs {','.join(map(str, schedule.rungs))}, hold {schedule.hold_s:g} s, "
            f"measure {schedule.measure_s:g} s, at most {format_duration(schedule.duration_s)}"
        )
        request = LadderRequest(
            host=self.url, schedule=schedule, slo_ms=slo_ms, transport=self.transport.value,
            corpus=settings.corpus_path, model=settings.model, out=settings.out,
            q_max_basis=settings.q_max_basis,
        )  # fmt: skip
        return run_ladder(request, fingerprint, lambda line: step(f"qmax: {line}"))

    def ttotal(
        self, settings: JobSettings, qmax_path: Path, qmax: QmaxArtifact, step: Say
    ) -> tuple[TtotalArtifact, Path]:
        step("local T_total: a fresh server process beside the loaded one")
        ttotal = measure_local_ttotal(
            LocalTtotalRequest(
                qmax_path=qmax_path, host=self.url, utterances=settings.utterances,
                server_args=self.server_args, probe_concurrency=min(2, qmax.q_max or 1),
                log_path=self.logs / "fresh-server.log",
            ),
            lambda line: step(f"ttotal: {line}"),
        )  # fmt: skip
        name = ttotal_filename(ttotal.fingerprint, Trigger.LOCAL_PROCESS.value)
        path = write_artifact(ttotal, settings.out, name)
        step(f"T_total {ttotal.measured_total_s:.1f} s measured: {path}")
        return ttotal, path

    def deploy(self, written: WrittenPlan, step: Say) -> tuple[Comparison, ...]:
        return ()  # nothing is deployed in-process

    def surge(
        self, settings: JobSettings, qmax_path: Path, validation: Sequence[Comparison], step: Say
    ) -> Path | None:
        """Open-loop arrivals at two rates around X(Q_max) against a fresh server bounded at
        Q_max. A check beside the plan: its failure is reported and loses nothing above."""
        from tts_bench.measure.surge.run import local_surge_check

        step("surge check: open-loop Poisson arrivals against one instance bounded at Q_max")
        try:
            written = local_surge_check(
                qmax_path, settings.utterances, settings.out, step, self.server_args,
                self.logs / "surge-server.log", duration_s=settings.surge_s,
            )  # fmt: skip
        except TtsBenchError as exc:
            step(f"surge check failed: {exc}")
            return None
        return written.path if written else None
