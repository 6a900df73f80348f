"""The `bidi-stream` ladder user: SageMaker bidirectional streaming through the AWS SDK's HTTP/2 client.

How the loops are arranged: Locust's users are greenlets on gevent in this (3.11) process; the
SDK is asyncio and needs Python ≥ 3.12. Each Locust process starts one worker process
(`loadtest/bidi_worker.py` under `.venv-http2`, see `tts_bench.measure.transport.bidi_stream`) with one
asyncio loop and one SDK client, whose CRT transport multiplexes every session as an HTTP/2
stream. Each user holds one session for its life and speaks one turn at a time on it, with no
think time (closed loop: N users, N turns outstanding). Users talk to the worker over its
stdin/stdout in JSON lines; a reader greenlet routes each answer to its user's queue, so a user
waiting for its turn yields to the others. TTFAB and latency are timed in the worker, per turn,
where the bytes arrive; the pipe adds nothing to TTFAB (the Locust-side latency includes it,
well under a millisecond per turn).

The class is abstract: `loadtest/qmax.py` binds it to its request timing (`LadderHooks`).
"""

from __future__ import annotations

import contextlib
import logging
import sys
import uuid
from typing import Any, ClassVar

from locust import User, events, task
from locust.env import Environment
from sagemaker_users import LadderHooks

from tts_bench.artifacts.fingerprint import Transport
from tts_bench.errors import RefusalError
from tts_bench.measure.samples import Outcome
from tts_bench.measure.transport.bidi_stream import (
    BidiSession,
    BidiWorker,
    BidiWorkerError,
    http2_python,
)

logger = logging.getLogger("qmax")

TURN_TIMEOUT_S = 70.0  # SageMaker's 60 s invocation ceiling, and some
OPEN_TIMEOUT_S = 30.0


def worker_of(environment: Environment) -> BidiWorker:
    """This Locust process's HTTP/2 worker, started on first use (its env: this process's)."""
    worker = getattr(environment, "bidi_worker", None)
    if worker is None:
        worker = BidiWorker().start()
        environment.bidi_worker = worker  # type: ignore[attr-defined]
    return worker


@events.init.add_listener
def refuse_without_http2(environment: Environment, **_kw: Any) -> None:
    """bidi-stream without Python >= 3.12 for the SDK: one line, before any user starts."""
    options = environment.parsed_options
    if options is None or getattr(options, "transport", None) != Transport.BIDI_STREAM:
        return
    try:
        http2_python()
    except RefusalError as exc:
        logger.error("refused: %s", exc)
        sys.exit(exc.exit_code)


@events.quitting.add_listener
def stop_worker(environment: Environment, **_kw: object) -> None:
    worker = getattr(environment, "bidi_worker", None)
    if worker is not None:
        worker.stop()


class BidiStreamUser(User):
    """bidi-stream: one session per user, one turn at a time on it, no think time."""

    abstract = True
    hooks: ClassVar[LadderHooks]

    def on_start(self) -> None:
        self.texts = self.hooks.utterances(self.environment)
        self.session: BidiSession | None = None

    def on_stop(self) -> None:
        session, self.session = self.session, None
        if session is not None:
            with contextlib.suppress(BidiWorkerError):  # the worker went first: nothing to close
                session.close()

    @task
    def speak(self) -> None:
        options = self.environment.parsed_options
        context_id = uuid.uuid4().hex[:12]
        body = self.hooks.body(self.environment, next(self.texts), context_id)
        with self.hooks.timed_request(self.environment, context_id) as reading:
            try:
                if self.session is None:
                    session = worker_of(self.environment).open(options.endpoint)
                    self.session = session
                    session.wait_opened(OPEN_TIMEOUT_S)
                result = self.session.turn(body, TURN_TIMEOUT_S)
            except BidiWorkerError as exc:
                self.session = None  # reopen on the next turn
                reading.fail(str(exc))
                return
            # The worker read the turn's events and timed it where the bytes arrived.
            reading.ttfab_ms = result.ttfab_ms
            reading.server_first_chunk_ms = result.server_first_chunk_ms
            reading.settle(Outcome(result.outcome), result.detail)
