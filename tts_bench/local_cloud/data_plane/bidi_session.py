"""What one bidirectional-stream session holds on its instance, and how its requests count.

`open_session(endpoint_name)` hands the bridge (`bidi_bridge`) a `SessionLease` per HTTP/2
stream: the chosen instance's WebSocket URL and the hooks that count a request on it in flight.
`SessionRequests` calls them per request message and its last event, so an idle session counts
nothing. Pure: no I/O.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any


def _nothing() -> None:
    pass


@dataclass(frozen=True)
class SessionLease:
    """What `open_session` hands the bridge for one session: the chosen instance's WebSocket
    `url`, and the hooks that count one request on it in flight (`request_began`) and stop
    counting it (`request_ended`). The bridge calls them per request message and its last event,
    so an idle session counts nothing: a request counts as on the other paths, arrival to
    last event."""

    url: str
    request_began: Callable[[], None] = _nothing
    request_ended: Callable[[], None] = _nothing


OpenSession = Callable[[str], AbstractContextManager[SessionLease]]


class SessionRequests:
    """The requests of one session being served: each request message the client sends (a JSON
    object with a string `context_id`, not a cancel) until the container's event for that
    context with `done: true` (its `done`, `error` or `cancelled`), or until the session ends.
    The container answers every request message with exactly one such event."""

    def __init__(self, lease: SessionLease) -> None:
        self._lease = lease
        self._serving: Counter[str] = Counter()

    def sent(self, text: str) -> None:
        message = _json_object(text)
        context_id = message.get("context_id")
        if isinstance(context_id, str) and message.get("type") != "cancel":
            self._serving[context_id] += 1
            self._lease.request_began()

    def received(self, text: str) -> None:
        if '"done"' not in text:  # most events are audio chunks: spare them the parse
            return
        event = _json_object(text)
        context_id = event.get("context_id")
        if event.get("done") is True and isinstance(context_id, str) and self._serving[context_id]:
            self._serving[context_id] -= 1
            self._lease.request_ended()

    def end(self) -> None:
        """The session is over: nothing on it is served any more."""
        for _ in range(self._serving.total()):
            self._lease.request_ended()
        self._serving.clear()


def _json_object(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return {}
    return value if isinstance(value, dict) else {}
