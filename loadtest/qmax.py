"""The closed-loop Q_max ladder (SPEC §4), as a Locust file.

    locust -f loadtest/qmax.py --headless --host http://127.0.0.1:8080 \\
        --rungs 1,5,10,20,30,40,50,60 --hold-s 240 --measure-s 60 --idle-s 30 --slo-ms 3000

N users per rung, each one request at a time with no think time, so N are outstanding by
construction. Every request's time to first audio byte (TTFAB) and total latency are fired as
Locust request metrics (so the UI, CSV and distributed mode work as usual) and kept as raw
samples; each rung's statistics come from the samples that ended in the trailing measure
window of its hold (`tts_bench.measure.ladder`). The ladder stops after the first rung that fails the
SLO or is client-bound, and writes `<out>/qmax-<model>-<transport>-<slug>.json` with the raw
samples beside it (`….samples.csv.gz`) when Locust quits.

SageMaker: `--transport response-stream --endpoint NAME [--variant V] [--region R]` (no
`--host`); the fingerprint comes from the endpoint's Model and the users are in
`loadtest/sagemaker_users.py`. Scaling is not frozen here: `tts-bench qmax --endpoint` wraps
this file with the preflight drift, the freeze and the CloudWatch join.

Distributed: `--master` / `--worker` (or `--processes N`) with this same file. The shape and
the judging run on the master; it tells workers the rung being held; workers ship their raw
samples with their stats reports (each worker reads `--corpus` itself: the path must exist
there too). Leave `--stop-timeout` at 0: requests still in flight when a
rung ends are cancelled, so each rung starts on an idle server; they are kept as `cancelled`
samples (their time in flight still counts toward the rung's load) and, having ended after the
window, no statistic needs them. (Graceful stops also race in Locust when a ramp-down is still
waiting for a slow request as the next rung starts.) Ladder flags are read at start-up only.
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import random
import socket
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gevent
import psutil
import websocket
from gevent import GreenletExit
from locust import FastHttpUser, LoadTestShape, User, events, task
from locust.env import Environment
from locust.runners import WORKER_REPORT_INTERVAL, MasterRunner, Runner, WorkerRunner

from tts_bench.artifacts.fingerprint import Fingerprint, Transport, qmax_filename
from tts_bench.artifacts.schema import (
    Provenance,
    ProvenanceKind,
    Refinement,
    RefinementProbe,
    Rung,
    write_artifact,
)
from tts_bench.deployment import DEFAULT_VARIANT
from tts_bench.errors import RefusalError, TtsBenchError
from tts_bench.measure.corpus import Utterance, load_corpus
from tts_bench.measure.ladder import (
    DEFAULT_HOLD_S,
    DEFAULT_IDLE_S,
    DEFAULT_MEASURE_S,
    DEFAULT_RUNGS,
    DEFAULT_SLO_MS,
    FINAL_DRAIN_S,
    CpuReading,
    LadderSchedule,
    Phase,
    build_qmax_artifact,
    build_refinement,
    extend_unstable,
    format_duration,
    ladder_rungs,
    live_figures,
    parse_rungs,
    rung_statistics,
    window_stability,
)
from tts_bench.measure.playback import (
    PlaybackTracker,
    base64_audio_seconds,
    check_underrun_slo,
)
from tts_bench.measure.refine import (
    DEFAULT_REFINE_PCT,
    Bracket,
    check_refine_pct,
    coarse_bracket,
    narrow,
    next_probe,
    worst_case_probes,
)
from tts_bench.measure.sagemaker_target import read_target_from_environment
from tts_bench.measure.samples import Outcome, Sample, samples_path, write_samples
from tts_bench.measure.server_ping import fetch_ping
from tts_bench.measure.stability import hold_extension_s

logger = logging.getLogger("qmax")

DEFAULT_CORPUS = Path(__file__).resolve().parent / "corpus" / "en.txt"
HEADERS_ENTRY = "/invocations (headers only)"  # Locust's own entry: timed at the headers
TTFAB_ENTRY = "TTFAB"
LATENCY_ENTRY = "total latency"
RUNG_MESSAGE = "qmax_rung"
PROGRESS_EVERY_S = 5.0
# How long the judge waits for the requests in flight at a window's end to finish (the server
# ends every invocation within SageMaker's 60 s ceiling).
SETTLE_LIMIT_S = 70.0


def refuse_transport(transport: Transport) -> None:
    if transport not in USER_CLASSES:
        raise RefusalError(
            f"--transport {transport.value}: no load-test user for it in this checkout; use "
            f"one of {', '.join(t.value for t in USER_CLASSES)}"
        )


# --------------------------------------------------------------------------- flags


@events.init_command_line_parser.add_listener
def add_ladder_arguments(parser: Any, **_kw: Any) -> None:
    # On the parser itself: only it knows `include_in_web_ui` (ladder flags are start-up only).
    group = parser
    flags: list[tuple[str, Any, str]] = [
        (
            "--rungs",
            ",".join(map(str, DEFAULT_RUNGS)),
            "concurrency levels, comma-separated, ascending",
        ),
        ("--hold-s", DEFAULT_HOLD_S, "seconds each rung is held"),
        ("--measure-s", DEFAULT_MEASURE_S, "trailing seconds of each hold that are measured"),
        ("--idle-s", DEFAULT_IDLE_S, "seconds with no load between rungs"),
        ("--slo-ms", DEFAULT_SLO_MS, "p95 TTFAB SLO in milliseconds"),
    ]
    for name, default, text in flags:
        kind = str if isinstance(default, str) else float
        group.add_argument(name, type=kind, default=default, help=text, include_in_web_ui=False)
    group.add_argument(
        "--max-hold-s",
        type=float,
        default=None,
        metavar="S",
        help="hold a rung whose window is unstable one --measure-s longer at a time, up to S "
        "seconds in all (default: off)",
        include_in_web_ui=False,
    )
    group.add_argument(
        "--refine",
        type=float,
        nargs="?",
        const=DEFAULT_REFINE_PCT,
        default=None,
        metavar="PCT",
        help="after a bracketed ladder, bisect to max(1 user, PCT %% of Q_max) "
        f"(PCT defaults to {DEFAULT_REFINE_PCT:g})",
        include_in_web_ui=False,
    )
    group.add_argument(
        "--underrun-slo",
        type=float,
        default=None,
        metavar="SHARE",
        help="a rung whose share of stalled streams exceeds SHARE fails",
        include_in_web_ui=False,
    )
    group.add_argument(
        "--transport",
        default=Transport.LOCAL_HTTP.value,
        choices=[t.value for t in Transport],
        help="how requests reach the model",
        include_in_web_ui=False,
    )
    group.add_argument(
        "--corpus", default=str(DEFAULT_CORPUS), help="utterance file", include_in_web_ui=False
    )
    group.add_argument("--model", default="kokoro-82m", help="model id", include_in_web_ui=False)
    group.add_argument(
        "--endpoint", default=None, help="SageMaker endpoint", include_in_web_ui=False
    )
    group.add_argument(
        "--region", default=None, help="AWS region (default: AWS_REGION)", include_in_web_ui=False
    )
    group.add_argument(
        "--out", default="measurements", help="artifact directory", include_in_web_ui=False
    )


def schedule_from_options(options: Any) -> LadderSchedule:
    return LadderSchedule(
        rungs=parse_rungs(options.rungs),
        hold_s=options.hold_s,
        measure_s=options.measure_s,
        idle_s=options.idle_s,
        max_hold_s=options.max_hold_s,
    )


# --------------------------------------------------------------------------- per-process state


@dataclass
class Recorder:
    """One load-generating process: the rung it is told, its unsent samples and CPU readings."""

    worker: str
    corpus: tuple[Utterance, ...] = ()
    transport: Transport = Transport.LOCAL_HTTP
    rung: int | None = None
    pending: list[Sample] = field(default_factory=list)
    cpu: list[CpuReading] = field(default_factory=list)
    open_starts: dict[int, float] = field(default_factory=dict)
    cpu_sampler: gevent.Greenlet | None = None
    _ids: Iterator[int] = field(default_factory=itertools.count)

    def opened(self, start: float) -> int:
        token = next(self._ids)
        self.open_starts[token] = start
        return token

    def closed(self, token: int, sample: Sample) -> None:
        self.open_starts.pop(token, None)
        self.pending.append(sample)

    def drain(self) -> dict[str, Any]:
        """Everything new since the last drain, in plain types (it travels as msgpack)."""
        samples, self.pending = self.pending, []
        cpu, self.cpu = self.cpu, []
        return {
            "worker": self.worker,
            "samples": [s.to_wire() for s in samples],
            "cpu": [[r.ts, r.cpu_s] for r in cpu],
            "at": time.time(),
            "open": sorted(self.open_starts.values()),
        }

    def on_rung_message(self, msg: Any, **_kw: Any) -> None:
        self.rung = msg.data["rung"]

    def sample_cpu(self) -> None:
        process = psutil.Process()
        while True:
            times = process.cpu_times()
            self.cpu.append(CpuReading(self.worker, time.time(), times.user + times.system))
            gevent.sleep(1.0)


def recorder_of(environment: Environment) -> Recorder:
    return environment.qmax_recorder  # type: ignore[attr-defined]


@dataclass
class Store:
    """On the master (or the one local process): every process's samples, merged."""

    samples: list[Sample] = field(default_factory=list)
    cpu: list[CpuReading] = field(default_factory=list)
    # worker → (time of its last report, starts of the requests it had open then)
    open_state: dict[str, tuple[float, list[float]]] = field(default_factory=dict)

    def merge(self, report: dict[str, Any]) -> None:
        worker = report["worker"]
        self.samples.extend(Sample.from_wire(row) for row in report["samples"])
        self.cpu.extend(CpuReading(worker, ts, cpu_s) for ts, cpu_s in report["cpu"])
        self.open_state[worker] = (report["at"], list(report["open"]))

    def settled(self, at: float) -> bool:
        """Every process reported after `at`, and nothing open then had started before `at`."""
        return bool(self.open_state) and all(
            seen >= at and min(starts, default=at) >= at
            for seen, starts in self.open_state.values()
        )

    def reported_since(self, at: float) -> bool:
        """Every process reported after `at`: every request that ended before `at` is in."""
        return bool(self.open_state) and all(seen >= at for seen, _ in self.open_state.values())

    def open_starts(self) -> list[float]:
        return [start for _, starts in self.open_state.values() for start in starts]


