"""The ladder's request timing, which every transport's user is bound to (`LADDER_HOOKS`).

`timed_request` times one request: its raw sample goes to the process's recorder and its TTFAB
and total latency are fired as Locust request metrics, so Locust's UI, CSV and distributed mode
show them as usual; an exception is recorded as an error and re-raised (STYLE 9). Each user
walks the corpus from its own random starting point (`utterances`); the ladder's `--contract`
builds each request (`request_body`) and names the events its reading reads. A user whose
request was refused waits before its next one (`tts_bench.measure.transport.backoff`), instead of
retrying in a tight loop against a container that refuses at once.
"""

from __future__ import annotations

import itertools
import random
import time
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import gevent
from gevent import GreenletExit
from locust.env import Environment
from sagemaker_users import LadderHooks  # beside this file: Locust puts its folder on the path

from tts_bench.artifacts.fingerprint import Transport
from tts_bench.measure.corpus import Utterance
from tts_bench.measure.playback import PlaybackTracker
from tts_bench.measure.samples import Outcome, Sample
from tts_bench.measure.transport.backoff import RefusalBackoff
from tts_bench.measure.transport.stream_events import StreamReading

TTFAB_ENTRY = "TTFAB"
LATENCY_ENTRY = "total latency"
# Each user's refusals in a row, by its greenlet (a Locust user is one greenlet for its life).
_BACKOFF: weakref.WeakKeyDictionary[Any, RefusalBackoff] = weakref.WeakKeyDictionary()


@contextmanager
def timed_request(environment: Environment, context_id: str) -> Iterator[StreamReading]:
    """Time one request: record its raw sample and fire TTFAB and total latency as Locust metrics.

    Exceptions are recorded as errors and re-raised; a greenlet killed at the end of a rung
    leaves a `cancelled` sample (its time in flight still counts toward the rung's load). A
    refused request's user then waits out its backoff, after the sample is recorded.
    """
    recorder = environment.qmax_recorder  # type: ignore[attr-defined]
    rung, heard = recorder.rung, PlaybackTracker()
    token = recorder.opened(time.time())
    reading = StreamReading(context_id, heard=heard, rules=recorder.contract.events)
    try:
        yield reading
        reading.end()
    except GreenletExit:
        reading.settle(Outcome.CANCELLED, reading.detail)
        raise
    except Exception as exc:
        reading.fail(f"{type(exc).__name__}: {exc}")
        raise
    finally:
        sample = recorder.finished(token, reading, heard, rung)
        if sample.outcome is not Outcome.CANCELLED:
            fire_metrics(environment, recorder.transport, sample)
        wait_s = _BACKOFF.setdefault(gevent.getcurrent(), RefusalBackoff()).after(sample.outcome)
    if wait_s > 0:
        gevent.sleep(wait_s)


def fire_metrics(environment: Environment, transport: Transport, sample: Sample) -> None:
    failed = sample.outcome is not Outcome.OK
    failure = Exception(f"{sample.outcome}: {sample.detail}") if failed else None
    figures = [(TTFAB_ENTRY, sample.ttfab_ms, None), (LATENCY_ENTRY, sample.latency_ms, failure)]
    for name, ms, exception in figures:
        if ms is not None:
            environment.events.request.fire(
                request_type=transport.value, name=name, response_time=ms, response_length=0,
                exception=exception, context={"rung": sample.rung},
            )  # fmt: skip


def request_body(environment: Environment, utterance: Utterance, context_id: str) -> dict[str, Any]:
    """The request the ladder's `--contract` builds for one corpus line."""
    return environment.qmax_recorder.contract.body(utterance, context_id)  # type: ignore[attr-defined]


def utterances(environment: Environment) -> Iterator[Utterance]:
    """Each user walks the corpus from its own random starting point."""
    corpus = environment.qmax_recorder.corpus  # type: ignore[attr-defined]
    return itertools.islice(itertools.cycle(corpus), random.randrange(len(corpus)), None)


LADDER_HOOKS = LadderHooks(timed_request, utterances, request_body)
