"""What the scheduler asks of a model backend: batches of token sequences in, audio out."""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

# One predicted duration frame is this many output samples (istftnet: 2 F0 frames per
# duration frame, 10 x 6 upsampling, hop 5): 25 ms at 24 kHz.
SAMPLES_PER_FRAME = 600
# Kokoro's ALBERT has 512 positions: the phonemes plus the two boundary tokens.
MAX_PHONEMES = 510


@dataclass(frozen=True, slots=True)
class InferenceItem:
    """One segment's model input: token ids (no boundary tokens), style vector, speed."""

    token_ids: np.ndarray  # int64, (n,), 1 <= n <= MAX_PHONEMES
    style: np.ndarray  # float32, (256,)
    speed: float


@dataclass(frozen=True, slots=True)
class InferenceOutput:
    audio: np.ndarray  # float32, (frames * SAMPLES_PER_FRAME,)
    durations: np.ndarray  # int64, (n + 2,), frames per token including the boundary tokens
    started: float = 0.0  # time.monotonic() when a worker began the pass (set by the scheduler)


class PassAborted(Exception):
    """A forward pass stopped midway because every request in it had ended."""


class PassAbort:
    """Asked for by the scheduler, from the event loop, when every request in a running pass
    has ended (deadline, client gone, cancel); the backend stops the pass if it can.

    Thread-safe: the backend registers how to stop (`on_request`) from its worker thread.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._requested = False
        self._hooks: list[Callable[[], None]] = []

    @property
    def requested(self) -> bool:
        return self._requested

    def on_request(self, hook: Callable[[], None]) -> None:
        """Call `hook` when the abort is requested (at once if it already was)."""
        with self._lock:
            if not self._requested:
                self._hooks.append(hook)
                return
        hook()

    def request(self) -> None:
        with self._lock:
            if self._requested:
                return
            self._requested = True
            hooks, self._hooks = self._hooks, []
        for hook in hooks:
            hook()


class Backend(ABC):
    """A loaded model. `infer` blocks; the scheduler calls it from its worker threads.

    `max_batch` is how many items one `infer` call may take (1: no batching); `slots` is how
    many `infer` calls may run at once on the one copy of the weights.
    """

    name: str
    max_batch: int = 1
    slots: int = 1

    @property
    @abstractmethod
    def settings(self) -> dict[str, str]:
        """Settings that change performance, for the fingerprint."""

    @abstractmethod
    def infer(self, items: Sequence[InferenceItem]) -> list[InferenceOutput]: ...

    def infer_abortable(
        self, items: Sequence[InferenceItem], abort: PassAbort
    ) -> list[InferenceOutput]:
        """`infer`, stopped early (raising `PassAborted`) once `abort` is requested.

        A backend that cannot stop a pass midway runs it whole; this default does that.
        """
        return self.infer(items)

    def warm(self) -> float:
        """Do before serving whatever the first passes would otherwise pay (compilation);
        seconds taken. Most backends have nothing to do."""
        return 0.0

    def close(self) -> None:  # noqa: B027 - most backends hold nothing to release
        """Release the model's memory."""
