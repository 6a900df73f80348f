"""An instance server that starts nothing: it is ready at once and runs until stopped, and
remembers the launch instant the fleet gave it (`Fleet`'s tests, without a process)."""

from __future__ import annotations

import threading


class IdleServer:
    url = "http://127.0.0.1:9"

    def __init__(self) -> None:
        self.at_s: float | None = None  # the modelled launch, on the cloud's clock
        self.stopped = threading.Event()

    def start(self, at_s: float | None = None) -> None:
        self.at_s = at_s

    def wait_ready(self, timeout_s: float) -> None:
        pass

    def wait_exit(self) -> int | None:
        self.stopped.wait()
        return 0

    def stop(self) -> int | None:
        self.stopped.set()
        return 0

    def kill(self) -> None:
        self.stopped.set()
