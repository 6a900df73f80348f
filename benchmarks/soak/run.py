"""The soak, start to end: start the soaked things, load them in phases, sample, judge, report.

Phases: a loaded warm-up; the baseline idle window; the soak (load waves on the curve cloud,
whose deployed plan scales it out and in; the process cloud's desired count forced 1 ↔ 2
through the control plane); the final idle window. Each idle window lasts `idle_s`, then waits
(at most `idle_s` more) for both clouds to be back at one InService instance, then takes a
burst of samples that `judge` compares. A sample every `sample_s` throughout, for the table
and the plot. Ctrl-C (or SIGTERM) ends the run early: everything started is stopped and what
was sampled is written.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import re
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

import psutil

from benchmarks.soak import report
from benchmarks.soak.judge import Verdict, judge_target
from benchmarks.soak.probe import client_ports, process_figures
from benchmarks.soak.settings import REPO, SoakSettings, SoakUsageError, parse_settings
from benchmarks.soak.targets import (
    READ_LAG_S,
    SoakedCloud,
    SoakedServer,
    SoakStartError,
    in_flight,
)
from benchmarks.soak.traffic import (
    CloudStreams,
    DirectStreams,
    IdleSessions,
    OpenLoop,
    SdkSessions,
    WebSocketSessions,
    Wire,
    mixed_kinds,
)
from tts_bench.errors import TtsBenchError
from tts_bench.measure.transport.bidi_stream import BidiWorker

QMAX = REPO / "measurements" / "qmax-kokoro-82m-response-stream-g5xlarge-8b1b96bc.json"
PLAN = REPO / "measurements" / "plan-kokoro-82m-g5xlarge-8b1b96bc.json"
BURST = 3  # samples at the end of each idle window
BURST_GAP_S = 5.0
# An idle window waits at most this long (or its own length, if longer) to settle.
SETTLE_MIN_S = 180.0
# The cloud's in-flight counter: the largest ConcurrentRequestsPerModel datapoint readable for
# this much wall time (10 s windows, readable 5 s after they close: `targets.READ_LAG_S`).
METRIC_WINDOW_S = 15.0
TRACE_EVERY_S = 5.0  # how often the clouds' instance counts are read (scale-out/in counted)
CURVE_RATE_SCALE = 10.0  # each curve instance serves a tenth of the reference curve's rate


class Soak:
    def __init__(self, settings: SoakSettings, stop: threading.Event) -> None:
        self.settings = settings
        self.stop = stop
        self.on = threading.Event()
        self.scratch = Path(tempfile.mkdtemp(prefix="tts-bench-soak-"))
        self.things: dict[str, SoakedCloud | SoakedServer] = {}
        self.loads: dict[str, list[OpenLoop]] = {}
        self.sessions: dict[str, IdleSessions] = {}
        self.worker: BidiWorker | None = None
        self.samples: list[dict[str, Any]] = []
        self.counts: dict[str, list[tuple[float, int]]] = {}
        self.forced = 0
        self.notes: list[str] = []
        self.fault_details: dict[str, list[str]] = {}  # the clouds' first faults, as boto3 saw them
        self.t0 = time.monotonic()
        self.started_at = time.time()
        self.completed = False

    # ------------------------------------------------------------------ start and stop

    def start(self) -> None:
        s = self.settings
        if "curve" in s.targets:
            self.things["curve"] = SoakedCloud("curve", [
                "--instance-model", "curve", "--qmax", str(QMAX), "--plan", str(PLAN),
                "--rate-scale", f"{CURVE_RATE_SCALE:g}", "--time-scale", f"{s.time_scale:g}",
                "--max-instances", "8", "--seed", "1",
            ], self.scratch)  # fmt: skip
        if "process" in s.targets:
            self.things["process"] = SoakedCloud(
                "process",
                ["--instances", "1", "--max-instances", "2", "--server-args", "--backend onnx"],
                self.scratch,
            )
        if "server" in s.targets:
            self.things["server"] = SoakedServer("server", ["--backend", "onnx"], self.scratch)
        for thing in self.things.values():
            thing.wait_started(self.stop)
            if self.stop.is_set():
                return
        self._start_loads()

    def _start_loads(self) -> None:
        s = self.settings
        for name, thing in self.things.items():
            if isinstance(thing, SoakedCloud):
                host, port = thing.runtime_address()
                wire = Wire(host, port, f"/endpoints/{thing.endpoint}/invocations-response-stream")
                streams: Any = CloudStreams(thing.client("sagemaker-runtime"), thing.endpoint)
                self.fault_details[name] = streams.faults_seen
            else:
                host_port = thing.url.removeprefix("http://").split(":")
                wire = Wire(host_port[0], int(host_port[1]), "/invocations")
                streams = DirectStreams(wire)
            sessions: IdleSessions | None = None
            if name == "process":
                assert isinstance(thing, SoakedCloud)
                self.worker = _started_ignoring_ctrl_c(
                    BidiWorker({**thing.env, "PYTHONPATH": str(REPO)})
                )
                sessions = SdkSessions(self.worker, thing.endpoint)
            elif name == "server":
                assert isinstance(thing, SoakedServer)
                sessions = WebSocketSessions(thing.url)
            if sessions is not None:
                self.sessions[name] = sessions
            rate = s.curve_rps if name == "curve" else s.rate_rps
            loads = [
                OpenLoop(
                    name, mixed_kinds(wire, streams), lambda _t, r=rate: r, self.on,
                    seed=len(self.loads) + 1, sessions=sessions,
                    bidi_every_s=s.bidi_every_s, bidi_hold_s=s.bidi_hold_s,
                )
            ]  # fmt: skip
            if name == "curve":
                loads.append(
                    OpenLoop(
                        f"{name}-wave",
                        {"good": (1.0, streams.good)},
                        self._wave_rate,
                        self.on,
                        seed=100,
                    )
                )
            self.loads[name] = loads
            for load in loads:
                load.start()

    def _wave_rate(self, now: float) -> float:
        """Good requests in square waves (the first half of each period) during the soak."""
        s = self.settings
        into = now - self.t0
        return s.wave_rps if (into % s.wave_s) < s.wave_s / 2 else 0.0

    def shutdown(self) -> None:
        self.on.clear()
        for loads in self.loads.values():
            for load in loads:
                load.stop()
        if self.worker is not None:
            self.worker.stop()
        for thing in reversed(self.things.values()):
            with contextlib.suppress(Exception):
                thing.stop()

        shutil.rmtree(self.scratch, ignore_errors=True)

    # ------------------------------------------------------------------ the phases

    def run(self) -> None:
        s = self.settings
        self.t0 = time.monotonic()
        self.next_sample = 0.0
        self.next_trace = 0.0
        self.next_scale = s.scale_every_s
        phases = [
            ("warm-up", s.warmup_s, True),
            ("baseline", s.idle_s, False),
            ("soak", s.soak_s, True),
            ("final", s.idle_s, False),
        ]
        for name, length_s, loaded in phases:
            self._phase(name, length_s, loaded)
            if self.stop.is_set():
                return
        self.completed = True

    def _phase(self, name: str, length_s: float, loaded: bool) -> None:
        (self.on.set if loaded else self.on.clear)()
        say(f"{name}: {length_s:.0f} s, {'loaded' if loaded else 'idle'}")
        end = time.monotonic() + length_s
        while not self.stop.is_set() and time.monotonic() < end:
            self._tick(name, loaded)
            self.stop.wait(0.5)
        if loaded or self.stop.is_set():
            return
        settled = self._wait_settled(name, deadline=time.monotonic() + max(length_s, SETTLE_MIN_S))
        if not settled:
            self.notes.append(
                f"{name}: not settled (one InService instance per cloud, nothing in flight at "
                "the servers) within the wait; its burst judged as it was"
            )
        for index in range(BURST):
            if index:
                self.stop.wait(BURST_GAP_S)
            if self.stop.is_set():
                return
            self._sample(name, burst=True)

    def _tick(self, phase: str, loaded: bool) -> None:
        into = time.monotonic() - self.t0
        if into >= self.next_trace:
            self.next_trace += TRACE_EVERY_S
            self._trace()
        if into >= self.next_sample:
            self.next_sample += self.settings.sample_s
            self._sample(phase, burst=False)
        process = self.things.get("process")
        if not isinstance(process, SoakedCloud):
            return
        if not loaded:
            with contextlib.suppress(Exception):  # Updating: the next tick tries again
                if process.describe()[1] != 1:
                    process.set_desired(1)
        elif phase == "soak" and into >= self.next_scale:
            current = process.describe()[1]
            if process.set_desired(2 if current == 1 else 1):
                self.forced += 1
                self.next_scale += self.settings.scale_every_s

    def _trace(self) -> None:
        for name, thing in self.things.items():
            if isinstance(thing, SoakedCloud):
                with contextlib.suppress(Exception):
                    count = thing.describe()[1]
                    trace = self.counts.setdefault(name, [])
                    if not trace or trace[-1][1] != count:
                        trace.append((time.monotonic() - self.t0, count))

    def _wait_settled(self, phase: str, deadline: float) -> bool:
        """Wait until each cloud is InService at one instance and no server counts a request
        in flight, then for the metric's window to hold only idle time (False: time ran out,
        as it does when a counter never comes back to 0)."""
        clouds = [t for t in self.things.values() if isinstance(t, SoakedCloud)]
        while not self.stop.is_set():
            self._tick(phase, loaded=False)
            base = all(c.describe() == ("InService", 1) for c in clouds)
            if base and all(in_flight(t.ping_urls()) == 0 for t in self.things.values()):
                self.stop.wait(METRIC_WINDOW_S + READ_LAG_S + 1.0)
                return True
            if time.monotonic() > deadline:
                return False
            self.stop.wait(1.0)
        return False

    def _sample(self, phase: str, burst: bool) -> None:
        t_s = time.monotonic() - self.t0
        worker = self.worker.process if self.worker else None
        clients = client_ports([os.getpid(), *([worker.pid] if worker else [])])
        for name, thing in self.things.items():
            row: dict[str, Any] = {"target": name, "t_s": round(t_s, 1), "phase": phase,
                                   "burst": burst}  # fmt: skip
            row.update(process_figures(thing.pid, thing.tmpdir, clients))
            row["in_flight_server"] = in_flight(thing.ping_urls())
            if isinstance(thing, SoakedCloud):
                row["in_flight_cloud"] = thing.concurrency(METRIC_WINDOW_S)
                row["instances"] = thing.describe()[1]
            sessions = self.sessions.get(name)
            row["bidi_open"] = sessions.count() if sessions is not None else 0
            self.samples.append(row)

    # ------------------------------------------------------------------ results

    def verdicts(self) -> list[Verdict]:
        found: list[Verdict] = []
        for name, thing in self.things.items():
            mine = [r for r in self.samples if r["target"] == name and r["burst"]]
            counters = ["in_flight_server"]
            if isinstance(thing, SoakedCloud):
                counters.append("in_flight_cloud")
            faults = sum(load.outcomes.faults() for load in self.loads.get(name, []))
            found += judge_target(
                name,
                [r for r in mine if r["phase"] == "baseline"],
                [r for r in mine if r["phase"] == "final"],
                counters,
                faults,
            )
        return found

    def outcomes(self) -> dict[str, dict[str, dict[str, int]]]:
        merged: dict[str, dict[str, dict[str, int]]] = {}
        for name, loads in self.loads.items():
            table: dict[str, dict[str, int]] = {}
            for load in loads:
                for kind, counts in load.outcomes.snapshot().items():
                    for outcome, n in counts.items():
                        table.setdefault(kind, {})
                        table[kind][outcome] = table[kind].get(outcome, 0) + n
            merged[name] = table
        return merged

    def scaling(self) -> dict[str, tuple[int, int]]:
        """(scale-outs, scale-ins) per cloud: the curve cloud's from its scaling activities
        (DescribeScalingActivities), the process cloud's from the instance counts traced."""
        found = {}
        for name, trace in self.counts.items():
            counts = [count for _, count in trace]
            thing = self.things[name]
            if name == "curve" and isinstance(thing, SoakedCloud):
                with contextlib.suppress(Exception):
                    counts = [1] + [
                        int(m[1])
                        for d in thing.scaling_activities()
                        if (m := re.search(r"count to (\d+)", d))
                    ]
            steps = [b - a for a, b in itertools.pairwise(counts)]
            found[name] = (sum(1 for d in steps if d > 0), sum(1 for d in steps if d < 0))
        return found


