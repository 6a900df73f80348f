"""Who runs the model when: segments from all requests share the one loaded backend.

`InferenceScheduler` owns `backend.slots` worker threads. Each takes the oldest waiting
segment plus, when the backend batches, more waiting segments up to `max_batch` (those
closest in length to the oldest when more are waiting than fit), and runs them in one
`infer` call. A request keeps at most one segment waiting (it submits the next
when the previous is back), so requests take turns segment by segment and a new request's
first segment never waits behind another request's whole utterance.

`serial` mode (the published design) is the same scheduler behind a gate that admits one
request at a time for its whole utterance; it lives in the engine (`SerialGate`).

Nothing of a request runs after its end (deadline, client gone, cancel): its waiting segment
is dropped, and a running pass whose every segment belongs to ended requests is aborted
where the backend can stop one midway (onnxruntime can; on a CPU one long segment is minutes).
"""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import time
from collections import deque
from concurrent.futures import Future
from typing import Protocol

from tts_server.engine.backend import (
    Backend,
    InferenceItem,
    InferenceOutput,
    PassAbort,
    PassAborted,
)
from tts_server.engine.base import EngineError

_Entry = tuple[InferenceItem, "Future[InferenceOutput]"]


class SegmentRunner(Protocol):
    """What the engine asks of whoever runs the model: this scheduler in the server's own
    process, or `engine_process.EngineProcess`, the same scheduler in a process of its own."""

    completed: int
    passes: int
    busy_s: float

    async def run(self, item: InferenceItem) -> InferenceOutput: ...

    def warm(self) -> float: ...

    def close(self) -> None: ...


@dataclasses.dataclass(eq=False, slots=True)
class _RunningPass:
    """One pass on a worker: its segments' futures, those whose request has ended, and the
    abort that stops it once all of them have."""

    futures: list[Future[InferenceOutput]]
    ended: set[int] = dataclasses.field(default_factory=set)  # id() of ended futures
    abort: PassAbort = dataclasses.field(default_factory=PassAbort)


class InferenceScheduler:
    """Queue segments and run them on the backend's worker threads, batched when possible."""

    def __init__(self, backend: Backend) -> None:
        self._backend = backend
        self._queue: deque[tuple[InferenceItem, Future[InferenceOutput]]] = deque()
        self._ready = threading.Condition()
        self._closed = False
        self.completed = 0  # segments synthesised so far (all requests)
        self.passes = 0  # backend.infer calls so far: fewer than `completed` when batching
        self.aborted = 0  # passes stopped midway because every request in them had ended
        self.busy_s = 0.0  # seconds a worker spent inside passes (its share of wall time)
        self._running: dict[Future[InferenceOutput], _RunningPass] = {}
        self._workers = [
            threading.Thread(target=self._work, name=f"kokoro-infer-{i}", daemon=True)
            for i in range(max(1, backend.slots))
        ]
        for worker in self._workers:
            worker.start()

    @property
    def running_passes(self) -> int:
        """Passes a worker is inside of right now."""
        with self._ready:
            return len({id(p) for p in self._running.values()})

    async def run(self, item: InferenceItem) -> InferenceOutput:
        """Queue one segment; cancelling the await (the request ended) drops it if it has not
        started, and aborts its pass if it has and every other segment in it ended too."""
        future = self.submit(item)
        try:
            return await asyncio.wrap_future(future)
        except asyncio.CancelledError:
            self.end(future)
            raise

    def submit(self, item: InferenceItem) -> Future[InferenceOutput]:
        """Queue one segment from any thread; its future resolves when its pass is done."""
        future: Future[InferenceOutput] = Future()
        with self._ready:
            if self._closed:
                raise EngineError("the engine is closed")
            self._queue.append((item, future))
            self._ready.notify()
        return future

    def warm(self) -> float:
        """The backend's warm-up (compilation, when it compiles); seconds taken."""
        return self._backend.warm()

    def end(self, future: Future[InferenceOutput]) -> None:
        """The request of `future` has ended: nothing of it may run from now on."""
        with self._ready:
            if future.cancel():  # still waiting: a worker will never take it
                self._queue = deque(entry for entry in self._queue if entry[1] is not future)
                return
            running = self._running.get(future)
            if running is None:
                return
            running.ended.add(id(future))
            stop = len(running.ended) == len(running.futures)
        if stop:
            running.abort.request()

    def _take(self) -> tuple[list[_Entry], _RunningPass] | None:
        with self._ready:
            while not self._queue and not self._closed:
                self._ready.wait()
            if self._closed:
                return None
            batch = []
            for item, future in self._choose(self._backend.max_batch):
                if future.set_running_or_notify_cancel():  # False: its request went away
                    batch.append((item, future))
            running = _RunningPass([future for _, future in batch])
            for future in running.futures:
                self._running[future] = running
            return batch, running

    def _choose(self, size: int) -> list[tuple[InferenceItem, Future[InferenceOutput]]]:
        """Up to `size` waiting segments, removed from the queue: the oldest one always.

        With more waiting than fit, the others are those closest in length to the oldest
        (length bucketing): a padded pass costs what its longest item costs, so mixing short
        and long segments wastes the GPU. The oldest goes first, so none waits forever.
        """
        if len(self._queue) <= size:
            chosen = list(self._queue)
            self._queue.clear()
            return chosen
        oldest = self._queue[0]
        length = len(oldest[0].token_ids)
        rest = range(1, len(self._queue))
        nearest = sorted(rest, key=lambda i: (abs(len(self._queue[i][0].token_ids) - length), i))
        picked = {0, *nearest[: size - 1]}
        chosen = [entry for i, entry in enumerate(self._queue) if i in picked]
        kept = [entry for i, entry in enumerate(self._queue) if i not in picked]
        self._queue.clear()
        self._queue.extend(kept)
        return chosen

    def _work(self) -> None:
        while (taken := self._take()) is not None:
            batch, running = taken
            if not batch:
                continue
            started = time.monotonic()
            try:
                outputs = self._backend.infer_abortable([item for item, _ in batch], running.abort)
            except PassAborted:  # every request in it ended: nobody waits for these
                with self._ready:
                    self.aborted += 1
                self._finish(running)
                for _, future in batch:
                    future.set_exception(EngineError("the pass was aborted: its requests ended"))
                continue
            except Exception as exc:  # hand any model failure to the waiting requests
                self._finish(running)
                for _, future in batch:
                    future.set_exception(EngineError(f"synthesis failed: {exc}"))
                continue
            with self._ready:
                self.completed += len(batch)
                self.passes += 1
                self.busy_s += time.monotonic() - started
            self._finish(running)
            for (_, future), output in zip(batch, outputs, strict=True):
                future.set_result(dataclasses.replace(output, started=started))

    def _finish(self, running: _RunningPass) -> None:
        with self._ready:
            for future in running.futures:
                self._running.pop(future, None)

    def close(self) -> None:
        with self._ready:
            self._closed = True
            pending = list(self._queue)
            self._queue.clear()
            self._ready.notify_all()
        for _, future in pending:
            future.cancel()
        for worker in self._workers:
            worker.join(timeout=30)
        self._backend.close()
