"""Read a local server's `GET /ping` (contracts.md): readiness, admission bound, fingerprint.

The ladder and local T_total both start here: the fingerprint of what they measure comes from
the server itself, and a server with a bounded admission queue is refused (a bounded
container sheds load before p95 crosses the SLO, so its Q_max would be the bound).
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from tts_bench.artifacts.fingerprint import Fingerprint, Transport
from tts_bench.errors import RefusalError, TtsBenchError

# `instance_model` of a test's stand-in for another vendor's container (tests/ladder/
# sonic3_standin.py): it answers /ping as this project's container does so a local ladder can
# fingerprint it, and everything measured on it is emulated.
STAND_IN_MODEL = "stand-in"
# `instance_model` of a curve instance (local_cloud/instances): it sleeps set service times.
CURVE_MODEL = "curve"


class PingError(TtsBenchError):
    """The server cannot be reached or its /ping body is not what the contract says."""


@dataclass(frozen=True, slots=True)
class PingStatus:
    status: str
    ready: bool
    queue_max_depth: int | None
    in_flight: int
    build: dict[str, Any]  # the fingerprint fields the server knows (no transport)
    instance_model: str | None = None  # "curve": a local cloud's curve instance, not the engine

    def fingerprint(self, transport: Transport) -> Fingerprint:
        try:
            return Fingerprint(**self.build, transport=transport)
        except (TypeError, ValidationError) as exc:
            raise PingError(f"/ping fingerprint is not valid: {exc}".splitlines()[0]) from None

    def refuse_curve_modelled(self) -> None:
        if self.instance_model == CURVE_MODEL:
            raise RefusalError(
                "the server is a curve instance (service times from a ladder): Q_max is only "
                "ever measured on the real engine"
            )

    def refuse_bounded(self) -> None:
        if self.queue_max_depth is not None:
            raise RefusalError(
                "the server's admission queue is bounded "
                f"(queue_max_depth={self.queue_max_depth}); "
                "Q_max must be measured unbounded: restart it without MAX_QUEUE_DEPTH"
            )


def parse_ping(body: bytes | str) -> PingStatus:
    try:
        data = json.loads(body)
        return PingStatus(
            status=str(data["status"]),
            ready=bool(data["ready"]),
            queue_max_depth=data.get("queue_max_depth"),
            in_flight=int(data.get("in_flight", 0)),
            build=dict(data["fingerprint"]),
            instance_model=data.get("instance_model"),
        )
    except (ValueError, KeyError, TypeError) as exc:
        raise PingError(
            f"/ping answered a body that is not the contract's JSON ({exc!r})"
        ) from None


def fetch_ping(base_url: str, timeout_s: float = 5.0) -> PingStatus:
    """GET `<base_url>/ping`; a 503 (still loading, draining) still carries the JSON body."""
    url = base_url.rstrip("/") + "/ping"
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as response:
            return parse_ping(response.read())
    except urllib.error.HTTPError as exc:
        return parse_ping(exc.read())
    except (urllib.error.URLError, OSError) as exc:
        raise PingError(
            f"{url}: cannot reach the server ({exc}); is `tts-bench serve` running?"
        ) from None
