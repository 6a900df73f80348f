"""CloudWatch Logs for the instances: one stream per instance, its stdout shipped line by line.

`LogShipper` owns a queue and one thread; `open_stream` creates `<variant>/i-<hex>` in
`/aws/sagemaker/Endpoints/<endpoint>` (at spawn, so the instance is visible at once, or once its
provisioning is over, stamped at the instant it ends) and `ship` queues one line with the time
it was read, on the cloud's clock. The thread sends what is queued every 0.2 s, one log event
per line, in order.
"""

from __future__ import annotations

import contextlib
import queue
import threading
from collections.abc import Callable
from typing import Any

from tts_bench.aws.clock import ServiceClock
from tts_bench.local_cloud.modelled_time import modelled_at
from tts_bench.local_cloud.settings import REGION

FLUSH_EVERY_S = 0.2
MAX_BATCH = 1000


def log_group(endpoint_name: str) -> str:
    return f"/aws/sagemaker/Endpoints/{endpoint_name}"


def log_stream_arn(endpoint_name: str, stream: str, account: str) -> str:
    return (
        f"arn:aws:logs:{REGION}:{account}:log-group:{log_group(endpoint_name)}:log-stream:{stream}"
    )


class LogShipper:
    def __init__(self, client: Callable[[str], Any], clock: ServiceClock | None = None) -> None:
        self._logs = client("logs")
        self._clock = clock or ServiceClock()
        self._queue: queue.Queue[tuple[str, str, int, str] | None] = queue.Queue()
        self._groups: set[str] = set()
        self._groups_lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="local-cloud-logs", daemon=True)
        self._thread.start()

    def open_stream(self, endpoint_name: str, stream: str, at_s: float | None = None) -> None:
        """Create the stream (and its group, once); instances may open theirs at once. `at_s`:
        the instant its creation is modelled at (the cloud's clock), which moto stamps."""
        group = log_group(endpoint_name)
        with self._groups_lock:
            if group not in self._groups:
                existing = self._logs.describe_log_groups(logGroupNamePrefix=group)["logGroups"]
                if not any(g["logGroupName"] == group for g in existing):
                    self._logs.create_log_group(logGroupName=group)
                self._groups.add(group)
        with contextlib.nullcontext() if at_s is None else modelled_at(at_s):
            self._logs.create_log_stream(logGroupName=group, logStreamName=stream)

    def ship(self, endpoint_name: str, stream: str, line: str) -> None:
        stamp_ms = int(self._clock.now() * 1000)
        self._queue.put((log_group(endpoint_name), stream, stamp_ms, line.rstrip("\n")))

    def close(self) -> None:
        self._queue.put(None)
        self._thread.join(timeout=10)

    def _run(self) -> None:
        done = False
        while not done:
            batch: list[tuple[str, str, int, str]] = []
            try:
                item = self._queue.get(timeout=FLUSH_EVERY_S)
                while True:
                    if item is None:
                        done = True
                        break
                    batch.append(item)
                    if len(batch) >= MAX_BATCH:
                        break
                    item = self._queue.get_nowait()
            except queue.Empty:
                pass
            self._send(batch)

    def _send(self, batch: list[tuple[str, str, int, str]]) -> None:
        streams: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for group, stream, stamp_ms, line in batch:
            streams.setdefault((group, stream), []).append(
                {"timestamp": stamp_ms, "message": line or " "}
            )
        for (group, stream), events in streams.items():
            try:
                self._logs.put_log_events(
                    logGroupName=group, logStreamName=stream, logEvents=events
                )
            except Exception:  # a lost log batch must not stop the shipping
                continue
