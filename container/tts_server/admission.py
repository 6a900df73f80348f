"""The admission gate: bounds in-flight work (queued + executing), refuses past the bound at once.

A request holds a `Ticket` from arrival to the last byte sent (or until its client goes away);
`AdmissionGate.admit` never waits. Unbounded when `max_depth` is None, which is how Q_max is
measured (SPEC §3). Closing the gate (SIGTERM) refuses everything new.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Refusal(StrEnum):
    SATURATED = "queue_saturated"
    DRAINING = "draining"


@dataclass(slots=True)
class Ticket:
    """One admitted unit of work; `release` is idempotent so every exit path may call it."""

    gate: AdmissionGate
    released: bool = False

    def release(self) -> None:
        if not self.released:
            self.released = True
            self.gate._in_flight -= 1


class AdmissionGate:
    """Counts in-flight work against `max_depth`. Single-threaded: call from the event loop."""

    def __init__(self, max_depth: int | None) -> None:
        self.max_depth = max_depth
        self._in_flight = 0
        self._closed = False

    @property
    def in_flight(self) -> int:
        return self._in_flight

    @property
    def closed(self) -> bool:
        return self._closed

    def admit(self) -> Ticket | Refusal:
        """A ticket, or why not: at once, never waiting."""
        if self._closed:
            return Refusal.DRAINING
        if self.max_depth is not None and self._in_flight >= self.max_depth:
            return Refusal.SATURATED
        self._in_flight += 1
        return Ticket(self)

    def close(self) -> None:
        self._closed = True


@dataclass(slots=True)
class RecentServiceTime:
    """Exponentially weighted mean of arrival-to-last-byte seconds of completed requests."""

    weight: float = 0.2
    mean_s: float | None = None

    def observe(self, seconds: float) -> None:
        self.mean_s = (
            seconds
            if self.mean_s is None
            else ((1 - self.weight) * self.mean_s + self.weight * seconds)
        )


def retry_after_ms(recent_service_s: float | None, in_flight: int) -> int:
    """A hint for a refused client: about when one slot frees, from recent service times.

    With n requests in flight one of them ends, on average, every service / n seconds; the
    hint is clamped to [50 ms, 10 s] and is 1 s before anything has been measured.
    """
    if recent_service_s is None:
        return 1000
    return int(min(10_000, max(50, 1000 * recent_service_s / max(1, in_flight))))
