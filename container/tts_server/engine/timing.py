"""Per-token durations (frames) → phoneme and word timestamps in seconds."""

from __future__ import annotations

import numpy as np

from tts_server.engine.backend import SAMPLES_PER_FRAME
from tts_server.engine.base import SAMPLE_RATE, PhonemeTiming, WordTiming
from tts_server.engine.g2p import Phonemized

FRAME_S = SAMPLES_PER_FRAME / SAMPLE_RATE


def timings(
    text: Phonemized, durations: np.ndarray, offset_s: float
) -> tuple[tuple[PhonemeTiming, ...], tuple[WordTiming, ...]]:
    """Timestamps from the start of the utterance; `durations` includes the boundary tokens.

    Spaces take time (the pause between words) but are not listed as phonemes.
    """
    edges = offset_s + np.concatenate([[0], np.cumsum(durations)]) * FRAME_S
    # Phoneme i is token i + 1 (token 0 is the leading boundary token).
    starts, ends = edges[1 : len(text.phonemes) + 1], edges[2 : len(text.phonemes) + 2]
    phonemes = tuple(
        PhonemeTiming(p, float(s), float(e))
        for p, s, e in zip(text.phonemes, starts, ends, strict=True)
        if p != " "
    )
    words = tuple(
        WordTiming(w.word, float(starts[w.start]), float(ends[w.end - 1]))
        for w in text.words
        if w.end > w.start
    )
    return phonemes, words
