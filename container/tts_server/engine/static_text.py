"""The text half of the pass at fixed shapes, with no read of the device on the host.

What keeps the text half out of a CUDA graph (run 7) is kokoro's packed LSTMs: packing a
batch needs its lengths on the host, and the packed shapes change with them. A single-layer
bidirectional LSTM over a right-padded batch can be computed exactly without packing: the
forward direction is causal, so padding after an item never reaches its real steps; the
backward direction runs the reverse weights forward over each item reversed within its own
length (a gather whose index is computed on the device), and the result is gathered back.
Past its length each item is zero, as `pad_packed_sequence` leaves it.

`StaticText(model)` runs ALBERT, the duration encoder, the duration LSTM and head, and the
text encoder this way over token ids padded to a bucket of `bucket_tokens`: every shape
then depends only on (batch, bucket), so `cuda_graphs.GraphedText` can capture it. Eager on
any device; the CPU tests compare it with the packed path.
"""

from __future__ import annotations

from typing import Any

DEFAULT_BUCKET_TOKENS = 32  # token ids (boundary tokens included) are padded to a multiple
MAX_TOKENS = 512  # ALBERT's position table: no pass is wider


def _one_way(lstm: Any, suffix: str) -> Any:
    """A unidirectional copy of one direction of a single-layer bidirectional LSTM."""
    import torch

    device = lstm.weight_ih_l0.device
    one = torch.nn.LSTM(lstm.input_size, lstm.hidden_size, 1, batch_first=True, device=device)
    with torch.no_grad():
        for name in ("weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0"):
            getattr(one, name).copy_(getattr(lstm, name + suffix))
    one.eval()
    one.flatten_parameters()
    return one


class _Bidirectional:
    """`lstm` over a right-padded batch (B, W, C), given each item's reversal index."""

    def __init__(self, lstm: Any) -> None:
        if lstm.num_layers != 1 or not lstm.bidirectional or not lstm.batch_first:
            raise ValueError("only single-layer, bidirectional, batch-first LSTMs")
        self.forward = _one_way(lstm, "")
        self.backward = _one_way(lstm, "_reverse")

    def __call__(self, x: Any, reverse: Any, valid: Any) -> Any:
        import torch

        ahead, _ = self.forward(x)
        flipped = torch.gather(x, 1, reverse[..., None].expand_as(x))
        behind, _ = self.backward(flipped)
        behind = torch.gather(behind, 1, reverse[..., None].expand_as(behind))
        return torch.cat([ahead, behind], dim=-1) * valid


def reversal_index(lengths: Any, width: int) -> Any:
    """(B, width): position t of an item of length L reads L-1-t (t < L) or itself."""
    import torch

    steps = torch.arange(width, device=lengths.device)[None, :]
    return torch.where(steps < lengths[:, None], lengths[:, None] - 1 - steps, steps)


class StaticText:
    """The text half of `torch_backend.forward_batch` without packing; see the module doc."""

    def __init__(self, model: Any, bucket_tokens: int = DEFAULT_BUCKET_TOKENS) -> None:
        self.model = model
        self.bucket_tokens = bucket_tokens
        predictor = model.predictor
        self._duration_lstms = {
            id(block): _Bidirectional(block)
            for block in predictor.text_encoder.lstms
            if isinstance(block, type(predictor.lstm))
        }
        self._predictor_lstm = _Bidirectional(predictor.lstm)
        self._text_lstm = _Bidirectional(model.text_encoder.lstm)

    def bucket(self, width: int) -> int:
        return -(-width // self.bucket_tokens) * self.bucket_tokens

    def fits(self, batch: int, width: int) -> bool:
        del batch  # eager: any batch
        return self.bucket(width) <= MAX_TOKENS

    def run(self, ids: Any, lengths: Any, styles: Any, speeds: Any) -> tuple[Any, Any, Any]:
        """The batch's text half padded to its bucket, cut back to its own width: the
        duration encoder's output d (B, W, C), the unrounded durations (B, W) and the text
        encoder's output (B, C', W). `lengths` on the device (boundary tokens included)."""
        import torch

        width = ids.shape[1]
        padded = torch.zeros((ids.shape[0], self.bucket(width)), dtype=ids.dtype, device=ids.device)
        padded[:, :width] = ids
        d, duration, text = self.compute(padded, lengths, styles, speeds)
        return d[:, :width], duration[:, :width], text[..., :width]

    def compute(self, ids: Any, lengths: Any, styles: Any, speeds: Any) -> tuple[Any, Any, Any]:
        """`run` at the width of `ids` as given, every step on the device (graph-safe)."""
        import torch

        model = self.model
        width = ids.shape[1]
        padding = torch.arange(width, device=ids.device)[None, :] >= lengths[:, None]
        valid = (~padding).float()[..., None]
        reverse = reversal_index(lengths, width)
        # A ready 4-D additive mask: transformers passes it through as it is, where a 2-D
        # one would be checked on the host (all ones or not) before it is expanded.
        blocked = torch.finfo(torch.float32).min
        keys = torch.where(padding, blocked, 0.0)[:, None, None, :]
        bert = model.bert(ids, attention_mask=keys.expand(-1, 1, width, -1))
        d_en = model.bert_encoder(bert).transpose(-1, -2)
        prosody = styles[:, 128:]
        d = self._duration_encoder(d_en, prosody, padding, reverse, valid)
        x = self._predictor_lstm(d, reverse, valid)
        duration = torch.sigmoid(model.predictor.duration_proj(x)).sum(dim=-1) / speeds[:, None]
        return d, duration, self._text_encoder(ids, padding, reverse, valid)

    def _duration_encoder(self, x: Any, style: Any, padding: Any, reverse: Any, valid: Any) -> Any:
        """kokoro's `DurationEncoder.forward` with its packed LSTMs replaced."""
        import torch

        x = x.permute(2, 0, 1)
        s = style.expand(x.shape[0], x.shape[1], -1)
        x = torch.cat([x, s], dim=-1).masked_fill(padding.T[..., None], 0.0)
        x = x.transpose(0, 1).transpose(-1, -2)
        for block in self.model.predictor.text_encoder.lstms:
            lstm = self._duration_lstms.get(id(block))
            if lstm is None:  # AdaLayerNorm
                x = block(x.transpose(-1, -2), style).transpose(-1, -2)
                x = torch.cat([x, s.permute(1, 2, 0)], dim=1).masked_fill(padding[:, None], 0.0)
            else:
                x = lstm(x.transpose(-1, -2), reverse, valid).transpose(-1, -2)
        return x.transpose(-1, -2)

    def _text_encoder(self, ids: Any, padding: Any, reverse: Any, valid: Any) -> Any:
        """kokoro's `TextEncoder.forward` with its packed LSTM replaced."""
        encoder = self.model.text_encoder
        mask = padding[:, None]
        x = encoder.embedding(ids).transpose(1, 2).masked_fill(mask, 0.0)
        for block in encoder.cnn:
            x = block(x).masked_fill(mask, 0.0)
        return self._text_lstm(x.transpose(1, 2), reverse, valid).transpose(1, 2)
