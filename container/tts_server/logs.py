"""Structured logs: one JSON object per line on stdout (CloudWatch takes stdout), EMF included.

`ServerLog` writes the server's own lines (events, start-up markers, metrics);
`install_json_logging` routes the standard `logging` records of aiohttp and the engine
through the same format, so no line on stdout is anything but JSON.

A log writer never raises, whatever a request holds: `json_line` escapes what UTF-8 cannot
carry (a lone surrogate from a `\\ud800` JSON escape) and stands in for what JSON cannot
express, and a line that still cannot be written is dropped rather than failing a request.
"""

from __future__ import annotations

import contextlib
import json
import logging
import sys
import threading
import time
import uuid
from typing import Any, TextIO

from tts_bench.telemetry import STARTUP_MARKERS, MalformedHttpIsAWarning


def new_request_id(context_id: str | None) -> str:
    """`{uuid}-{context_id}` (SPEC §3); just the uuid when the request named no context."""
    return f"{uuid.uuid4()}-{context_id}" if context_id else str(uuid.uuid4())


def json_line(record: dict[str, Any]) -> str:
    """`record` as one line of JSON that UTF-8 can encode; never raises.

    Lone surrogates come out as their JSON escape (backslashreplace writes exactly `\\udXXX`,
    inside a JSON string), so the line still parses back to the same text.
    """
    try:
        line = json.dumps(record, separators=(",", ":"), ensure_ascii=False, default=_fallback)
    except (TypeError, ValueError, RecursionError) as exc:  # cycles, unencodable keys
        line = json.dumps(
            {"level": "error", "msg": "unloggable_record", "error": repr(exc)[:200]},
            separators=(",", ":"),
        )
    return line.encode("utf-8", "backslashreplace").decode("utf-8")


def _fallback(value: object) -> str:
    try:
        return str(value)
    except Exception:  # a __str__ that raises must not take the log line with it
        return f"<unprintable {type(value).__name__}>"


class ServerLog:
    """Writes JSON lines to one stream; each start-up marker at most once, in order."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self._stream = stream
        self._lock = threading.Lock()
        self._next_marker = 0

    def write(self, record: dict[str, Any]) -> None:
        line = json_line(record)
        stream = self._stream or sys.stdout
        with self._lock, contextlib.suppress(OSError, ValueError):
            # A closed or broken stdout loses this line; it must not fail the request.
            stream.write(line + "\n")
            stream.flush()

    def event(self, msg: str, level: str = "info", **fields: Any) -> None:
        self.write({"level": level, "msg": msg, "ts": time.time(), **fields})

    def marker(self, name: str, ts: float | None = None, **fields: Any) -> None:
        """Log start-up marker `name`; markers must come in STARTUP_MARKERS order, each once."""
        expected = (
            STARTUP_MARKERS[self._next_marker] if self._next_marker < len(STARTUP_MARKERS) else None
        )
        if name != expected:
            raise RuntimeError(f"start-up marker {name!r} out of order; expected {expected!r}")
        self._next_marker += 1
        self.write(
            {
                "level": "info",
                "msg": "startup_marker",
                "marker": name,
                "ts": ts or time.time(),
                **fields,
            }
        )


class _JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        try:
            message = record.getMessage()
        except Exception:  # bad %-arguments in a library's call
            message = str(record.msg)
        body: dict[str, Any] = {
            "level": record.levelname.lower(),
            "msg": message,
            "ts": record.created,
            "logger": record.name,
        }
        if record.exc_info:
            body["exc"] = self.formatException(record.exc_info)
        return json_line(body)


def install_json_logging(level: int = logging.WARNING) -> None:
    """Send every standard logging record to stdout as one JSON line."""
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(_JsonFormatter())
    handler.addFilter(MalformedHttpIsAWarning())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
