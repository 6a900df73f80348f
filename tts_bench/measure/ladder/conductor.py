"""The ladder's conductor on the master (or the one local process): the waits between decisions.

It tells every load-generating process which rung is held, shows progress, waits until a
window's samples are all in, asks `LadderRun` for the verdict, stops the coarse ladder after its
first failing rung, holds refinement's probes, quits, and writes the artifact. Its loops run on
gevent (Locust's), one greenlet for the coarse ladder, one per judgement, one for refinement;
what it needs of Locust comes in as plain callables, so this module imports none of it.

`target_of` fingerprints what is measured before the first request: a local server from its
`/ping`, a SageMaker endpoint from its Model.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import gevent

from tts_bench.artifacts.files import write_artifact
from tts_bench.artifacts.fingerprint import Fingerprint, qmax_filename
from tts_bench.artifacts.provenance import Provenance, ProvenanceKind
from tts_bench.artifacts.rungs import Rung
from tts_bench.deployment import DEFAULT_VARIANT
from tts_bench.errors import RefusalError, TtsBenchError
from tts_bench.measure.ladder.flags import LadderOptions
from tts_bench.measure.ladder.raw_record import QmaxRaw, raw_path, write_raw
from tts_bench.measure.ladder.refine import (
    DEFAULT_REFINE_PCT,
    Bracket,
    narrow,
    next_probe,
    worst_case_probes,
)
from tts_bench.measure.ladder.run import LadderRun, RefineEnd, Window
from tts_bench.measure.ladder.state import ShapeSnapshot
from tts_bench.measure.ladder.store import Recorder
from tts_bench.measure.sagemaker_target import read_target_from_environment
from tts_bench.measure.samples import samples_path, write_samples
from tts_bench.serving.server_ping import CURVE_MODEL, STAND_IN_MODEL, fetch_ping

logger = logging.getLogger("qmax")

RUNG_MESSAGE = "qmax_rung"
CURVE_CHECK_NOTE = (
    "--curve-check: a curve instance with set service times, a check of the ladder against a "
    "known truth; no engine was measured"
)
PROGRESS_EVERY_S = 5.0
# How long the judge waits for the requests in flight at a window's end to finish (the server
# ends every invocation within SageMaker's 60 s ceiling).
SETTLE_LIMIT_S = 70.0


@dataclass(frozen=True, slots=True)
class LadderTarget:
    """What the ladder measures: its fingerprint, where it is, and what kind of record it makes."""

    fingerprint: Fingerprint
    source: str
    provenance_kind: ProvenanceKind = "measured"
    notes: str | None = None  # the provenance's: a --curve-check says what was measured


def target_of(host: str | None, options: LadderOptions) -> LadderTarget:
    """Fingerprint the server at `host` from its /ping (SageMaker: the endpoint's Model, from
    the ladder flags `options`); refuse a bounded queue or a server not ready."""
    transport = options.transport
    if not transport.is_local:
        if not options.endpoint:
            raise RefusalError(f"--transport {transport.value} needs --endpoint NAME")
        target = read_target_from_environment(
            options.region,
            options.endpoint,
            options.variant or DEFAULT_VARIANT,
            transport,
            options.model,
        )
        target.refuse_curve_check_mismatch(options.curve_check)
        target.refuse_not_in_service()
        target.refuse_bounded()
        fingerprint = under_contract(target.fingerprint, options)
        if options.curve_check:  # a curve cloud's instances: no engine measured
            return LadderTarget(fingerprint, target.source, "simulated", CURVE_CHECK_NOTE)
        return LadderTarget(fingerprint, target.source, target.provenance_kind)
    return local_target(host, options)


def local_target(host: str | None, options: LadderOptions) -> LadderTarget:
    """A local server, fingerprinted from its /ping. A test's stand-in of another vendor's
    container says so there (`STAND_IN_MODEL`): what is measured on it is emulated."""
    if not host:
        raise RefusalError("no target: pass --host http://127.0.0.1:8080")
    ping = fetch_ping(host)
    if options.curve_check:
        if ping.instance_model != CURVE_MODEL:
            raise RefusalError(
                f"--curve-check: {host} is not a curve instance (its /ping names no "
                "instance_model curve); leave the flag out to measure it"
            )
    else:
        ping.refuse_curve_modelled()
    ping.refuse_bounded()
    if not ping.ready:
        raise RefusalError(f"{host}/ping says {ping.status!r}: wait until the server is ready")
    fingerprint = under_contract(ping.fingerprint(options.transport), options)
    if options.curve_check:  # service times drawn from a set law: no engine measured
        return LadderTarget(fingerprint, host, "simulated", CURVE_CHECK_NOTE)
    kind: ProvenanceKind = "emulated" if ping.instance_model == STAND_IN_MODEL else "measured"
    return LadderTarget(fingerprint, host, kind)


def under_contract(fingerprint: Fingerprint, options: LadderOptions) -> Fingerprint:
    """The fingerprint naming the ladder's contract (unchanged under Kokoro's)."""
    return fingerprint.model_copy(update={"contract": options.contract.ref})


class Runner(Protocol):
    """What the conductor needs of Locust's runner."""

    user_count: int

    def send_message(self, msg_type: str, data: Any = None) -> None: ...

    def stop(self) -> None: ...

    def quit(self) -> None: ...