# --------------------------------------------------------------------------- timing


@dataclass
class RequestTiming:
    """What a transport reports while it reads one response stream."""

    start: float = field(default_factory=time.time)
    started: float = field(default_factory=time.perf_counter)
    ttfab_ms: float | None = None
    outcome: Outcome | None = None
    detail: str = ""
    server_first_chunk_ms: float | None = None
    heard: PlaybackTracker = field(default_factory=PlaybackTracker)

    def first_audio(self) -> None:
        if self.ttfab_ms is None:
            self.ttfab_ms = (time.perf_counter() - self.started) * 1000

    def audio(self, event: dict[str, Any]) -> None:
        """A chunk arrived now: feed its duration to the listener model (measure.playback)."""
        data, rate = event.get("data"), event.get("sampling_rate")
        if isinstance(data, str) and isinstance(rate, int) and rate > 0:
            self.heard.add(time.perf_counter(), base64_audio_seconds(data, rate))

    def done(self) -> None:
        self.outcome = Outcome.OK

    def fail(self, detail: str, outcome: Outcome = Outcome.ERROR) -> None:
        self.outcome, self.detail = outcome, detail


@contextmanager
def timed_request(environment: Environment) -> Iterator[RequestTiming]:
    """Time one request: record its raw sample and fire TTFAB and total latency as Locust metrics.

    Exceptions are recorded as errors and re-raised; a greenlet killed at the end of a rung
    leaves a `cancelled` sample (its time in flight still counts toward the rung's load).
    """
    recorder = recorder_of(environment)
    rung = recorder.rung
    timing = RequestTiming()
    token = recorder.opened(timing.start)
    try:
        yield timing
        if timing.outcome is None:
            timing.fail("stream ended without a done event")
    except GreenletExit:
        timing.outcome = Outcome.CANCELLED
        raise
    except Exception as exc:
        timing.fail(f"{type(exc).__name__}: {exc}")
        raise
    finally:
        latency_ms = (time.perf_counter() - timing.started) * 1000
        outcome = timing.outcome or Outcome.ERROR
        heard = timing.heard.result()
        sample = Sample(
            rung,
            recorder.worker,
            timing.start,
            time.time(),
            timing.ttfab_ms,
            latency_ms,
            outcome,
            timing.detail,
            timing.server_first_chunk_ms,
            audio_ms=heard.audio_s * 1000 if heard.audio_s else None,
            stall_ms=heard.stall_s * 1000 if heard.audio_s else None,
        )
        recorder.closed(token, sample)
        if outcome is not Outcome.CANCELLED:
            fire_metrics(environment, recorder.transport, sample)


