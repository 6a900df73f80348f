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


def log_mel(audio: np.ndarray, bands: int = 80) -> np.ndarray:
    """(frames, bands) log-mel spectrogram in dB: 50 ms Hann windows every 12.5 ms."""
    size, hop = 1200, 300
    if len(audio) < size:
        audio = np.pad(audio, (0, size - len(audio)))
    frames = np.lib.stride_tricks.sliding_window_view(audio, size)[::hop] * np.hanning(size)
    power = np.abs(np.fft.rfft(frames, axis=1)) ** 2
    mel = lambda hz: 2595 * np.log10(1 + hz / 700)  # noqa: E731
    edges = 700 * (10 ** (np.linspace(mel(50), mel(SAMPLE_RATE / 2), bands + 2) / 2595) - 1)
    freqs = np.fft.rfftfreq(size, 1 / SAMPLE_RATE)
    lower, centre, upper = edges[:-2, None], edges[1:-1, None], edges[2:, None]
    weights = np.maximum(
        0, np.minimum((freqs - lower) / (centre - lower), (upper - freqs) / (upper - centre))
    )
    return 10 * np.log10(power @ weights.T + 1e-10)


def log_mel_distance(reference: np.ndarray, other: np.ndarray) -> tuple[float, float]:
    """(mean |dB difference|, Pearson r) over the frames within 50 dB of the loudest."""
    a, b = log_mel(reference), log_mel(other)
    n = min(len(a), len(b))
    a, b = a[:n], b[:n]
    loud = a.max(axis=1) > a.max() - 50
    a, b = np.maximum(a[loud], a.max() - 80), np.maximum(b[loud], a.max() - 80)  # floor silence
    return float(np.mean(np.abs(a - b))), float(np.corrcoef(a.ravel(), b.ravel())[0, 1])
