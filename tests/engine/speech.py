"""What "sounds like speech" means for a test that cannot listen."""

from __future__ import annotations

import numpy as np
from tts_server.engine import SAMPLE_RATE


def speech_problems(audio: np.ndarray, words: int) -> list[str]:
    """Reasons the audio is not plausible speech for `words` words; empty when it is."""
    problems = []
    seconds = len(audio) / SAMPLE_RATE
    # Conversational speech runs at roughly 2-4 words per second; allow slack both ways.
    if not 0.15 * words <= seconds <= 1.0 * words + 1.0:
        problems.append(f"{seconds:.2f} s is implausible for {words} words")
    peak = float(np.max(np.abs(audio))) if len(audio) else 0.0
    if peak >= 0.999:
        problems.append(f"clipping (peak {peak:.3f})")
    frames = audio[: len(audio) // 480 * 480].reshape(-1, 480)  # 20 ms frames
    rms = np.sqrt(np.mean(frames**2, axis=1))
    if float(np.mean(rms > 0.01)) < 0.4:
        problems.append(f"mostly silent ({np.mean(rms > 0.01):.0%} of frames voiced)")
    # Speech is syllabic: loudness comes and goes, it is not a steady tone or hiss.
    if len(rms) and float(np.std(rms) / (np.mean(rms) + 1e-9)) < 0.3:
        problems.append("loudness too steady for speech")
    return problems
