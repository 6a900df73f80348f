"""Slow clients: a deadline on reading a request's headers.

aiohttp waits for a request head as long as its keep-alive timeout (an hour by default,
longer than any proxy's idle timeout, on purpose). A client that sends part of a head and
then nothing (slowloris) holds its connection, and so a file descriptor, that long; enough
of them and the server accepts nothing more, `/ping` included. `HeaderDeadlineRunner`
serves with a request handler that answers 408 and closes a connection whose request head,
once begun, is not complete within `header_read_deadline_s`. An idle keep-alive connection
(no byte of a next request yet) is left to the keep-alive timeout, so a proxy's pooled
connections are not cut; the body has its own deadline in `http_invocations`.

aiohttp has no public hook for this; the subclass uses the handler's `_waiter` (idle,
waiting for a request) and `_request_count` (heads parsed). aiohttp is pinned below 4, and
`tests/server/test_server_robustness.py` fails if either stops meaning what it does here.
"""

from __future__ import annotations

import asyncio
from typing import Any

from aiohttp import web
from aiohttp.web_protocol import RequestHandler

from tts_server.logs import ServerLog

_TIMEOUT_BODY = b'{"error":"header_timeout","message":"the request head did not arrive in time"}'
_TIMEOUT_RESPONSE = (
    b"HTTP/1.1 408 Request Timeout\r\nConnection: close\r\nContent-Type: application/json\r\n"
    b"Content-Length: %d\r\n\r\n%s" % (len(_TIMEOUT_BODY), _TIMEOUT_BODY)
)


class _HeaderDeadlineHandler(RequestHandler):
    """aiohttp's request handler with a deadline from the first byte of a head to its end."""

    def __init__(
        self,
        manager: web.Server,
        *,
        header_read_deadline_s: float,
        server_log: ServerLog | None,
        **kwargs: Any,
    ) -> None:
        super().__init__(manager, **kwargs)
        self._header_deadline_s = header_read_deadline_s
        self._server_log = server_log
        self._header_timer: asyncio.TimerHandle | None = None

    def _awaiting_head(self) -> bool:
        """No request is being handled: before the first one, or idle between two."""
        return self._request_count == 0 or (self._waiter is not None and not self._waiter.done())

    def data_received(self, data: bytes) -> None:
        heads_before = self._request_count
        super().data_received(data)
        if self._request_count != heads_before:  # a head completed (or failed to parse)
            self._cancel_header_timer()
        elif self._header_timer is None and self._awaiting_head():
            self._header_timer = self._loop.call_later(
                self._header_deadline_s, self._header_expired, heads_before
            )

    def _header_expired(self, heads_before: int) -> None:
        self._header_timer = None
        if self._request_count != heads_before or self.transport is None:
            return
        if self._server_log is not None:
            self._server_log.event(
                "header_timeout", level="warning", deadline_s=self._header_deadline_s
            )
        self.transport.write(_TIMEOUT_RESPONSE)
        self.force_close()

    def _cancel_header_timer(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def connection_lost(self, exc: BaseException | None) -> None:
        self._cancel_header_timer()
        super().connection_lost(exc)


class _HeaderDeadlineServer(web.Server):
    def __call__(self) -> RequestHandler:
        return _HeaderDeadlineHandler(self, loop=self._loop, **self._kwargs)


class HeaderDeadlineRunner(web.AppRunner):
    """`web.AppRunner` whose connections get a header-read deadline; the same arguments,
    plus `header_read_deadline_s` and the `server_log` that records each connection cut."""

    def __init__(
        self,
        app: web.Application,
        *,
        header_read_deadline_s: float,
        server_log: ServerLog | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(
            app, header_read_deadline_s=header_read_deadline_s, server_log=server_log, **kwargs
        )

    async def _make_server(self) -> web.Server:
        server = await super()._make_server()
        # The application's own Server, with a handler class that takes the two arguments.
        server.__class__ = _HeaderDeadlineServer
        return server
