"""A headless Chromium for the browser tests, driven over the DevTools protocol.

One browser per test session (`tests/conftest.py`, fixture `chromium`), one tab per test
(`browser_page`). The protocol goes over a websocket with websocket-client, which the project
has already: no node tooling. The browser is Debian's `chromium`, which `scripts/bootstrap`
installs when it runs as root; without it the browser tests skip, saying so.
"""

from __future__ import annotations

import base64
import itertools
import json
import os
import shutil
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

import websocket

# Without the background-networking flags Chromium dials out at start, and a closed network
# refuses it; a fresh profile per session keeps one run from seeing another's state.
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1280,900",
    "--remote-debugging-port=0",
)
START_TIMEOUT_S = 30.0


def why_no_browser() -> str | None:
    """Why the browser tests cannot run here, in one line; None when they can."""
    if shutil.which("chromium") is None:
        return "no chromium on PATH: run scripts/bootstrap as root, or apt-get install chromium"
    return None


class BrowserError(RuntimeError):
    """The browser did something a test did not expect (a script threw, a wait timed out)."""


class Page:
    """One tab: navigate, evaluate script, wait for a condition, take a screenshot."""

    def __init__(self, browser: Browser, target: dict[str, Any]) -> None:
        self.browser, self.target_id = browser, target["id"]
        self.socket = websocket.create_connection(
            target["webSocketDebuggerUrl"], timeout=60, suppress_origin=True
        )
        self._ids = itertools.count(1)
        self.events: list[dict[str, Any]] = []  # arrived while a command awaited its answer
        self.call("Page.enable")

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        """One protocol command and its result."""
        sent = next(self._ids)
        self.socket.send(json.dumps({"id": sent, "method": method, "params": params}))
        while True:
            message = json.loads(self.socket.recv())
            if message.get("id") == sent:
                if "error" in message:
                    raise BrowserError(f"{method}: {message['error']}")
                return message.get("result", {})
            if "method" in message:
                self.events.append(message)

    def wait_event(self, method: str, timeout_s: float) -> dict[str, Any]:
        """The first event `method` since the last command that asked for it."""
        deadline = time.monotonic() + timeout_s
        while True:
            for event in self.events:
                if event["method"] == method:
                    self.events.remove(event)
                    return event
            left = deadline - time.monotonic()
            if left <= 0:
                raise BrowserError(f"no {method} within {timeout_s:g} s")
            self.socket.settimeout(left)
            try:
                self.events.append(json.loads(self.socket.recv()))
            except websocket.WebSocketTimeoutException:
                continue
            finally:
                self.socket.settimeout(60)

    def evaluate(self, expression: str) -> Any:
        """The value of a script in the page (promises awaited)."""
        result = self.call(
            "Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True
        )
        if "exceptionDetails" in result:
            raise BrowserError(f"{expression[:80]}…: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait_for(self, expression: str, timeout_s: float = 30.0, every_s: float = 0.2) -> Any:
        """Poll a script until its value is truthy; that value."""
        deadline = time.monotonic() + timeout_s
        while True:
            value = self.evaluate(expression)
            if value:
                return value
            if time.monotonic() > deadline:
                raise BrowserError(f"waited {timeout_s:g} s for: {expression}")
            time.sleep(every_s)

    def goto(self, url: str, timeout_s: float = 30.0) -> None:
        """Open `url` and wait for its load event."""
        self.events.clear()
        answer = self.call("Page.navigate", url=url)
        if answer.get("errorText"):
            raise BrowserError(f"{url}: {answer['errorText']}")
        self.wait_event("Page.loadEventFired", timeout_s)

    def screenshot(self, path: Path) -> Path:
        """The whole page, not only the window, as a PNG."""
        size = self.call("Page.getLayoutMetrics")["cssContentSize"]
        clip = {"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1}
        shot = self.call(
            "Page.captureScreenshot", format="png", captureBeyondViewport=True, clip=clip
        )
        path.write_bytes(base64.b64decode(shot["data"]))
        return path

    def close(self) -> None:
        self.socket.close()
        self.browser.endpoint(f"/json/close/{self.target_id}")


class Browser:
    """A headless Chromium process with a fresh profile, and its DevTools endpoint."""

    def __init__(self, profile: Path) -> None:
        self.process = subprocess.Popen(
            ["chromium", *FLAGS, f"--user-data-dir={profile}", "about:blank"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            # Its profile lock's socket folder goes to $TMPDIR: in the profile, not /tmp's litter.
            env={**os.environ, "TMPDIR": str(profile)},
        )
        active = profile / "DevToolsActivePort"  # its first line: the port chosen
        deadline = time.monotonic() + START_TIMEOUT_S
        while not (active.is_file() and active.read_text().strip()):
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.close()
                raise BrowserError(f"chromium did not start (exit {self.process.returncode})")
            time.sleep(0.05)
        self.port = int(active.read_text().splitlines()[0])

    def endpoint(self, path: str, method: str = "GET") -> Any:
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", method=method)
        with urllib.request.urlopen(request, timeout=30) as answer:
            body = answer.read().decode()
        return json.loads(body) if body.startswith(("{", "[")) else body

    def new_page(self) -> Page:
        return Page(self, self.endpoint("/json/new?about:blank", method="PUT"))

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()
