"""What a listener hears from one audio stream: playback stalls and the real-time factor.

A listener starts playing at the first audio byte and plays without pause for as long as
audio is buffered. When the next chunk arrives after everything received so far has played
out, playback stalls until it arrives; the stall is that gap. Pure arithmetic over
(arrival time, audio duration) per chunk; the load generator records them, the ladder's
statistics read the per-request totals (`samples.Sample.stall_ms`, `audio_ms`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from tts_bench.errors import TtsBenchError
from tts_bench.measure.samples import Sample


class PlaybackError(TtsBenchError):
    """A playback setting that cannot describe a run."""


def check_underrun_slo(share: float) -> float:
    """--underrun-slo: the largest share of stalled streams a passing rung may have."""
    if not (math.isfinite(share) and 0 < share <= 1):
        raise PlaybackError(f"--underrun-slo {share!r}: a share above 0 and at most 1, e.g. 0.05")
    return share


@dataclass(frozen=True, slots=True)
class Chunk:
    """One audio chunk: when it arrived (seconds, any clock) and how long it plays (seconds)."""

    arrival_s: float
    audio_s: float


@dataclass(frozen=True, slots=True)
class Playback:
    """One stream as heard: total audio, total stall time and how many stalls."""

    audio_s: float
    stall_s: float
    stalls: int

    @property
    def underran(self) -> bool:
        return self.stalls > 0


def playback(chunks: Iterable[Chunk]) -> Playback:
    """Stalls of a listener who starts at the first chunk; chunks in arrival order."""
    tracker = PlaybackTracker()
    for chunk in chunks:
        tracker.add(chunk.arrival_s, chunk.audio_s)
    return tracker.result()


class PlaybackTracker:
    """A stream's chunks fed one at a time as they arrive, without keeping them: the load
    generator keeps three numbers per request instead of every chunk."""

    __slots__ = ("audio_s", "played_out_at", "stall_s", "stalls")

    def __init__(self) -> None:
        self.played_out_at: float | None = None
        self.audio_s = 0.0
        self.stall_s = 0.0
        self.stalls = 0

    def add(self, arrival_s: float, audio_s: float) -> None:
        if self.played_out_at is None:
            self.played_out_at = arrival_s
        elif arrival_s > self.played_out_at:
            self.stall_s += arrival_s - self.played_out_at
            self.stalls += 1
            self.played_out_at = arrival_s
        self.played_out_at += audio_s
        self.audio_s += audio_s

    def result(self) -> Playback:
        return Playback(audio_s=self.audio_s, stall_s=self.stall_s, stalls=self.stalls)


@dataclass(frozen=True, slots=True)
class PlaybackFigures:
    """A rung's playback figures over its successful requests that carried audio."""

    rtf_p50: float | None
    rtf_p95: float | None
    underrun_share: float | None
    stall_ms_p95: float | None


def playback_figures(ok: Sequence[Sample]) -> PlaybackFigures:
    """RTF = the request's latency (send to end of stream) ÷ its audio; stalls as recorded."""
    heard = [s for s in ok if s.audio_ms and s.stall_ms is not None]
    if not heard:
        return PlaybackFigures(None, None, None, None)
    rtf = [s.latency_ms / s.audio_ms for s in heard]  # type: ignore[operator]
    stalls = [s.stall_ms for s in heard]
    return PlaybackFigures(
        rtf_p50=float(np.percentile(rtf, 50)),
        rtf_p95=float(np.percentile(rtf, 95)),
        underrun_share=sum(1 for v in stalls if v > 0) / len(heard),  # type: ignore[operator]
        stall_ms_p95=float(np.percentile(stalls, 95)),
    )