def fire_metrics(environment: Environment, transport: Transport, sample: Sample) -> None:
    failure = (
        None if sample.outcome is Outcome.OK else Exception(f"{sample.outcome}: {sample.detail}")
    )
    context = {"rung": sample.rung}
    request_type = transport.value
    if sample.ttfab_ms is not None:
        environment.events.request.fire(
            request_type=request_type,
            name=TTFAB_ENTRY,
            response_time=sample.ttfab_ms,
            response_length=0,
            exception=None,
            context=context,
        )
    environment.events.request.fire(
        request_type=request_type,
        name=LATENCY_ENTRY,
        response_time=sample.latency_ms,
        response_length=0,
        exception=failure,
        context=context,
    )


def read_event(raw: bytes | str, timing: RequestTiming, context_id: str) -> bool:
    """Apply one stream event to `timing`; True when the stream is over."""
    event = json.loads(raw)
    if event.get("context_id") not in (None, context_id):
        return False
    kind = event.get("type")
    if kind == "chunk":
        timing.first_audio()
        timing.audio(event)
    elif kind == "done":
        timing.done()
        server_ms = event.get("first_chunk_latency_ms")
        if isinstance(server_ms, int | float):
            timing.server_first_chunk_ms = float(server_ms)
        return True
    elif kind == "error":
        timing.fail(f"{event.get('status_code')}: {event.get('error')}")
        return True
    return False


def utterances(environment: Environment) -> Iterator[Utterance]:
    """Each user walks the corpus from its own random starting point."""
    corpus = recorder_of(environment).corpus
    offset = random.randrange(len(corpus))
    return itertools.islice(itertools.cycle(corpus), offset, None)


# --------------------------------------------------------------------------- users


class HttpLadderUser(FastHttpUser):
    """local-http: POST /invocations, read the jsonlines stream event by event."""

    network_timeout = 70.0
    connection_timeout = 10.0

    def on_start(self) -> None:
        self.texts = utterances(self.environment)

    @task
    def speak(self) -> None:
        context_id = uuid.uuid4().hex[:12]
        body = next(self.texts).request(context_id)
        with (
            timed_request(self.environment) as timing,
            self.client.post(
                "/invocations",
                json=body,
                stream=True,
                name=HEADERS_ENTRY,
                catch_response=True,
                headers={"Accept": "application/jsonlines"},
            ) as response,
        ):
            if response.status_code != 200:
                text = (response.text or "")[:200]
                saturated = response.status_code == 503 and "queue_saturated" in text
                timing.fail(
                    f"HTTP {response.status_code}: {text}",
                    Outcome.REJECTED if saturated else Outcome.ERROR,
                )
                response.failure(f"HTTP {response.status_code}")
                return
            response.success()
            # readline with an explicit separator: the true arrival time of each event.
            while line := response.stream.readline(b"\n"):
                if line.strip() and read_event(line, timing, context_id):
                    break


