"""Kokoro-82M on onnxruntime (CPU): the embedded default.

The export takes one sequence per run, so there is no batching; instead one session (one
copy of the weights) is shared by `slots` runs at once, each with its share of the cores.
On a small machine that is one run using every core.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from tts_server.engine.backend import (
    SAMPLES_PER_FRAME,
    Backend,
    InferenceItem,
    InferenceOutput,
    PassAbort,
    PassAborted,
)
from tts_server.engine.base import EngineError
from tts_server.engine.offline_weights import DURATION_OUTPUT

# Below this many cores per run, intra-op threads spend more time syncing than computing.
_CORES_PER_SLOT = 4


# Cores one engine may use, where the host runs other work beside it (a second server, a test
# worker): its runs then keep off cores that work needs instead of spinning against it.
CORES_ENV = "ENGINE_CORES"


def usable_cores() -> int:
    """`$ENGINE_CORES` when set, else the cores this process may run on."""
    given = os.environ.get(CORES_ENV, "")
    if given:
        if not given.isdigit() or int(given) < 1:
            raise EngineError(f"{CORES_ENV}={given!r}: give a whole number of cores, 1 or more")
        return int(given)
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def plan_threads(slots: int | None = None) -> tuple[int, int]:
    """(slots, intra-op threads per run) for this machine."""
    cores = usable_cores()
    slots = slots or max(1, cores // _CORES_PER_SLOT)
    return slots, max(1, cores // slots)


def planned_settings() -> dict[str, str]:
    slots, threads = plan_threads()
    return {"ORT_INTRA_OP_THREADS": str(threads), "ENGINE_SLOTS": str(slots)}


class OnnxBackend(Backend):
    """An onnxruntime session over a Kokoro export that outputs `audio` and `durations`."""

    name = "onnx"
    max_batch = 1

    def __init__(self, onnx_path: Path, slots: int | None = None) -> None:
        import onnxruntime as ort

        self.slots, self.threads = plan_threads(slots)
        options = ort.SessionOptions()
        options.intra_op_num_threads = self.threads
        options.inter_op_num_threads = 1
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        try:
            self._session = ort.InferenceSession(
                str(onnx_path), sess_options=options, providers=["CPUExecutionProvider"]
            )
        except Exception as exc:  # onnxruntime raises its own untyped errors
            raise EngineError(f"cannot load ONNX model {onnx_path}: {exc}") from exc
        outputs = {o.name for o in self._session.get_outputs()}
        if DURATION_OUTPUT not in outputs:
            raise EngineError(
                f"{onnx_path} has no `{DURATION_OUTPUT}` output; load it through "
                "offline_weights.ensure_offline_model"
            )

    @property
    def settings(self) -> dict[str, str]:
        return {"ORT_INTRA_OP_THREADS": str(self.threads), "ENGINE_SLOTS": str(self.slots)}

    def infer(self, items: Sequence[InferenceItem]) -> list[InferenceOutput]:
        return [self._one(item) for item in items]

    def infer_abortable(
        self, items: Sequence[InferenceItem], abort: PassAbort
    ) -> list[InferenceOutput]:
        """Each run stops within milliseconds of the abort (onnxruntime's `terminate` flag,
        set from the event loop's thread): on a CPU one long segment is minutes of work."""
        import onnxruntime as ort

        outputs = []
        for item in items:
            options = ort.RunOptions()
            abort.on_request(lambda options=options: setattr(options, "terminate", True))
            try:
                outputs.append(self._one(item, options))
            except Exception:
                if abort.requested:
                    raise PassAborted() from None
                raise
        return outputs

    def _one(self, item: InferenceItem, options: object | None = None) -> InferenceOutput:
        tokens = np.concatenate([[0], item.token_ids, [0]]).astype(np.int64)[None, :]
        audio, durations = self._session.run(
            ["audio", DURATION_OUTPUT],
            {
                "tokens": tokens,
                "style": item.style.reshape(1, 256).astype(np.float32),
                "speed": np.array([item.speed], dtype=np.float32),
            },
            run_options=options,
        )
        frames = np.asarray(durations).reshape(-1).astype(np.int64)
        audio = np.asarray(audio, dtype=np.float32).reshape(-1)
        return InferenceOutput(audio=audio[: frames.sum() * SAMPLES_PER_FRAME], durations=frames)

    def close(self) -> None:
        self._session = None  # type: ignore[assignment]
