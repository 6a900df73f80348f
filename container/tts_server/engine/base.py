"""The engine interface: text in, a stream of 24 kHz audio segments with timing out.

Nothing here knows about HTTP. The server validates a request with `Engine.check`, then
iterates `Engine.synthesize`; closing that iterator early (client gone, deadline passed)
cancels the work still queued for the request.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

import numpy as np

SAMPLE_RATE = 24_000


@dataclass(frozen=True, slots=True)
class SynthesisRequest:
    """One utterance. `text` may hold inline `<speed ratio=…/>` and `<volume ratio=…/>` tags."""

    text: str
    language: str
    voice: str
    speed: float = 1.0
    volume: float = 1.0


@dataclass(frozen=True, slots=True)
class PhonemeTiming:
    phoneme: str
    start_s: float  # from the start of the utterance
    end_s: float


@dataclass(frozen=True, slots=True)
class WordTiming:
    word: str
    start_s: float  # from the start of the utterance
    end_s: float


@dataclass(frozen=True, slots=True)
class Segment:
    """A piece of the utterance (a sentence, or the span between two tags), ready to stream."""

    index: int
    text: str
    phonemes: str
    audio: np.ndarray  # float32, mono, SAMPLE_RATE, gain already applied
    start_s: float  # offset of this segment in the utterance
    phoneme_timings: tuple[PhonemeTiming, ...] = field(default=())
    word_timings: tuple[WordTiming, ...] = field(default=())
    # time.monotonic() when the model began this segment: the server's queue wait ends here.
    work_started: float | None = None

    @property
    def duration_s(self) -> float:
        return len(self.audio) / SAMPLE_RATE


@dataclass(frozen=True, slots=True)
class InputProblem:
    """One bad field of a request, in the request's own terms (e.g. `transcript`, `voice`)."""

    field: str
    message: str


class EngineError(Exception):
    """Synthesis failed for a reason that is not the caller's input."""


class RequestRejected(ValueError):
    """`synthesize` was handed a request that `check` would have refused."""

    def __init__(self, problems: list[InputProblem]) -> None:
        super().__init__("; ".join(f"{p.field}: {p.message}" for p in problems))
        self.problems = problems


class Engine(ABC):
    """A loaded Kokoro model that many requests share.

    Lifecycle: `load()` (weights into memory), `warmup()` (one throwaway synthesis), then any
    number of concurrent `synthesize()` calls, then `close()`. `check()` is cheap and may be
    called before `load()` finishes.
    """

    sample_rate: int = SAMPLE_RATE

    @property
    @abstractmethod
    def languages(self) -> frozenset[str]: ...

    @property
    @abstractmethod
    def voices(self) -> frozenset[str]: ...

    @property
    @abstractmethod
    def performance_env(self) -> dict[str, str]:
        """Settings that change performance (backend, mode, batch size), for the fingerprint."""

    @property
    @abstractmethod
    def weights_sha256(self) -> str:
        """Hex digest over the weights and voices in use, for the local image digest."""

    @abstractmethod
    async def load(self) -> None: ...

    @abstractmethod
    async def warmup(self) -> None: ...

    @abstractmethod
    async def close(self) -> None: ...

    def on_failure(self, callback: Callable[[str], None]) -> None:  # noqa: B027
        """Have `callback(reason)` called, from any thread, if the engine can no longer serve
        (its own process died). An engine that lives in the server's process cannot fail
        apart from it; this default keeps nothing."""

    @abstractmethod
    def check(self, request: SynthesisRequest) -> list[InputProblem]:
        """Every problem with the request's text, tags, language and voice; empty when fine."""

    @abstractmethod
    def synthesize(self, request: SynthesisRequest) -> AsyncIterator[Segment]:
        """Yield segments in order, each as soon as it is ready.

        Raises `RequestRejected` (before the first segment) when `check` finds problems.
        """