class WsLadderUser(User):
    """local-ws: one WebSocket per user, one request object per message, events back as text."""

    def on_start(self) -> None:
        self.texts = utterances(self.environment)
        self.socket: websocket.WebSocket | None = None

    def on_stop(self) -> None:
        if self.socket is not None:
            self.socket.close()

    def _connect(self) -> websocket.WebSocket:
        base = (self.host or self.environment.host or "").rstrip("/")
        url = "ws" + base.removeprefix("http") + "/invocations-bidirectional-stream"
        return websocket.create_connection(url, timeout=70)

    @task
    def speak(self) -> None:
        if self.socket is None:
            self.socket = self._connect()
        context_id = uuid.uuid4().hex[:12]
        body = next(self.texts).request(context_id)
        try:
            with timed_request(self.environment) as timing:
                self.socket.send(json.dumps(body))
                while not read_event(self.socket.recv(), timing, context_id):
                    pass
        except (websocket.WebSocketException, OSError):
            self.socket = None  # reconnect on the next request
            raise


# The SageMaker users live beside this file; Locust puts this folder on the import path only
# while it loads the file, other loaders (tests/ladder/shape_probe.py) not at all.
if (_HERE := str(Path(__file__).resolve().parent)) not in sys.path:
    sys.path.insert(0, _HERE)
from bidi_stream_user import BidiStreamUser  # noqa: E402
from sagemaker_users import LadderHooks, ResponseStreamUser  # noqa: E402

LADDER_HOOKS = LadderHooks(timed_request, read_event, utterances)


class ResponseStreamLadderUser(ResponseStreamUser):
    """response-stream, bound to this ladder's request timing."""

    hooks = LADDER_HOOKS


class BidiStreamLadderUser(BidiStreamUser):
    """bidi-stream, bound to this ladder's request timing."""

    hooks = LADDER_HOOKS


USER_CLASSES: dict[Transport, type[User]] = {
    Transport.LOCAL_HTTP: HttpLadderUser,
    Transport.LOCAL_WS: WsLadderUser,
    Transport.RESPONSE_STREAM: ResponseStreamLadderUser,
    Transport.BIDI_STREAM: BidiStreamLadderUser,
}


# --------------------------------------------------------------------------- shape


class QmaxLadderShape(LoadTestShape):
    """Hold each rung's N users for `hold_s`, then `idle_s` with none; stop after the last.

    Settings are class attributes (set from the ladder flags at start-up); `tick()` depends
    only on the run time. Stopping early after a failing rung is the judge's job, not the shape's.
    """

    rungs: tuple[int, ...] = DEFAULT_RUNGS
    """Concurrency levels (users), strictly ascending."""
    hold_s: float = DEFAULT_HOLD_S
    """Seconds each rung is held."""
    measure_s: float = DEFAULT_MEASURE_S
    """Trailing seconds of each hold whose samples make the rung's statistics."""
    idle_s: float = DEFAULT_IDLE_S
    """Seconds with no users between rungs (the last rung idles at least `final_drain_s`)."""
    final_drain_s: float = FINAL_DRAIN_S
    """Seconds after the last rung for the last requests and worker reports to arrive."""
    max_hold_s: float | None = None
    """--max-hold-s: the longest an unstable rung (or probe) is held; None: never extended."""
    extended_s: tuple[float, ...] = ()
    """Seconds each coarse rung's hold was extended so far, set by the conductor."""
    held_open: Phase | None = None
    """The rung (or probe) awaiting its stability verdict: its users stay on past its end until
    the conductor extends it or lets it end (only with `max_hold_s`)."""
    user_class: type[User] | None = None
    """The transport's user class; None lets Locust use every user class in the file."""

    start_epoch: float = 0.0
    coarse_end_s: float | None = None
    """Set when refinement begins: the coarse schedule ends here and the probes follow."""
    probes: tuple[Phase, ...] = ()
    """Refinement probes (run-time seconds), appended by the conductor before each begins."""
    refining: bool = False
    """While true, the run idles (0 users) between probes instead of ending."""

    def reset_time(self) -> None:
        super().reset_time()
        self.start_epoch = time.time()

    def schedule(self) -> LadderSchedule:
        return LadderSchedule(
            self.rungs, self.hold_s, self.measure_s, self.idle_s, self.final_drain_s,
            self.max_hold_s, self.extended_s,
        )  # fmt: skip

    def extend_rung(self, schedule: LadderSchedule) -> None:
        """Take the extended schedule; a held-open rung grows with it."""
        self.extended_s = schedule.extended_s

    def extend_probe(self, seconds: float) -> Phase:
        """The last probe held `seconds` longer."""
        last = self.probes[-1]
        longer = Phase(last.users, last.start_s, last.end_s + seconds, last.rung)
        self.probes = (*self.probes[:-1], longer)
        return longer

    def begin_refinement(self, coarse_end_s: float) -> None:
        self.coarse_end_s, self.refining = coarse_end_s, True

    def add_probe(self, users: int, start_s: float) -> Phase:
        phase = Phase(users, start_s, start_s + self.hold_s, users)
        self.probes = (*self.probes, phase)
        return phase

    def end_refinement(self) -> None:
        self.refining = False

    def phase_now(self) -> Phase | None:
        """The phase at the current run time: coarse, then probes once refinement began."""
        t = self.get_run_time()
        if self.held_open is not None and t >= self.held_open.start_s:
            return self.held_open
        if self.coarse_end_s is None or t < self.coarse_end_s:
            return self.schedule().phase_at(t)
        probe = next((p for p in self.probes if p.start_s <= t < p.end_s), None)
        if probe is not None:
            return probe
        last_end = max([self.coarse_end_s, *(p.end_s for p in self.probes)])
        if self.refining or t < last_end + self.final_drain_s:
            return Phase(0, t, t, None)
        return None

    def tick(self) -> tuple[int, float] | tuple[int, float, list[type[User]]] | None:
        phase = self.phase_now()
        if phase is None:
            return None
        rate = float(max(self.rungs))  # a rung starts (and ends) at once
        if self.user_class is None:
            return phase.users, rate
        return phase.users, rate, [self.user_class]


