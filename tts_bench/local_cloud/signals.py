"""Stop signals held while the local cloud starts or stops a piece of itself.

A SIGINT or SIGTERM becomes a KeyboardInterrupt wherever the main thread is. Between starting
a server and recording how to stop it, or in the middle of stopping the instances, that leaves
a process or a folder behind: `timeout` sends SIGTERM twice in quick succession, and the
second one used to land in the cleanup the first one started. `signals_held()` runs a block
to its end and then delivers the first stop signal that arrived during it, to the handlers
that were in place before. Off the main thread (where handlers cannot change) the block just
runs: only the main thread is ever interrupted.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@contextmanager
def signals_held() -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    arrived: list[int] = []

    def hold(signum: int, frame: FrameType | None) -> None:
        arrived.append(signum)

    previous = {sig: signal.getsignal(sig) for sig in STOP_SIGNALS}
    for sig in STOP_SIGNALS:
        signal.signal(sig, hold)
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
        if arrived:
            signal.raise_signal(arrived[0])
