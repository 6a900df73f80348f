"""What the scheduler asks of a model backend: batches of token sequences in, audio out."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
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

    def warm(self) -> float:
        """Do before serving whatever the first passes would otherwise pay (compilation);
        seconds taken. Most backends have nothing to do."""
        return 0.0

    def close(self) -> None:  # noqa: B027 - most backends hold nothing to release
        """Release the model's memory."""