# --------------------------------------------------------------------------- conductor


@dataclass
class Conductor:
    """On the master (or the one local process): announce rungs, show progress, judge, write."""

    environment: Environment
    runner: Runner
    shape: QmaxLadderShape
    transport: Transport
    slo_ms: float
    out: Path
    fingerprint: Fingerprint | None = None
    source: str = ""
    refine_pct: float | None = None  # --refine: bisect a bracketed ladder to this precision
    underrun_slo: float | None = None  # --underrun-slo: a rung with more stalled streams fails
    provenance_kind: ProvenanceKind = "measured"
    store: Store = field(default_factory=Store)
    greenlet: gevent.Greenlet | None = None
    refiner: gevent.Greenlet | None = None
    # Refinement: each probe's level, measure window (epoch) and extension, and why it ended.
    probe_windows: list[tuple[int, float, float, float]] = field(default_factory=list)
    refine_ended_by: str | None = None
    written: Path | None = None
    # The web UI's "Ladder" tab: one row per rung or probe, live while held, final once judged.
    board: dict[int, dict[str, Any]] = field(default_factory=dict)

    def collect(self) -> None:
        """Pull the local process's samples (in distributed runs workers push theirs)."""
        if not isinstance(self.runner, MasterRunner):
            self.store.merge(recorder_of(self.environment).drain())

    def start(self) -> None:
        self.greenlet = gevent.spawn(self.run)

    def run(self) -> None:
        """Announce each rung to every process and show progress; a judge per rung decides.

        With --max-hold-s a rung whose window is unstable is held longer first (`extend`)."""
        t0 = self.shape.start_epoch
        total = len(self.shape.rungs)
        try:
            for index, users in enumerate(self.shape.rungs):
                schedule = self.shape.schedule()
                rung_start = t0 + schedule.rung_start_s(index)
                w0, w1 = (t0 + s for s in schedule.window_s(index))
                label = f"rung {index + 1}/{total}"
                end = t0 + schedule.worst_case().duration_s
                if self.shape.max_hold_s is not None:
                    self.shape.held_open = schedule.rung_phase(index)
                w0, w1 = self.hold(
                    label,
                    users,
                    rung_start,
                    w0,
                    w1,
                    end,
                    lambda _a, _b, i=index: self.extend_rung(i),
                )
                self.shape.held_open = None
                gevent.spawn(self.judge, users, w0, w1)
        finally:  # killed after a failing rung: let the shape move on (a probe's is not ours)
            held, coarse_end = self.shape.held_open, self.shape.coarse_end_s
            if held is not None and (coarse_end is None or held.start_s < coarse_end):
                self.shape.held_open = None

    def extend_rung(self, index: int) -> tuple[float, float] | None:
        """Coarse rung `index`'s window just closed: its next window when it is extended."""
        schedule = self.shape.schedule()
        users = schedule.rungs[index]
        self.await_reports(self.shape.start_epoch + schedule.window_s(index)[1])
        longer = extend_unstable(schedule, index, self.store.samples, self.shape.start_epoch)
        if longer is None:
            return None
        self.shape.extend_rung(longer)
        self.shape.held_open = longer.rung_phase(index)
        w0, w1 = (self.shape.start_epoch + s for s in longer.window_s(index))
        self.log_extension(users, longer.rung_hold_s(index), w1)
        return w0, w1

    def extend_probe(self, users: int, w0: float, w1: float) -> tuple[float, float] | None:
        """The last probe's window [w0, w1) just closed: its next window when it is extended."""
        self.await_reports(w1)
        probe = self.shape.probes[-1]
        steady = window_stability(self.store.samples, users, (w0, w1))
        held = probe.end_s - probe.start_s
        seconds = hold_extension_s(held, self.shape.measure_s, self.shape.max_hold_s, steady.stable)
        if not seconds:
            return None
        self.shape.held_open = self.shape.extend_probe(seconds)
        self.log_extension(users, held + seconds, w1 + seconds)
        return w0 + seconds, w1 + seconds

    def log_extension(self, users: int, hold_s: float, w1: float) -> None:
        row = self.board.get(users)
        if row is not None:
            row["hold_s"] = f"{hold_s:.0f}"
        logger.info(
            "c=%d: its window was unstable; held to %.0f s (at most %g s), judged again in %.0f s",
            users,
            hold_s,
            self.shape.max_hold_s,
            w1 - time.time(),
        )

    def await_reports(self, at: float) -> None:
        """Until every process has reported since `at` (the users stay on meanwhile)."""
        deadline = at + SETTLE_LIMIT_S
        while True:
            self.collect()
            if self.store.reported_since(at) or time.time() > deadline:
                return
            gevent.sleep(0.25)

    def hold(
        self,
        label: str,
        users: int,
        rung_start: float,
        w0: float,
        w1: float,
        end: float,
        extend: Callable[[float, float], tuple[float, float] | None],
    ) -> tuple[float, float]:
        """Tell every process the rung from its start to its window's end; log progress. With
        --max-hold-s, `extend` then gives the next window while the rung is held longer.
        Returns the window the rung is judged on."""
        gevent.sleep(max(0.0, rung_start - time.time()))
        self.runner.send_message(RUNG_MESSAGE, {"rung": users})
        while True:
            while (now := time.time()) < w1:
                gevent.sleep(min(PROGRESS_EVERY_S, max(0.05, w1 - now)))
                if time.time() < w1 - 0.5:
                    self.progress(label, users, rung_start, w0, w1, end)
            if self.shape.max_hold_s is None or (window := extend(w0, w1)) is None:
                break
            w0, w1 = window
        self.runner.send_message(RUNG_MESSAGE, {"rung": None})
        return w0, w1

    def progress(
        self, label: str, users: int, rung_start: float, w0: float, w1: float, end: float
    ) -> None:
        self.collect()
        now = time.time()
        since = max(rung_start, now - 10.0)
        live = live_figures(self.store.samples, self.store.open_starts(), users, since, now)
        p95 = "-" if live.ttfab_p95_ms is None else f"{live.ttfab_p95_ms:.0f} ms"
        where = f"window opens in {w0 - now:.0f} s" if now < w0 else "measuring"
        self.board[users] = board_row(
            label, users, where, live.ttfab_p95_ms, None, live.in_flight, live.playback, None,
            f"{w1 - rung_start:.0f}",
        )  # fmt: skip
        logger.info(
            "%s c=%d: %.0f s left in hold (%s); last 10 s: p95 TTFAB %s over %d requests, "
            "%.2f in flight; at most %s left in the ladder",
            label,
            users,
            w1 - now,
            where,
            p95,
            live.finished,
            live.in_flight,
            format_duration(max(0.0, end - now)),
        )

    def measure(self, users: int, w0: float, w1: float) -> Rung:
        """Wait until the window's requests are all reported, then the rung's statistics."""
        deadline = w1 + SETTLE_LIMIT_S
        delay = WORKER_REPORT_INTERVAL + 0.5 if isinstance(self.runner, MasterRunner) else 0.0
        gevent.sleep(max(0.0, w1 + delay - time.time()))
        while True:
            self.collect()
            if self.store.settled(w1) or time.time() > deadline:
                break
            gevent.sleep(0.25)
        rung = rung_statistics(
            self.store.samples, self.store.cpu, users, (w0, w1), self.slo_ms, self.underrun_slo
        )
        p95 = "-" if rung.ttfab_p95_ms is None else f"{rung.ttfab_p95_ms:.0f} ms"
        verdict = (
            f"unusable ({rung.unusable_reason})"
            if not rung.usable
            else ("passes" if rung.meets_slo else "fails the SLO")
        )
        stalls = "-" if rung.underrun_share is None else f"{rung.underrun_share:.0%}"
        row = self.board.get(users, {})
        self.board[users] = board_row(
            row.get("rung", f"c={users}"), users, verdict, rung.ttfab_p95_ms, rung.achieved_rps,
            rung.client_mean_in_flight, rung, rung.stable, row.get("hold_s", "-"),
        )  # fmt: skip
        logger.info(
            "rung c=%d %s: p95 TTFAB %s (SLO %g ms), %.2f rps, %d ok / %d done, %.2f in flight, "
            "%s, underrun %s",
            users,
            verdict,
            p95,
            self.slo_ms,
            rung.achieved_rps,
            rung.ok,
            rung.completed,
            rung.client_mean_in_flight,
            "stable" if rung.stable else "UNSTABLE",
            stalls,
        )
        return rung

    def judge(self, users: int, w0: float, w1: float) -> None:
        """Judge a coarse rung; after the first failure stop, or bisect when it bracketed."""
        rung = self.measure(users, w0, w1)
        if rung.passes:
            return
        logger.info("the coarse ladder stops after its first failing rung (c=%d)", users)
        if self.greenlet is not None:
            self.greenlet.kill(block=False)
        bracket = self.bracket(w1)
        if self.refine_pct is None or bracket is None:
            gevent.spawn(self.quit_when_steady)
            return
        self.shape.begin_refinement(w1 - self.shape.start_epoch)
        self.refiner = gevent.spawn(self.refine, bracket)

    def bracket(self, closed_at: float) -> Bracket | None:
        """The coarse ladder's bracket once the rung whose window ends at `closed_at` is judged."""
        rungs = ladder_rungs(
            self.store.samples,
            self.store.cpu,
            self.shape.schedule(),
            self.shape.start_epoch,
            self.slo_ms,
            closed_at + 1e-6,
            self.underrun_slo,
        )
        return coarse_bracket(rungs)

    def refine(self, bracket: Bracket) -> None:
        """Hold the bisection's probes one after another until the bracket is fine enough."""
        pct = self.refine_pct or DEFAULT_REFINE_PCT
        self.refine_ended_by = "interrupted"
        worst = worst_case_probes(bracket, pct)
        logger.info(
            "refining Q_max between %d (passes) and %d (fails) to max(1 user, %g %%): at most "
            "%d probes",
            bracket.lo,
            bracket.hi,
            pct,
            worst,
        )
        t0 = self.shape.start_epoch
        done = 0
        while (probe := next_probe(bracket, pct)) is not None:
            start_s = self.shape.get_run_time() + max(self.shape.idle_s, 1.0)
            phase = self.shape.add_probe(probe, start_s)
            w1 = t0 + phase.end_s
            w0 = w1 - self.shape.measure_s
            longest = self.shape.schedule().longest_hold_s
            left = (worst - done) * (longest + max(self.shape.idle_s, 1.0))
            label = f"probe {done + 1} of at most {worst}"
            if self.shape.max_hold_s is not None:
                self.shape.held_open = phase
            try:
                w0, w1 = self.hold(
                    label, probe, t0 + start_s, w0, w1, time.time() + left,
                    lambda a, b: self.extend_probe(probe, a, b),
                )  # fmt: skip
            finally:
                self.shape.held_open = None
            rung = self.measure(probe, w0, w1)
            held = self.shape.probes[-1]
            self.probe_windows.append(
                (probe, w0, w1, held.end_s - held.start_s - self.shape.hold_s)
            )
            done += 1
            if not rung.usable:
                self.refine_ended_by = "client-bound"
                break
            bracket = narrow(bracket, probe, rung.meets_slo)
        else:
            self.refine_ended_by = "resolution"
        logger.info(
            "refined: Q_max %d, failing at %d (resolution %d users, %s)",
            bracket.lo,
            bracket.hi,
            bracket.gap,
            self.refine_ended_by,
        )
        self.shape.end_refinement()
        self.quit_when_steady()

    def quit_when_steady(self) -> None:
        """Quit once the shape's last change has taken effect (two overlapping stops of the
        same users make Locust raise), or after a few seconds regardless."""
        deadline = time.time() + 10.0
        while time.time() < deadline:
            phase = self.shape.phase_now()
            if phase is None or self.runner.user_count == phase.users:
                break
            gevent.sleep(0.2)
        self.runner.quit()

    def refinement(self, coarse: list[Rung]) -> Refinement | None:
        """The probes recomputed from all samples, when the ladder was refined."""
        if self.refine_pct is None or self.refine_ended_by is None:
            return None
        if coarse_bracket(coarse) is None:
            return None
        probes = [
            RefinementProbe(
                rung=rung_statistics(
                    self.store.samples, self.store.cpu, n, (w0, w1), self.slo_ms, self.underrun_slo
                ),
                window_start_epoch=w0,
                window_end_epoch=w1,
                extended_s=extended,
            )
            for n, w0, w1, extended in self.probe_windows
        ]
        return build_refinement(coarse, probes, self.refine_pct, self.refine_ended_by)

    def finish(self) -> None:
        """Compute every closed rung from all samples and write the artifact and its samples."""
        for greenlet in (self.greenlet, self.refiner):
            if greenlet is not None:
                greenlet.kill(block=False)
        self.collect()
        if self.fingerprint is None:
            return
        schedule = self.shape.schedule()
        rungs = ladder_rungs(
            self.store.samples,
            self.store.cpu,
            schedule,
            self.shape.start_epoch,
            self.slo_ms,
            time.time(),
            self.underrun_slo,
        )
        if not rungs:
            logger.error("no rung finished its measure window: nothing to write")
            self.environment.process_exit_code = 2
            return
        provenance = Provenance.now(
            self.provenance_kind,
            self.source,
            command=" ".join(["locust", *sys.argv[1:]]),
        )
        artifact = build_qmax_artifact(
            rungs,
            self.fingerprint,
            schedule,
            self.slo_ms,
            provenance,
            self.shape.start_epoch,
            underrun_slo_share=self.underrun_slo,
            refinement=self.refinement(rungs),
        )
        try:
            path = write_artifact(
                artifact, self.out, qmax_filename(self.fingerprint, self.provenance_kind)
            )
        except TtsBenchError as exc:
            logger.error("%s", exc)
            self.environment.process_exit_code = 2
            return
        write_samples(samples_path(path), self.store.samples)
        self.written = path
        self.environment.process_exit_code = 0
        logger.info(
            "wrote %s (Q_max %s at %g ms, %s%s)",
            path,
            artifact.refined_q_max,
            self.slo_ms,
            "bracketed" if artifact.bracketed else "not bracketed",
            ""
            if artifact.refinement is None
            else f", refined to {artifact.refinement.q_max_resolution} user(s)",
        )