class Shape(Protocol):
    """What the conductor needs of the Locust shape: its run time and the snapshot it reads."""

    state: ShapeSnapshot

    def get_run_time(self) -> float: ...


@dataclass
class Conductor:
    """Announce rungs, show progress, judge, refine, quit, write: the ladder's waits on gevent."""

    run: LadderRun
    runner: Runner
    out: Path
    run_time: Callable[[], float]  # the shape's run time, seconds
    collect: Callable[[], None]  # pull the local process's samples into the store
    report_delay_s: float = 0.0  # distributed: a worker's report may lag its samples this long
    target: LadderTarget | None = None
    exit_code: Callable[[int], None] = lambda _code: None
    # Headless, the ladder's end ends Locust; in the web UI it stops the test and the UI stays.
    ends_process: bool = True
    command: str = field(default_factory=lambda: " ".join(["locust", *sys.argv[1:]]))
    notes: str | None = None  # the provenance's: a ladder started from the web UI says so
    greenlet: gevent.Greenlet | None = None
    refiner: gevent.Greenlet | None = None
    written: Path | None = None
    finished: bool = False

    @classmethod
    def of(
        cls, options: LadderOptions, runner: Runner, shape: Shape, local: Recorder | None, **kw: Any
    ) -> Conductor:
        """The conductor of a ladder run with `options`, publishing to `shape`; `local`: this
        process's recorder when it generates load itself (not a master)."""
        run = LadderRun(
            options.slo_ms, 0.0, shape.state, lambda snapshot: setattr(shape, "state", snapshot),
            options.refine_pct, options.underrun_slo, confidence=options.confidence,
            repeat=options.repeat, q_max_basis=options.q_max_basis,
        )  # fmt: skip
        collect = (lambda: None) if local is None else (lambda: run.store.merge(local.drain()))
        return cls(run, runner, options.out, shape.get_run_time, collect, **kw)

    def begin(self, start_epoch: float, host: str | None, options: LadderOptions) -> None:
        """The test started at `start_epoch`: fingerprint the target unless start-up did (in
        the web UI the host is chosen later), then conduct."""
        self.run.start_epoch = start_epoch
        if self.target is None:
            self.target = target_of(host, options)
        self.start()

    def start(self) -> None:
        self.greenlet = gevent.spawn(self.coarse)

    def coarse(self) -> None:
        """Announce each rung and show progress; a judge per rung decides. With --max-hold-s a
        rung whose window is unstable is held longer first."""
        run = self.run
        total = len(run.snapshot.schedule.rungs)
        try:
            for index, users in enumerate(run.snapshot.schedule.rungs):
                run.fit_to_minutes(index)
                schedule = run.snapshot.schedule
                rung_start = run.epoch(schedule.rung_start_s(index))
                end = run.epoch(schedule.worst_case().duration_s)
                run.hold_open(index)
                window = self.hold(
                    f"rung {index + 1}/{total}",
                    users,
                    rung_start,
                    run.rung_window(index),
                    end,
                    lambda _window, i=index: self.extend_rung(i),
                )
                run.release()
                gevent.spawn(self.judge, users, window)
        finally:  # killed after a failing rung: let the shape move on (a probe's is not ours)
            run.release_coarse()

    def extend_rung(self, index: int) -> Window | None:
        self.await_reports(self.run.rung_window(index)[1])
        return self.run.extend_rung(index, time.time())

    def extend_probe(self, users: int, window: Window) -> Window | None:
        self.await_reports(window[1])
        return self.run.extend_probe(users, window, time.time())

    def await_reports(self, at: float) -> None:
        """Until every process has reported since `at` (the users stay on meanwhile)."""
        deadline = at + SETTLE_LIMIT_S
        while True:
            self.collect()
            if self.run.store.reported_since(at) or time.time() > deadline:
                return
            gevent.sleep(0.25)

    def hold(
        self,
        label: str,
        users: int,
        rung_start: float,
        window: Window,
        end: float,
        extend: Callable[[Window], Window | None],
    ) -> Window:
        """Tell every process the rung from its start to its window's end; log progress. With
        --max-hold-s, `extend` then gives the next window while the rung is held longer.
        Returns the window the rung is judged on."""
        gevent.sleep(max(0.0, rung_start - time.time()))
        self.runner.send_message(RUNG_MESSAGE, {"rung": users})
        while True:
            while (now := time.time()) < window[1]:
                gevent.sleep(min(PROGRESS_EVERY_S, max(0.05, window[1] - now)))
                if time.time() < window[1] - 0.5:
                    # Said again on every tick: a worker that missed the first word (stop 50's
                    # clone: every sample of its rung unlabelled) labels the rest of the rung.
                    self.runner.send_message(RUNG_MESSAGE, {"rung": users})
                    self.collect()
                    self.run.progress(label, users, rung_start, window, end, time.time())
            if self.run.snapshot.schedule.max_hold_s is None or (longer := extend(window)) is None:
                break
            window = longer
        self.runner.send_message(RUNG_MESSAGE, {"rung": None})
        return window

    def measure(self, users: int, window: Window) -> Rung:
        """Wait until the window's requests are all reported, then the rung's verdict."""
        w1 = window[1]
        deadline = w1 + SETTLE_LIMIT_S
        gevent.sleep(max(0.0, w1 + self.report_delay_s - time.time()))
        while True:
            self.collect()
            if self.run.store.settled(w1) or time.time() > deadline:
                break
            gevent.sleep(0.25)
        return self.run.judge(users, window)

    def judge(self, users: int, window: Window) -> None:
        """Judge a coarse rung; after the first failure stop, or bisect when it bracketed."""
        if self.measure(users, window).passes:
            return
        logger.info("the coarse ladder stops after its first failing rung (c=%d)", users)
        if self.greenlet is not None:
            self.greenlet.kill(block=False)
        bracket = self.run.bracket(window[1])
        if self.run.refine_pct is None or bracket is None:
            gevent.spawn(self.quit_when_steady)
            return
        self.run.begin_refinement(window[1])
        self.refiner = gevent.spawn(self.refine, bracket)

    def refine(self, bracket: Bracket) -> None:
        """Hold the bisection's probes one after another until the bracket is fine enough. With
        --repeat R, R bisections start from the same bracket and take turns, one probe each, so
        that a drift of the machine falls on every repeat alike."""
        run = self.run
        pct = run.refine_pct or DEFAULT_REFINE_PCT
        worst = worst_case_probes(bracket, pct) * run.repeat
        logger.info(
            "refining Q_max between %d (passes) and %d (fails) to max(1 user, %g %%)%s: at most "
            "%d probes",
            bracket.lo,
            bracket.hi,
            pct,
            f", {run.repeat} times" if run.repeat > 1 else "",
            worst,
        )
        brackets = dict.fromkeys(range(run.repeat), bracket)
        done = 0
        while brackets:
            for repeat in list(brackets):
                ended_by, held = self.probe_once(repeat, brackets, pct, done, worst)
                done += held
                if ended_by is not None:
                    end = brackets.pop(repeat)
                    logger.info(
                        "refined%s: Q_max %d, failing at %d (resolution %d users, %s)",
                        f" (repeat {repeat + 1} of {run.repeat})" if run.repeat > 1 else "",
                        end.lo,
                        end.hi,
                        end.gap,
                        ended_by,
                    )
                    run.end_refinement(ended_by, repeat)
        self.quit_when_steady()

    def probe_once(
        self, repeat: int, brackets: dict[int, Bracket], pct: float, done: int, worst: int
    ) -> tuple[RefineEnd | None, bool]:
        """Bisection `repeat`'s next probe, held and judged, its bracket narrowed in `brackets`:
        how the bisection ended (None while it goes on), and whether a probe was held."""
        run = self.run
        bracket = brackets[repeat]
        probe = next_probe(bracket, pct)
        if probe is None:
            return "resolution", False
        schedule = run.snapshot.schedule
        gap_s = max(schedule.idle_s, 1.0)
        start_s = self.run_time() + gap_s
        window = run.add_probe(probe, start_s)
        left = (worst - done) * (schedule.longest_hold_s + gap_s)
        label = f"probe {done + 1} of at most {worst}"
        try:
            window = self.hold(
                label, probe, run.epoch(start_s), window, time.time() + left,
                lambda held, users=probe: self.extend_probe(users, held),
            )  # fmt: skip
        finally:
            run.release()
        rung = self.measure(probe, window)
        run.record_probe(probe, window, repeat)
        if not rung.usable:
            return "client-bound", True
        if rung.verdict == "undecided":  # held to --max-hold-s and still not decided
            return "undecided", True
        brackets[repeat] = narrow(bracket, probe, rung.meets_slo)
        return None, True

    def quit_when_steady(self) -> None:
        """Quit once the shape's last change has taken effect (two overlapping stops of the
        same users make Locust raise), or after a few seconds regardless."""
        deadline = time.time() + 10.0
        while time.time() < deadline:
            phase = self.run.snapshot.phase_at(self.run_time())
            if phase is None or self.runner.user_count == phase.users:
                break
            gevent.sleep(0.2)
        if self.ends_process:
            self.runner.quit()
        else:
            self.runner.stop()

    def finish(self) -> None:
        """Compute every closed rung from all samples; write the artifact, its samples and the
        CPU readings they were judged with (`raw_record`); once: the web UI's stop and Locust's
        quitting may both ask."""
        if self.finished:
            return
        self.finished = True
        for greenlet in (self.greenlet, self.refiner):
            if greenlet is not None and greenlet is not gevent.getcurrent():
                greenlet.kill(block=False)
        self.collect()
        if self.target is None:
            return
        provenance = Provenance.now(
            self.target.provenance_kind,
            self.target.source,
            command=self.command,
            notes="; ".join(filter(None, (self.notes, self.target.notes))) or None,
        )
        artifact = self.run.artifact(self.target.fingerprint, provenance, time.time())
        if artifact is None:
            logger.error("no rung finished its measure window: nothing to write")
            self.exit_code(2)
            return
        try:
            path = write_artifact(
                artifact,
                self.out,
                qmax_filename(self.target.fingerprint, self.target.provenance_kind),
            )
        except TtsBenchError as exc:
            logger.error("%s", exc)
            self.exit_code(2)
            return
        write_samples(samples_path(path), self.run.store.samples)
        write_raw(raw_path(path), QmaxRaw.of(self.target.fingerprint, self.run.store.cpu))
        self.written = path
        self.exit_code(0)
        logger.info(
            "wrote %s (Q_max %s%s at %g ms, %s%s)",
            path,
            artifact.refined_q_max,
            f", the {artifact.q_max_basis} value" if artifact.q_max_basis else "",
            self.run.slo_ms,
            "bracketed" if artifact.bracketed else "not bracketed",
            ""
            if artifact.refinement is None
            else f", refined to {artifact.refinement.q_max_resolution} user(s)",
        )
        if (interval := artifact.q_max_interval) is not None:
            logger.info(
                "Q_max interval at %.0f %%: conservative %s, highest not failed %s%s; undecided "
                "rungs: %s",
                100 * interval.level,
                interval.low if interval.low is not None else "none (c=1 did not pass)",
                interval.high,
                "" if interval.failing_above is None else f", failing at {interval.failing_above}",
                ", ".join(map(str, interval.undecided)) or "none",
            )
