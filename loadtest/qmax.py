"""The closed-loop Q_max ladder (SPEC §4), as a Locust file.

    locust -f loadtest/qmax.py --headless --host http://127.0.0.1:8080 \\
        --rungs 1,5,10,20,30,40,50,60 --hold-s 240 --measure-s 60 --idle-s 30 --slo-ms 3000

N users per rung, each one request at a time with no think time, so N are outstanding by
construction. Each request's TTFAB and total latency are fired as Locust request metrics (the
UI, CSV and distributed mode work as usual) and kept as raw samples, from which each rung's
statistics come. The ladder stops after the first failing or client-bound rung and writes
`<out>/qmax-<model>-<transport>-<slug>.json` and its samples when Locust quits. Here: each
transport's user bound to the request timing (`ladder_requests.py`; the users in
`local_users.py`, `sagemaker_users.py` and `bidi_stream_user.py`), the shape, the event hooks
and the flags (`tts_bench.measure.ladder.flags`, the set `tts-bench qmax` takes); the ladder's
control is `tts_bench.measure.ladder.conductor`.

Without `--headless`, Locust's web UI shows every ladder flag, with its help, in its start form
beside the host; the ladder is built when the test starts, from the values sent. The form is
checked as a headless start is (the flags, the corpus, the host's /ping): a refusal is the
form's error, in the same one line, and nothing starts. The Ladder tab shows each rung as it is
held and judged; the artifact is written when the ladder ends or Stop is pressed, as headless.

SageMaker: `--transport response-stream --endpoint NAME` (users in `sagemaker_users.py` and
`bidi_stream_user.py`); `tts-bench qmax --endpoint` adds the drift preflight, the freeze and
the CloudWatch join. Distributed: `--master`/`--worker` or `--processes N` (the master judges;
workers ship raw samples with their reports and read `--corpus` themselves; a busy worker is
given time before it is called missing, `worker_link.py`). Leave
`--stop-timeout` at 0: requests in flight when a rung ends are cancelled (kept as `cancelled`
samples, their time in flight still load), so each rung starts on an idle server.
"""

from __future__ import annotations

import argparse
import logging
import os
import socket
import sys
import time
from collections.abc import Mapping
from typing import Any

import gevent
from bidi_stream_user import BidiStreamUser  # beside this file: Locust puts its folder on the path
from ladder_requests import LADDER_HOOKS
from local_users import LocalHttpUser, LocalWsUser
from locust import LoadTestShape, User, events
from locust.env import Environment
from locust.runners import WORKER_REPORT_INTERVAL, MasterRunner, Runner, WorkerRunner
from sagemaker_users import ResponseStreamUser
from worker_link import tolerate_busy_workers

from tts_bench.artifacts.fingerprint import Transport
from tts_bench.errors import RefusalError, TtsBenchError
from tts_bench.measure.corpus import load_corpus
from tts_bench.measure.ladder.board import add_ladder_tab, check_start
from tts_bench.measure.ladder.conductor import RUNG_MESSAGE, Conductor, LadderTarget, target_of
from tts_bench.measure.ladder.flags import (
    LadderOptions,
    add_ladder_arguments,
    ladder_arguments,
    ladder_options,
)
from tts_bench.measure.ladder.state import ShapeSnapshot
from tts_bench.measure.ladder.store import Recorder

logger = logging.getLogger("qmax")
tolerate_busy_workers()  # before Locust builds its runner (master or worker)


@events.init_command_line_parser.add_listener
def add_arguments(parser: Any, **_kw: Any) -> None:
    # On the parser itself: only it knows `include_in_web_ui` (each flag shows with its help).
    add_ladder_arguments(parser, include_in_web_ui=True)


# --------------------------------------------------------------------------- users


class HttpLadderUser(LocalHttpUser):
    """local-http, bound to this ladder's request timing."""

    hooks = LADDER_HOOKS