def board_row(
    label: str,
    users: int,
    status: str,
    ttfab_p95_ms: float | None,
    rps: float | None,
    in_flight: float,
    heard: Any,
    stable: bool | None,
    hold: str = "-",
) -> dict[str, Any]:
    """One row of the web UI's Ladder tab (playback figures from a Rung or PlaybackFigures;
    `hold`: the seconds the rung is held so far, extensions included)."""

    def fmt(value: float | None, spec: str) -> str:
        return "-" if value is None else format(value, spec)

    return {
        "rung": label,
        "users": users,
        "status": status,
        "ttfab_p95_ms": fmt(ttfab_p95_ms, ".0f"),
        "rps": fmt(rps, ".2f"),
        "in_flight": fmt(in_flight, ".2f"),
        "rtf_p50": fmt(heard.rtf_p50, ".2f"),
        "rtf_p95": fmt(heard.rtf_p95, ".2f"),
        "underrun_share": fmt(
            None if heard.underrun_share is None else 100 * heard.underrun_share, ".0f"
        ),
        "stall_ms_p95": fmt(heard.stall_ms_p95, ".0f"),
        "stable": "-" if stable is None else ("yes" if stable else "no"),
        "hold_s": hold,
    }


BOARD_TAB = "ladder"
BOARD_COLUMNS = (
    ("rung", "Rung"), ("users", "Users"), ("status", "Window / verdict"),
    ("ttfab_p95_ms", "p95 TTFAB (ms)"), ("rps", "Achieved rps"), ("in_flight", "In flight"),
    ("rtf_p50", "RTF p50"), ("rtf_p95", "RTF p95"), ("underrun_share", "Underrun %"),
    ("stall_ms_p95", "Stall p95 (ms)"), ("stable", "Stable"), ("hold_s", "Hold (s)"),
)  # fmt: skip


