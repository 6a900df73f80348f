"""The instant the local cloud models an act at, carried on its own requests to moto.

On a compressed clock the cloud's threads act late on a loaded machine: a tenth of a wall second
is seconds of the cloud's. What it records itself (metric windows, alarm history, scaling
activities, start-up markers) it stamps with the instant its model gives. What moto records, moto
stamps with its own clock when the request reaches it (a log stream's creation, an alarm's state
time, the moment a desired count was asked for), and no AWS API takes that time as a parameter.
So the cloud's own clients send the modelled instant in a header, with a token only this process
knows, and the moto host serves that request on that instant (`MotoHost.now`). A client outside
the cloud cannot set it: its requests are stamped when they arrive, as AWS stamps them.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Final

HEADER: Final = "x-tts-bench-modelled-at"
_ENVIRON_KEY: Final = "HTTP_" + HEADER.upper().replace("-", "_")
_pinned = threading.local()


@contextmanager
def modelled_at(at_s: float) -> Iterator[None]:
    """Requests this thread sends to moto meanwhile are stamped at `at_s` (the cloud's clock)."""
    previous = getattr(_pinned, "at_s", None)
    _pinned.at_s = at_s
    try:
        yield
    finally:
        _pinned.at_s = previous


def stamping(token: str) -> Callable[..., None]:
    """A botocore `before-sign` handler: the header on each request sent under `modelled_at`."""

    def add(request: Any, **_: Any) -> None:
        at_s = getattr(_pinned, "at_s", None)
        if at_s is not None:
            request.headers[HEADER] = f"{token}:{at_s!r}"

    return add


def requested_instant(environ: Mapping[str, Any], token: str) -> float | None:
    """The instant a request to moto asks to be served on (its WSGI environ), or None when it
    carries none or not this host's token."""
    raw = environ.get(_ENVIRON_KEY)
    if not isinstance(raw, str):
        return None
    given, _, at = raw.partition(":")
    if given != token:
        return None
    try:
        at_s = float(at)
    except ValueError:
        return None
    return at_s if math.isfinite(at_s) else None