class WsLadderUser(LocalWsUser):
    """local-ws, bound to this ladder's request timing."""

    hooks = LADDER_HOOKS


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

    `tick()` depends only on the run time: it reads `state`, which the conductor replaces whole
    as the ladder goes (a rung held longer, refinement's probes). Stopping early after a
    failing rung is the conductor's job, not the shape's.
    """

    state: ShapeSnapshot = ShapeSnapshot()
    """The schedule as it stands (set from the ladder flags at start-up)."""
    user_class: type[User] | None = None
    """The transport's user class; None lets Locust use every user class in the file."""
    start_epoch: float = 0.0  # wall-clock time of run time 0

    def reset_time(self) -> None:
        """The test starts: run time 0, and the schedule and users of the flags as they stand
        now (the web UI may have changed them since start-up)."""
        super().reset_time()
        self.start_epoch = time.time()
        if self.runner is None:
            return
        try:
            options = ladder_options(self.runner.environment.parsed_options)
        except TtsBenchError:
            return  # refused at start-up or by the start form; on_test_start says why
        self.state, self.user_class = (
            ShapeSnapshot(options.schedule),
            USER_CLASSES[options.transport],
        )

    def tick(self) -> tuple[int, float] | tuple[int, float, list[type[User]]] | None:
        phase = self.state.phase_at(self.get_run_time())
        only = () if self.user_class is None else ([self.user_class],)
        return None if phase is None else (phase.users, self.state.spawn_rate, *only)


# --------------------------------------------------------------------------- wiring
# Headless, the flags are checked and the target fingerprinted at start-up, and a refusal ends
# Locust at once. With the web UI, the flags (and the host) are chosen in the start form:
# `start_refusal` checks them when the form is sent, and the ladder is built when the test
# starts (`on_test_start`) from the values the UI sent.


def start_refusal(
    environment: Environment, form: Mapping[str, str]
) -> tuple[str | None, LadderTarget | None]:
    """The start form's flags and host checked as a headless start checks them: the one-line
    refusal (None when none) and the target fingerprinted."""
    current = vars(environment.parsed_options)
    sent = {k: v for k, v in form.items() if k in current}  # as Locust's /swarm applies them
    try:
        options = ladder_options(argparse.Namespace(**{**current, **sent}))
        load_corpus(options.corpus)
        return None, target_of(form.get("host") or environment.host, options)
    except TtsBenchError as exc:
        logger.error("refused: %s", exc)
        return f"refused: {exc}", None


@events.init.add_listener
def on_init(environment: Environment, runner: Runner, **_kw: Any) -> None:
    recorder = Recorder(worker=f"{socket.gethostname()}:{os.getpid()}")
    environment.qmax_recorder = recorder  # type: ignore[attr-defined]
    runner.register_message(RUNG_MESSAGE, lambda msg, **_: recorder.told(msg.data["rung"]))
    if isinstance(runner, WorkerRunner):  # raw samples reach the master only with the reports
        environment.events.report_to_master.add_listener(
            lambda data, **_: data.update(qmax=recorder.drain())
        )
        return
    environment.qmax_conductor = None  # type: ignore[attr-defined]
    environment.qmax_target = None  # type: ignore[attr-defined]
    try:
        if not isinstance(environment.shape_class, QmaxLadderShape):
            raise RefusalError(
                "this file's QmaxLadderShape must drive the test (do not pass --class-picker)"
            )
        if environment.web_ui is None:
            options = ladder_options(environment.parsed_options)
            load_corpus(options.corpus)
            if environment.host or not options.transport.is_local:
                environment.qmax_target = target_of(environment.host, options)  # type: ignore[attr-defined]
    except TtsBenchError as exc:
        logger.error("refused: %s", exc)
        sys.exit(exc.exit_code)
    web_ui = environment.web_ui
    add_ladder_tab(web_ui, lambda: board_of(environment))
    check_start(web_ui, lambda form: remember_target(environment, form))
    if web_ui is not None:  # the UI's Stop, or the ladder's end, leaves the UI up: write then
        environment.events.test_stop.add_listener(lambda **_: finish(environment))
    if isinstance(runner, MasterRunner):
        environment.events.worker_report.add_listener(
            lambda data, **_: merge_report(environment, data)
        )


def board_of(environment: Environment) -> dict[int, dict[str, Any]]:
    """The rows of the ladder now running (none before the first test starts)."""
    conductor: Conductor | None = environment.qmax_conductor  # type: ignore[attr-defined]
    return {} if conductor is None else conductor.run.board


def remember_target(environment: Environment, form: Mapping[str, str]) -> str | None:
    """The start form's check; the target it fingerprinted is the test's (no second /ping)."""
    refusal, environment.qmax_target = start_refusal(environment, form)  # type: ignore[attr-defined]
    return refusal


def merge_report(environment: Environment, data: dict[str, Any]) -> None:
    conductor: Conductor | None = environment.qmax_conductor  # type: ignore[attr-defined]
    if conductor is not None and "qmax" in data:
        conductor.run.store.merge(data["qmax"])


def sample_cpu(recorder: Recorder) -> None:
    while True:
        recorder.read_cpu()
        gevent.sleep(1.0)


def conductor_for(environment: Environment, options: LadderOptions) -> Conductor:
    """This test's ladder, built from the flags as they stand when it starts."""
    runner, shape = environment.runner, environment.shape_class
    is_master, headless = isinstance(runner, MasterRunner), environment.web_ui is None
    command = None
    if not headless:  # the headless command that repeats what the UI started
        host = ["--host", environment.host] if environment.host else []
        command = " ".join(
            ["locust", "-f", __file__, "--headless", *host,
             *ladder_arguments(options)]
        )  # fmt: skip
    return Conductor.of(
        options, runner, shape, None if is_master else environment.qmax_recorder,  # type: ignore[attr-defined]
        target=environment.qmax_target,  # type: ignore[attr-defined]
        report_delay_s=WORKER_REPORT_INTERVAL + 0.5 if is_master else 0.0,
        exit_code=lambda code: setattr(environment, "process_exit_code", code),
        ends_process=headless,
        **({} if command is None else {"command": command, "notes": "started from Locust's web UI"}),
    )  # fmt: skip


@events.test_start.add_listener
def on_test_start(environment: Environment, **_kw: Any) -> None:
    recorder = environment.qmax_recorder  # type: ignore[attr-defined]
    runner = environment.runner
    try:
        options = ladder_options(environment.parsed_options)
        recorder.transport, recorder.corpus = options.transport, load_corpus(options.corpus)
        recorder.contract = options.contract
        if not isinstance(runner, MasterRunner) and recorder.cpu_sampler is None:
            recorder.cpu_sampler = gevent.spawn(sample_cpu, recorder)
        if isinstance(runner, WorkerRunner):
            return
        conductor = conductor_for(environment, options)
        environment.qmax_conductor, environment.qmax_target = conductor, None  # type: ignore[attr-defined]
        conductor.begin(environment.shape_class.start_epoch, environment.host, options)  # type: ignore[union-attr]
    except TtsBenchError as exc:  # what was checked changed since (the target, a file)
        logger.error("refused: %s", exc)
        environment.process_exit_code = exc.exit_code
        gevent.spawn(runner.quit if environment.web_ui is None else runner.stop)  # type: ignore[union-attr]


def finish(environment: Environment) -> None:
    conductor: Conductor | None = getattr(environment, "qmax_conductor", None)
    if conductor is not None:
        conductor.finish()


@events.quitting.add_listener
def on_quitting(environment: Environment, **_kw: Any) -> None:
    finish(environment)
