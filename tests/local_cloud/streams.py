"""The client side of the response stream, for the local-cloud tests."""

from __future__ import annotations

import json
from typing import Any

# Timing fields differ between two runs of the same request; everything else must not.
TIMING_KEYS = frozenset({"step_time", "first_chunk_latency_ms", "queue_wait_ms", "elapsed_ms"})


def speech_request(context_id: str, transcript: str = "Hello there.") -> dict[str, Any]:
    return {
        "context_id": context_id,
        "transcript": transcript,
        "language": "en",
        "voice": {"mode": "id", "id": "jf_alpha"},
        "output_format": {"container": "raw", "encoding": "pcm_s16le", "sample_rate": 24000},
    }


# Many short sentences: the first chunk comes early, the whole takes far past a small ceiling.
LONG_TEXT = " ".join(f"This is sentence {i}." for i in range(1, 170))


def stream(client: Any, endpoint: str, body: dict[str, Any]) -> Any:
    return client.invoke_endpoint_with_response_stream(
        EndpointName=endpoint, Body=json.dumps(body), ContentType="application/json"
    )


def rejoin(answer: Any) -> tuple[bytes, list[bytes]]:
    """The PayloadParts' bytes joined, and the parts as they came."""
    parts = [event["PayloadPart"]["Bytes"] for event in answer["Body"] if "PayloadPart" in event]
    return b"".join(parts), parts


def events(ndjson: bytes) -> list[dict[str, Any]]:
    return [json.loads(line) for line in ndjson.splitlines() if line.strip()]


def comparable(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in e.items() if k not in TIMING_KEYS} for e in items]


class ClosedLoop:
    """N users in threads, each one streamed request at a time with no think time, so N are
    outstanding by construction; `stop` lets each finish its current request."""

    def __init__(self, client: Any, endpoint: str, users: int, transcript: str = "Sure.") -> None:
        import threading

        self._client, self._endpoint, self._transcript = client, endpoint, transcript
        self._stop = threading.Event()
        self.completed = 0
        self.failures: list[str] = []
        self._lock = threading.Lock()
        self._threads = [
            threading.Thread(target=self._user, args=(i,), daemon=True) for i in range(users)
        ]

    def _user(self, index: int) -> None:
        count = 0
        while not self._stop.is_set():
            count += 1
            try:
                data, _ = rejoin(
                    stream(
                        self._client,
                        self._endpoint,
                        speech_request(f"u{index}-{count}", self._transcript),
                    )
                )
                ok = events(data)[-1]["type"] == "done"
            except Exception as exc:
                ok = False
                with self._lock:
                    self.failures.append(f"{type(exc).__name__}: {exc}")
            with self._lock:
                self.completed += ok

    def __enter__(self) -> ClosedLoop:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=120)
