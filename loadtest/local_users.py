"""The local ladder users: `local-http` (POST /invocations) and `local-ws` (the server's WebSocket).

Each user sends one request at a time with no think time and reads the server's events as they
arrive, handing each to the request's `StreamReading`. Like `sagemaker_users.py`, the classes are
abstract: `loadtest/qmax.py` binds them to its request timing (`LadderHooks`), so this file
needs nothing from the ladder file.
"""

from __future__ import annotations

import json
import uuid
from typing import ClassVar

import websocket
from locust import FastHttpUser, User, task
from sagemaker_users import LadderHooks  # beside this file: Locust puts its folder on the path

HEADERS_ENTRY = "/invocations (headers only)"  # Locust's own entry: timed at the headers


class LocalHttpUser(FastHttpUser):
    """local-http: POST /invocations, read the jsonlines stream event by event."""

    abstract = True
    hooks: ClassVar[LadderHooks]
    network_timeout = 70.0
    connection_timeout = 10.0

    def on_start(self) -> None:
        self.texts = self.hooks.utterances(self.environment)

    @task
    def speak(self) -> None:
        context_id = uuid.uuid4().hex[:12]
        body = self.hooks.body(self.environment, next(self.texts), context_id)
        with (
            self.hooks.timed_request(self.environment, context_id) as reading,
            self.client.post(
                "/invocations", json=body, stream=True, name=HEADERS_ENTRY, catch_response=True,
                headers={"Accept": "application/jsonlines"},
            ) as response,
        ):  # fmt: skip
            if response.status_code != 200:
                reading.refused(response.status_code, (response.text or "")[:200])
                response.failure(f"HTTP {response.status_code}")
                return
            response.success()
            # readline with an explicit separator: the true arrival time of each event.
            while line := response.stream.readline(b"\n"):
                if line.strip() and reading.feed(line):
                    break


class LocalWsUser(User):
    """local-ws: one WebSocket per user, one request object per message, events back as text."""

    abstract = True
    hooks: ClassVar[LadderHooks]

    def on_start(self) -> None:
        self.texts = self.hooks.utterances(self.environment)
        self.socket: websocket.WebSocket | None = None

    def on_stop(self) -> None:
        if self.socket is not None:
            self.socket.close()

    @task
    def speak(self) -> None:
        if self.socket is None:
            base = (self.host or self.environment.host or "").rstrip("/")
            url = "ws" + base.removeprefix("http") + "/invocations-bidirectional-stream"
            self.socket = websocket.create_connection(url, timeout=70)
        context_id = uuid.uuid4().hex[:12]
        body = self.hooks.body(self.environment, next(self.texts), context_id)
        try:
            with self.hooks.timed_request(self.environment, context_id) as reading:
                self.socket.send(json.dumps(body))
                while not reading.feed(self.socket.recv()):
                    pass
        except (websocket.WebSocketException, OSError):
            self.socket = None  # reconnect on the next request
            raise