def add_ladder_tab(environment: Environment, conductor: Conductor) -> None:
    """A "Ladder" tab in Locust's web UI: the rung held, its window and playback, as it runs
    (Locust's extended tabs: the table's rows ride on each /stats/requests answer)."""
    web_ui = environment.web_ui
    if web_ui is None:
        return
    web_ui.template_args["extended_tabs"] = [{"title": "Ladder", "key": BOARD_TAB}]
    web_ui.template_args["extended_tables"] = [
        {"key": BOARD_TAB, "structure": [{"key": k, "title": t} for k, t in BOARD_COLUMNS]}
    ]

    @web_ui.app.after_request
    def add_board(response: Any) -> Any:
        from flask import request

        if request.path != "/stats/requests" or not response.is_json:
            return response
        rows = list(conductor.board.values())
        extended = [{"key": BOARD_TAB, "data": rows}]
        response.set_data(json.dumps({**response.get_json(), "extended_stats": extended}))
        return response


def conductor_of(environment: Environment) -> Conductor | None:
    return getattr(environment, "qmax_conductor", None)


# --------------------------------------------------------------------------- wiring


def check_target(conductor: Conductor) -> None:
    """Fingerprint the server from its /ping (SageMaker: from the endpoint's Model); refuse a
    bounded queue or a server not ready."""
    if not conductor.transport.is_local:
        options = conductor.environment.parsed_options
        if not options.endpoint:
            raise RefusalError(f"--transport {conductor.transport.value} needs --endpoint NAME")
        target = read_target_from_environment(
            options.region,
            options.endpoint,
            options.variant or DEFAULT_VARIANT,
            conductor.transport,
            options.model,
        )
        target.refuse_curve_modelled()
        target.refuse_not_in_service()
        target.refuse_bounded()
        conductor.fingerprint, conductor.source = target.fingerprint, target.source
        conductor.provenance_kind = target.provenance_kind
        return
    host = conductor.environment.host
    if not host:
        raise RefusalError("no target: pass --host http://127.0.0.1:8080")
    ping = fetch_ping(host)
    ping.refuse_curve_modelled()
    ping.refuse_bounded()
    if not ping.ready:
        raise RefusalError(f"{host}/ping says {ping.status!r}: wait until the server is ready")
    conductor.fingerprint = ping.fingerprint(conductor.transport)
    conductor.source = host