def _started_ignoring_ctrl_c(worker: BidiWorker) -> BidiWorker:
    """Start the HTTP/2 worker with SIGINT ignored, which it inherits: a Ctrl-C in the terminal
    reaches the whole process group, and the soak stops the worker itself, in order."""
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        return worker.start()
    finally:
        signal.signal(signal.SIGINT, previous)


def say(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] soak: {message}", file=sys.stderr, flush=True)


def _on_signal(stop: threading.Event) -> Callable[[int, FrameType | None], None]:
    def handle(signum: int, frame: FrameType | None) -> None:
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, signal.SIG_IGN)  # the rest of the run is stopping it
        say("stopping: writing what was sampled and stopping everything started")
        stop.set()

    return handle


def main(argv: list[str] | None = None) -> int:
    try:
        settings = parse_settings(argv)
    except SoakUsageError as exc:
        print(f"soak: {exc}", file=sys.stderr)
        return 2
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, _on_signal(stop))
    soak = Soak(settings, stop)
    code = 0
    try:
        say(f"starting {', '.join(settings.targets)} (scratch {soak.scratch})")
        soak.start()
        if not stop.is_set():
            soak.run()
    except (SoakStartError, TtsBenchError, OSError, psutil.Error) as exc:
        print(f"soak: {type(exc).__name__}: {exc}".splitlines()[0], file=sys.stderr)
        code = 1
    finally:
        verdicts = soak.verdicts() if soak.samples else []
        outcomes, scaling = soak.outcomes(), soak.scaling()
        soak.notes += [f"{name} fault: {d}" for name, ds in soak.fault_details.items() for d in ds]
        say("stopping what was started")
        soak.shutdown()
    if soak.samples:
        written = report.write(settings, soak.samples, verdicts, outcomes, scaling, soak.forced,
                               soak.notes, soak.completed, soak.started_at)  # fmt: skip
        for verdict in verdicts:
            print(f"{verdict.word:10} {verdict.target:8} {verdict.bound}: {verdict.figure}")
        say(f"wrote {', '.join(str(p) for p in written)}")
    if stop.is_set():
        return 130  # interrupted: judged only as far as it went
    if code == 0 and (not soak.completed or any(v.passed is False for v in verdicts)):
        code = 1
    return code
