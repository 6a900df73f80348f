"""Audio as the caller asked for it: the engine's 24 kHz float32 resampled, encoded, chunked.

Pure numpy, no I/O; CPU-bound, so the server calls it off the event loop. Each chunk holds at
most 20 ms of audio (SPEC §3). Encodings: 16-bit and 32-bit float little-endian PCM, and the
two G.711 companding laws (μ-law, A-law) that telephony callers ask for.
"""

from __future__ import annotations

import base64

import numpy as np
import soxr

BYTES_PER_SAMPLE: dict[str, int] = {"pcm_s16le": 2, "pcm_f32le": 4, "pcm_mulaw": 1, "pcm_alaw": 1}
CHUNK_SECONDS = 0.020


def samples_per_chunk(sample_rate: int) -> int:
    """The most whole samples that fit in 20 ms (220 at 11025 Hz, 480 at 24 kHz)."""
    return int(sample_rate * CHUNK_SECONDS)


def resampled_length(n: int, src_rate: int, dst_rate: int) -> int:
    return round(n * dst_rate / src_rate)


def resample(audio: np.ndarray, src_rate: int, dst_rate: int) -> np.ndarray:
    """Band-limited resampling of mono float audio to `dst_rate` (libsoxr, its HQ preset:
    flat to 91 % of the lower Nyquist, images and aliases far below 16-bit noise), trimmed or
    padded to `resampled_length` (libsoxr rounds a half sample the other way at some rates).

    Chosen over the hand-written polyphase filter it replaced by `serving_path_bench.py`'s
    comparison (speed, passband error, alias level at 8 kHz; measurements/lab/gpu-bench.md).
    """
    audio = np.asarray(audio, dtype=np.float32)
    if src_rate == dst_rate or audio.size == 0:
        return audio
    out = soxr.resample(audio, src_rate, dst_rate, quality="HQ").astype(np.float32, copy=False)
    n_out = resampled_length(audio.size, src_rate, dst_rate)
    if out.size >= n_out:
        return out[:n_out]
    return np.concatenate([out, np.zeros(n_out - out.size, np.float32)])


def encode(audio: np.ndarray, encoding: str) -> bytes:
    """Float audio in [-1, 1] as bytes of `encoding` (values outside are clipped)."""
    clipped = np.clip(np.asarray(audio, dtype=np.float32), -1.0, 1.0)
    if encoding == "pcm_f32le":
        return clipped.astype("<f4").tobytes()
    pcm16 = np.round(clipped * 32767.0).astype(np.int16)
    if encoding == "pcm_s16le":
        return pcm16.astype("<i2").tobytes()
    if encoding == "pcm_mulaw":
        return _mulaw(pcm16).tobytes()
    if encoding == "pcm_alaw":
        return _alaw(pcm16).tobytes()
    raise ValueError(f"unknown encoding {encoding!r}; use one of {', '.join(BYTES_PER_SAMPLE)}")


def encoded_chunks(
    audio_24k: np.ndarray, src_rate: int, sample_rate: int, encoding: str
) -> list[bytes]:
    """Resample, encode and cut into chunks of at most 20 ms each."""
    data, step = _encoded(audio_24k, src_rate, sample_rate, encoding)
    return [data[i : i + step] for i in range(0, len(data), step)]


def encoded_chunks_b64(
    audio_24k: np.ndarray, src_rate: int, sample_rate: int, encoding: str
) -> list[str]:
    """`encoded_chunks`, each as base64 text (what a chunk event carries)."""
    return base64_chunks(*_encoded(audio_24k, src_rate, sample_rate, encoding))


def _encoded(
    audio_24k: np.ndarray, src_rate: int, sample_rate: int, encoding: str
) -> tuple[bytes, int]:
    """(the whole segment encoded, bytes per 20 ms chunk)."""
    data = encode(resample(audio_24k, src_rate, sample_rate), encoding)
    return data, samples_per_chunk(sample_rate) * BYTES_PER_SAMPLE[encoding]


def base64_chunks(data: bytes, step: int) -> list[str]:
    """The base64 of each `step`-byte piece of `data` (the last may be shorter).

    Base64 maps every 3 bytes to 4 characters on their own, so where `step` is a multiple of
    3 (24 kHz pcm_s16le: 960 bytes) the whole segment is encoded in one call and its text cut
    every step·4/3 characters: the same text as piece by piece, in one call instead of one per
    20 ms; only the last piece can carry padding, and it does either way.
    """
    if step % 3 == 0:
        text = base64.b64encode(data).decode("ascii")
        width = step // 3 * 4
        return [text[i : i + width] for i in range(0, len(text), width)]
    return [base64.b64encode(data[i : i + step]).decode("ascii") for i in range(0, len(data), step)]


# G.711 segment ends; the classic table-free formulation, vectorised.
_ULAW_SEG_END = np.array([0x3F, 0x7F, 0xFF, 0x1FF, 0x3FF, 0x7FF, 0xFFF, 0x1FFF])
_ALAW_SEG_END = np.array([0x1F, 0x3F, 0x7F, 0xFF, 0x1FF, 0x3FF, 0x7FF, 0xFFF])


def _mulaw(pcm16: np.ndarray) -> np.ndarray:
    value = pcm16.astype(np.int32) >> 2  # 14-bit
    mask = np.where(value < 0, 0x7F, 0xFF)
    value = np.minimum(np.abs(value), 8159) + 33  # clip, add the bias
    seg = np.searchsorted(_ULAW_SEG_END, value)  # first segment whose end is >= value
    coded = (seg << 4) | ((value >> (seg + 1)) & 0xF)
    coded = np.where(seg >= 8, 0x7F, coded)
    return ((coded ^ mask) & 0xFF).astype(np.uint8)


def _alaw(pcm16: np.ndarray) -> np.ndarray:
    value = pcm16.astype(np.int32) >> 3  # 13-bit
    negative = value < 0
    mask = np.where(negative, 0x55, 0xD5)
    value = np.where(negative, -value - 1, value)
    seg = np.searchsorted(_ALAW_SEG_END, value)
    mantissa = np.where(seg < 2, value >> 1, value >> np.maximum(seg, 1)) & 0xF
    coded = np.where(seg >= 8, 0x7F, (seg << 4) | mantissa)
    return ((coded ^ mask) & 0xFF).astype(np.uint8)