@events.init.add_listener
def on_init(environment: Environment, runner: Runner, **_kw: Any) -> None:
    recorder = Recorder(worker=f"{socket.gethostname()}:{os.getpid()}")
    environment.qmax_recorder = recorder  # type: ignore[attr-defined]
    runner.register_message(RUNG_MESSAGE, recorder.on_rung_message)
    if isinstance(runner, WorkerRunner):
        # Raw samples reach the master only with the stats reports.
        environment.events.report_to_master.add_listener(
            lambda data, **_: data.update(qmax=recorder.drain())
        )
        return
    options = environment.parsed_options
    shape = environment.shape_class
    try:
        transport = Transport(options.transport)
        refuse_transport(transport)
        schedule = schedule_from_options(options)
        load_corpus(options.corpus)
        if not isinstance(shape, QmaxLadderShape):
            raise RefusalError(
                "this file's QmaxLadderShape must drive the test (do not pass --class-picker)"
            )
        conductor = Conductor(
            environment, runner, shape, transport, options.slo_ms, Path(options.out)
        )
        if options.refine is not None:
            conductor.refine_pct = check_refine_pct(options.refine)
        if options.underrun_slo is not None:
            conductor.underrun_slo = check_underrun_slo(options.underrun_slo)
        if environment.host or not transport.is_local:
            check_target(conductor)
    except TtsBenchError as exc:
        logger.error("refused: %s", exc)
        sys.exit(exc.exit_code)
    shape.rungs, shape.hold_s = schedule.rungs, schedule.hold_s
    shape.measure_s, shape.idle_s = schedule.measure_s, schedule.idle_s
    shape.max_hold_s, shape.extended_s = schedule.max_hold_s, ()
    shape.user_class = USER_CLASSES[transport]
    environment.qmax_conductor = conductor  # type: ignore[attr-defined]
    add_ladder_tab(environment, conductor)
    if isinstance(runner, MasterRunner):
        environment.events.worker_report.add_listener(
            lambda client_id, data, **_: (
                conductor.store.merge(data["qmax"]) if "qmax" in data else None
            )
        )


@events.test_start.add_listener
def on_test_start(environment: Environment, **_kw: Any) -> None:
    recorder = recorder_of(environment)
    options = environment.parsed_options
    recorder.transport = Transport(options.transport)
    recorder.corpus = load_corpus(options.corpus)
    if not isinstance(environment.runner, MasterRunner) and recorder.cpu_sampler is None:
        recorder.cpu_sampler = gevent.spawn(recorder.sample_cpu)
    if isinstance(environment.runner, WorkerRunner):
        return
    conductor = conductor_of(environment)
    if conductor is None:
        return
    if conductor.fingerprint is None:  # web UI: the host was chosen after start-up
        try:
            check_target(conductor)
        except TtsBenchError as exc:
            logger.error("refused: %s", exc)
            environment.process_exit_code = exc.exit_code
            gevent.spawn(environment.runner.quit)
            return
    conductor.start()


@events.quitting.add_listener
def on_quitting(environment: Environment, **_kw: Any) -> None:
    conductor = conductor_of(environment)
    if conductor is not None:
        conductor.finish()
