"""`KokoroEngine`: the `Engine` the server holds, over either backend.

Per request: the text front end cuts the transcript into pieces (tags, sentences), G2P
runs on its own thread for all pieces in order, and each piece goes to the scheduler as
soon as its phonemes are ready; every finished piece is yielded as a `Segment` with its
phoneme and word timings. Closing the iterator early cancels what is still queued.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator, Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np

from tts_bench.engine_modes import BATCHING_ENGINE_MODE, SERIAL_ENGINE_MODE
from tts_server.engine.backend import MAX_PHONEMES, InferenceItem
from tts_server.engine.base import (
    Engine,
    EngineError,
    InputProblem,
    RequestRejected,
    Segment,
    SynthesisRequest,
)
from tts_server.engine.g2p import (
    LANGUAGES,
    Phonemized,
    Phonemizer,
    build_backends,
    load_table,
    split_phonemized,
)
from tts_server.engine.scheduler import SegmentRunner
from tts_server.engine.text import (
    SPEED_RANGE,
    VOLUME_RANGE,
    effective_ratio_problems,
    segment_text,
)
from tts_server.engine.timing import timings

Mode = Literal["concurrent", "serial"]  # tts_bench.engine_modes names them for the plan
MODES: tuple[Mode, ...] = (BATCHING_ENGINE_MODE, SERIAL_ENGINE_MODE)  # type: ignore[assignment]
# A JSON file of precomputed G2P tokens used instead of the live G2P (g2p.load_table).
G2P_TABLE_ENV = "ENGINE_G2P_TABLE"


@dataclass(frozen=True, slots=True)
class LoadedModel:
    runner: SegmentRunner  # the backend behind its scheduler, here or in a process of its own
    vocab: dict[str, int]
    voices: dict[str, np.ndarray]  # name -> (510, 1, 256) style pack


@dataclass(frozen=True, slots=True)
class ModelSource:
    """What the engine knows before loading (cheap) and how to load the rest (slow)."""

    backend: str
    voice_names: frozenset[str]
    settings: dict[str, str]  # performance settings, known before loading
    weights_sha256: Callable[[], str]
    load: Callable[[], LoadedModel]


class KokoroEngine(Engine):
    """Kokoro-82M behind the `Engine` interface.

    Build it with `create_engine`; then `await load()`, `await warmup()`, and iterate
    `synthesize(request)` from as many tasks as you like.
    """

    def __init__(self, source: ModelSource, mode: Mode = "concurrent") -> None:
        if mode not in MODES:
            raise EngineError(f"unknown engine mode {mode!r}; use one of {MODES}")
        self._source = source
        self._mode = mode
        self._model: LoadedModel | None = None
        self._phonemizer: Phonemizer | None = None
        # One G2P thread: the G2P libraries are not thread-safe, and it keeps model threads free.
        self._g2p_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kokoro-g2p")
        self._serial = asyncio.Lock() if mode == "serial" else None
        self._weights_sha256: str | None = None
        self._g2p_table = os.environ.get(G2P_TABLE_ENV) or None
        self.backend_warmup_s: float | None = None  # set by warmup(): the backend's own share
        self._on_failure: Callable[[str], None] | None = None

    @property
    def languages(self) -> frozenset[str]:
        return LANGUAGES

    @property
    def voices(self) -> frozenset[str]:
        return self._source.voice_names

    @property
    def mode(self) -> Mode:
        return self._mode

    @property
    def segments_synthesised(self) -> int:
        """Segments the model has finished since load, over all requests."""
        return self._model.runner.completed if self._model is not None else 0

    @property
    def forward_passes(self) -> int:
        """Model calls since load; below `segments_synthesised` when segments were batched."""
        return self._model.runner.passes if self._model is not None else 0

    @property
    def busy_s(self) -> float:
        """Seconds the model spent inside passes since load (over wall time: its busy share)."""
        return self._model.runner.busy_s if self._model is not None else 0.0

    @property
    def performance_env(self) -> dict[str, str]:
        return {
            "ENGINE_BACKEND": self._source.backend,
            "ENGINE_MODE": self._mode,
            **self._source.settings,
            **({"ENGINE_G2P": "table"} if self._g2p_table else {}),
        }

    @property
    def weights_sha256(self) -> str:
        if self._weights_sha256 is None:
            self._weights_sha256 = self._source.weights_sha256()
        return self._weights_sha256

    def on_failure(self, callback: Callable[[str], None]) -> None:
        self._on_failure = callback
        if self._model is not None and hasattr(self._model.runner, "on_gone"):
            self._model.runner.on_gone = callback

    async def load(self) -> None:
        if self._model is not None:
            return
        # The G2Ps build on their thread while the weights load: loading the weights releases
        # the GIL for most of its time, so the two overlap (a quiet onnx start: 2.4 s → 1.9 s).
        building = None if self._g2p_table else self._g2p_thread.submit(build_backends)
        model = await asyncio.to_thread(self._source.load)
        table = load_table(Path(self._g2p_table)) if self._g2p_table else None
        self._phonemizer = Phonemizer(model.vocab, table=table, building=building)
        self._model = model
        if self._on_failure is not None and hasattr(model.runner, "on_gone"):
            model.runner.on_gone = self._on_failure

    async def warmup(self) -> None:
        """Load both G2Ps, warm the backend (compile, when it compiles) and run one short
        synthesis, so the first request pays none of it."""
        loop = asyncio.get_running_loop()
        loaded = self._require()
        phonemizer = loaded.phonemizer
        self.backend_warmup_s = await asyncio.to_thread(loaded.model.runner.warm)
        for language in sorted(LANGUAGES):
            await loop.run_in_executor(self._g2p_thread, phonemizer.warm, language)
        voice = sorted(self.voices)[0]
        async for _ in self.synthesize(SynthesisRequest("Warm up.", "en", voice)):
            pass

    async def close(self) -> None:
        if self._model is not None:
            await asyncio.to_thread(self._model.runner.close)
        self._g2p_thread.shutdown(wait=False, cancel_futures=True)
        self._model = None

    def check(self, request: SynthesisRequest) -> list[InputProblem]:
        pieces, problems = segment_text(request.text)
        if request.language not in LANGUAGES:
            problems.append(
                InputProblem("language", f"unsupported language {request.language!r}; "
                             f"use one of {', '.join(sorted(LANGUAGES))}")
            )  # fmt: skip
        if request.voice not in self.voices:
            problems.append(
                InputProblem("voice", f"unknown voice {request.voice!r}; "
                             f"use one of {', '.join(sorted(self.voices))}")
            )  # fmt: skip
        for name, value, (low, high) in (
            ("speed", request.speed, SPEED_RANGE),
            ("volume", request.volume, VOLUME_RANGE),
        ):
            if not low <= value <= high:
                problems.append(InputProblem(name, f"{name} {value} is outside [{low}, {high}]"))
        if not any(p.field in ("speed", "volume") for p in problems):
            problems.extend(effective_ratio_problems(pieces, request.speed, request.volume))
        return problems

    @dataclass(frozen=True, slots=True)
    class _Loaded:
        model: LoadedModel
        scheduler: SegmentRunner
        phonemizer: Phonemizer

    def _require(self) -> KokoroEngine._Loaded:
        if self._model is None or self._phonemizer is None:
            raise EngineError("the engine is not loaded; await engine.load() first")
        return self._Loaded(self._model, self._model.runner, self._phonemizer)

    async def synthesize(self, request: SynthesisRequest) -> AsyncIterator[Segment]:
        problems = self.check(request)
        if problems:
            raise RequestRejected(problems)
        loaded = self._require()
        pieces, _ = segment_text(request.text)
        gate = self._serial if self._serial is not None else contextlib.nullcontext()
        async with gate:
            g2p: list[Future[Phonemized]] = [
                self._g2p_thread.submit(loaded.phonemizer.phonemize, p.text, request.language)
                for p in pieces
            ]
            try:
                index, samples = 0, 0
                pack = loaded.model.voices[request.voice]
                for piece, phonemized in zip(pieces, g2p, strict=True):
                    text = await asyncio.wrap_future(phonemized)
                    for chunk in split_phonemized(text, MAX_PHONEMES):
                        if not chunk.phonemes.strip():
                            continue  # nothing speakable (e.g. only symbols)
                        ids = np.array([loaded.model.vocab[c] for c in chunk.phonemes], np.int64)
                        item = InferenceItem(
                            token_ids=ids,
                            style=pack[len(ids) - 1].reshape(256),
                            speed=request.speed * piece.speed_ratio,
                        )
                        out = await loaded.scheduler.run(item)
                        gain = request.volume * piece.volume_ratio
                        audio = out.audio * np.float32(gain) if gain != 1.0 else out.audio
                        start_s = samples / self.sample_rate
                        phoneme_timings, word_timings = timings(chunk, out.durations, start_s)
                        yield Segment(
                            index=index,
                            text=piece.text,
                            phonemes=chunk.phonemes,
                            audio=audio,
                            start_s=start_s,
                            phoneme_timings=phoneme_timings,
                            word_timings=word_timings,
                            work_started=out.started,
                        )
                        index += 1
                        samples += len(audio)
            finally:
                for future in g2p:
                    future.cancel()
