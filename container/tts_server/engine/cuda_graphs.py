"""CUDA graphs of the synthesis half for the small batches a quiet endpoint runs.

At batch 1 on the H200 a compiled float32 pass took 61 ms of which its 2,429 kernels ran 8.9
(run 6's profile): the rest is the host launching them one by one. Four fifths of the launches
are the synthesis half (F0/N head and decoder up to the iSTFT, `masked_decoder.
synthesize_spectrum`). A CUDA graph records those launches once for fixed shapes and replays
them with one call.

Shapes here depend on each batch's frame count, so frames are rounded up to a bucket
(`bucket_frames`) and the items run as a padded batch with their masks (the same path a
batch of mixed lengths takes, so a lone item is computed as if padded; the parity set says
by how much that moves it). One graph per (batch size, bucket), captured on first use (or in
`warm`), all from one memory pool: the engine runs one pass at a time, so graphs never run
together, and each keeps its own inputs and outputs alive. What a graph cannot hold stays
eager: kokoro's packed LSTMs (their lengths on the host), the alignment (its width is the
frame count, read on the host) and the iSTFT (torch.istft checks its window on the host).

`GraphedText` does the same for the text half, computed without packing
(`static_text`) so that its shapes depend only on the batch size and a bucket of tokens
(`$ENGINE_TEXT_GRAPHS=1`, with the synthesis graphs' batch bound).

Use: `GraphedSynthesis(model, chain, dtype, max_batch)`; `fits(batch, frames)` says whether a
pass goes through it; `spectrum(shared, asr, styles, frames)` is `synthesize_spectrum`
replayed. CUDA only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from tts_server.engine import masked_decoder

Tensor = torch.Tensor
GRAPHS_ENV = "ENGINE_CUDA_GRAPHS"  # 0: off; N: graph the synthesis half of batches of 1..N
DEFAULT_BUCKET_FRAMES = 64  # 1.6 s of audio: the most a pass is padded by
DEFAULT_MAX_FRAMES = 1024  # 25.6 s: longer passes stay eager (and would hold a large pool)


@dataclass(slots=True)
class _Captured:
    """One graph and the tensors it reads and writes (kept alive as long as the graph)."""

    graph: torch.cuda.CUDAGraph
    shared: Tensor
    asr: Tensor
    styles: Tensor
    frames: Tensor
    spectrum: Tensor
    f0: Tensor


class GraphedSynthesis:
    """The synthesis half as CUDA graphs, one per (batch size, frame bucket), for batches of
    at most `max_batch` items and `max_frames` frames."""

    def __init__(
        self,
        model: Any,
        chain: Callable[..., Tensor] | None,
        dtype: str,
        max_batch: int,
        bucket_frames: int = DEFAULT_BUCKET_FRAMES,
        max_frames: int = DEFAULT_MAX_FRAMES,
    ) -> None:
        self.model = model
        self.chain = chain
        self.dtype = dtype
        self.max_batch = max_batch
        self.bucket_frames = bucket_frames
        self.max_frames = max_frames
        self._pool = torch.cuda.graph_pool_handle()
        # One side stream for every capture's warm-up runs: the caching allocator keeps what a
        # stream freed for that stream, so a new stream per capture (64 at warm-up) held a
        # pass's memory each until the H200's 140 GB ran out (run 7, call B).
        self._side = torch.cuda.Stream()
        self._graphs: dict[tuple[int, int], _Captured] = {}

    @property
    def captured(self) -> int:
        return len(self._graphs)

    def bucket(self, frames: int) -> int:
        return -(-frames // self.bucket_frames) * self.bucket_frames

    def fits(self, batch: int, frames: int) -> bool:
        return batch <= self.max_batch and self.bucket(frames) <= self.max_frames

    def _eager(self, shared: Tensor, asr: Tensor, styles: Tensor, frames: Tensor) -> Any:
        low = self.dtype != "float32"
        with torch.autocast("cuda", dtype=getattr(torch, self.dtype), enabled=low,
                            cache_enabled=False):  # fmt: skip
            return masked_decoder.synthesize_spectrum(
                self.model, shared, asr, styles, frames, self.chain
            )

    def capture(self, batch: int, bucket: int, shared_dim: int, asr_dim: int) -> _Captured:
        """Record the graph of (batch, bucket): two eager runs on a side stream first, so
        compilation, cuDNN plans and the allocator's first requests happen outside it.
        Under inference mode, also when called from outside a pass (`TorchBackend.warm`):
        with autograd on, each warm-up run kept every activation (out of memory on the H200
        at batch 8, 512 frames, run 7)."""
        with torch.inference_mode():
            return self._capture(batch, bucket, shared_dim, asr_dim)

    def _capture(self, batch: int, bucket: int, shared_dim: int, asr_dim: int) -> _Captured:
        device = self.model.device
        shared = torch.zeros((batch, bucket, shared_dim), device=device)
        asr = torch.zeros((batch, asr_dim, bucket), device=device)
        styles = torch.zeros((batch, 256), device=device)
        frames = torch.full((batch,), bucket, dtype=torch.long, device=device)
        self._side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self._side):
            for _ in range(2):
                self._eager(shared, asr, styles, frames)
        torch.cuda.current_stream().wait_stream(self._side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=self._pool, capture_error_mode="thread_local"):
            spectrum, f0 = self._eager(shared, asr, styles, frames)
        captured = _Captured(graph, shared, asr, styles, frames, spectrum, f0)
        self._graphs[(batch, bucket)] = captured
        return captured

    def spectrum(
        self, shared: Tensor, asr: Tensor, styles: Tensor, frames: Tensor
    ) -> tuple[Tensor, Tensor]:
        """`synthesize_spectrum` of the batch (always with its masks), from the graph of its
        size and bucket: the generator's output cut to the batch's own frame count (as the
        eager pass makes it) and F0 (B, 2T). The results are the graph's own tensors, valid
        until the next replay."""
        batch, total = shared.shape[0], shared.shape[1]
        bucket = self.bucket(total)
        captured = self._graphs.get((batch, bucket)) or self.capture(
            batch, bucket, shared.shape[2], asr.shape[1]
        )
        captured.shared.zero_()
        captured.shared[:, :total].copy_(shared)
        captured.asr.zero_()
        captured.asr[:, :, :total].copy_(asr)
        captured.styles.copy_(styles)
        captured.frames.copy_(frames)
        captured.graph.replay()
        length = captured.spectrum.shape[-1]
        # The generator's axis is a whole multiple of the frame axis, plus its one-sample
        # reflection pad: keep the batch's own frames, as an eager pass of width `total` has.
        per_frame, pad = divmod(length, bucket)
        spectrum = captured.spectrum[..., : per_frame * total + pad]
        return spectrum, captured.f0[:, : 2 * total]


@dataclass(slots=True)
class _CapturedText:
    """One text-half graph and the tensors it reads and writes."""

    graph: torch.cuda.CUDAGraph
    ids: Tensor
    lengths: Tensor
    styles: Tensor
    speeds: Tensor
    d: Tensor
    duration: Tensor
    text: Tensor


class GraphedText:
    """The text half (`static_text.StaticText`: ALBERT, duration encoder and head, text
    encoder, no packed LSTMs) as CUDA graphs, one per (batch size, token bucket), for
    batches of at most `max_batch` items. Its own memory pool: its outputs are read after
    the synthesis graphs of the same pass were captured or replayed."""

    def __init__(self, static: Any, max_batch: int) -> None:
        self.static = static
        self.max_batch = max_batch
        self._pool = torch.cuda.graph_pool_handle()
        self._side = torch.cuda.Stream()  # one stream for all warm-ups (see GraphedSynthesis)
        self._graphs: dict[tuple[int, int], _CapturedText] = {}

    @property
    def captured(self) -> int:
        return len(self._graphs)

    def fits(self, batch: int, width: int) -> bool:
        return batch <= self.max_batch and self.static.fits(batch, width)

    def capture(self, batch: int, bucket: int) -> _CapturedText:
        """Record the graph of (batch, bucket) after two eager runs on the side stream, under
        inference mode (see `GraphedSynthesis.capture`). Warm-up inputs: every item the full
        bucket long, so no row is all padding."""
        with torch.inference_mode():
            device = self.static.model.device
            ids = torch.ones((batch, bucket), dtype=torch.long, device=device)
            lengths = torch.full((batch,), bucket, dtype=torch.long, device=device)
            styles = torch.zeros((batch, 256), device=device)
            speeds = torch.ones((batch,), device=device)
            self._side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(self._side):
                for _ in range(2):
                    self.static.compute(ids, lengths, styles, speeds)
            torch.cuda.current_stream().wait_stream(self._side)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, pool=self._pool, capture_error_mode="thread_local"):
                d, duration, text = self.static.compute(ids, lengths, styles, speeds)
        captured = _CapturedText(graph, ids, lengths, styles, speeds, d, duration, text)
        self._graphs[(batch, bucket)] = captured
        return captured

    def run(
        self, ids: Tensor, lengths: Tensor, styles: Tensor, speeds: Tensor
    ) -> tuple[Tensor, Tensor, Tensor]:
        """`StaticText.run` replayed: the graph's own outputs cut to the batch's width, valid
        until the next replay of that graph."""
        batch, width = ids.shape
        bucket = self.static.bucket(width)
        captured = self._graphs.get((batch, bucket)) or self.capture(batch, bucket)
        captured.ids.zero_()
        captured.ids[:, :width].copy_(ids)
        captured.lengths.copy_(lengths)
        captured.styles.copy_(styles)
        captured.speeds.copy_(speeds)
        captured.graph.replay()
        return captured.d[:, :width], captured.duration[:, :width], captured.text[..., :width]
