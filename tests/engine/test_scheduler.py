"""The scheduler's batching: the oldest segment always rides, the rest are bucketed by length."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence

import numpy as np
from tts_server.engine.backend import Backend, InferenceItem, InferenceOutput
from tts_server.engine.scheduler import InferenceScheduler


class RecordingBackend(Backend):
    """Holds its first pass until released; records each batch's item lengths."""

    name = "recording"

    def __init__(self, max_batch: int) -> None:
        self.max_batch = max_batch
        self.batches: list[list[int]] = []
        self.release = threading.Event()

    @property
    def settings(self) -> dict[str, str]:
        return {}

    def infer(self, items: Sequence[InferenceItem]) -> list[InferenceOutput]:
        if not self.batches:
            self.batches.append([len(i.token_ids) for i in items])
            self.release.wait(timeout=10)
        else:
            self.batches.append([len(i.token_ids) for i in items])
        return [InferenceOutput(np.zeros(1, np.float32), np.zeros(1, np.int64)) for _ in items]


def run_on_own_loop(coroutine) -> None:  # type: ignore[no-untyped-def]
    """Like asyncio.run, but leaves the thread's current-loop setting alone (asyncio.run sets
    it to None on exit, which breaks later tests that ask for the main thread's loop)."""
    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(coroutine)
    finally:
        loop.close()


def item(length: int) -> InferenceItem:
    return InferenceItem(np.ones(length, np.int64), np.zeros(256, np.float32), 1.0)


async def run_all(backend: RecordingBackend, lengths: list[int]) -> None:
    scheduler = InferenceScheduler(backend)
    try:
        first = asyncio.ensure_future(scheduler.run(item(1)))
        while not backend.batches:  # the worker is now busy with the first pass
            await asyncio.sleep(0.01)
        rest = [asyncio.ensure_future(scheduler.run(item(n))) for n in lengths]
        await asyncio.sleep(0.05)  # all queued before the worker is free again
        backend.release.set()
        await asyncio.gather(first, *rest)
    finally:
        scheduler.close()


def test_a_full_queue_is_batched_by_length_around_the_oldest_segment() -> None:
    backend = RecordingBackend(max_batch=3)
    run_on_own_loop(run_all(backend, [50, 10, 200, 48, 12, 190]))
    assert backend.batches[1] == [50, 48, 12]  # the oldest (50) and the two nearest to it
    assert sorted(map(sorted, backend.batches[2:])) == [[10, 190, 200]]


def test_a_queue_that_fits_is_taken_whole_in_arrival_order() -> None:
    backend = RecordingBackend(max_batch=8)
    run_on_own_loop(run_all(backend, [50, 10, 200]))
    assert backend.batches[1:] == [[50, 10, 200]]
