"""Kokoro's F0/N head and iSTFTNet decoder over a padded batch, with the padding masks as tensors.

`KModel` runs one sequence at a time. In a padded batch a short item must not hear its
neighbours' padding: every convolution after the text encoders sees zeros past the item's end,
and every instance norm (AdaIN) takes its statistics over the item's real frames only. Here
those masks are plain tensors built from the items' frame counts, once per time resolution of
the pass, and handed to each module call; nothing is read from a context variable or a hook,
so `torch.compile` traces the whole path as one graph and fuses each mask into the
elementwise chain around it (Snake activation, AdaIN, residual sums).

The functions walk kokoro's own modules (same weights, same arithmetic) and replace only
their `forward`. The generator's noise (random initial phase, additive Gaussian noise) is
left out, as in the int8 ONNX export, so synthesis is deterministic. The harmonic source's
phase is a running sum over up to a minute of samples: it is computed in float32 even when
the rest of the pass runs in bfloat16, since bfloat16 would lose the phase within a second.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F

Tensor = torch.Tensor
_RSQRT2 = 1 / math.sqrt(2)


class PaddingMasks:
    """Per item, 1 on its real part of a time axis of any resolution; `None` for a lone item.

    An item with `frames` frames out of the pass's `total` holds round(frames/total * L)
    positions of an axis of length L (at least 1): exact at the resolutions that are whole
    multiples of the frame axis, and the nearest position at the generator's odd one.
    """

    def __init__(self, frames: Tensor | None, total: int) -> None:
        self._share = None if frames is None else frames.to(torch.float32) / total
        self._by_length: dict[int, Tensor] = {}

    def at(self, x: Tensor) -> Tensor | None:
        """(B, 1, L) in x's dtype for x's last axis L; built once per length outside compile."""
        if self._share is None:
            return None
        length = x.shape[-1]
        compiling = torch.compiler.is_compiling()
        if not compiling and length in self._by_length:
            return self._by_length[length]
        valid = torch.clamp(torch.round(self._share * length).long(), 1, length)
        mask = torch.arange(length, device=x.device)[None, :] < valid[:, None]
        mask = mask.to(x.dtype)[:, None, :]
        if not compiling:  # under compile the graph deduplicates equal expressions itself
            self._by_length[length] = mask
        return mask


def _masked(x: Tensor, mask: Tensor | None) -> Tensor:
    return x if mask is None else x * mask.to(x.dtype)


def conv(module: Any, x: Tensor, masks: PaddingMasks) -> Tensor:
    """A convolution on the frame axis that reads zeros past each item's end."""
    return module(_masked(x, masks.at(x)))


def adain(module: Any, x: Tensor, style: Tensor, masks: PaddingMasks) -> Tensor:
    """kokoro's AdaIN1d; with masks, instance statistics over each item's real frames only."""
    h = module.fc(style)
    gamma, beta = torch.chunk(h.view(h.size(0), h.size(1), 1), chunks=2, dim=1)
    mask = masks.at(x)
    if mask is None:
        return (1 + gamma) * module.norm(x) + beta
    mask = mask.to(x.dtype)
    count = mask.sum(-1, keepdim=True)
    mean = (x * mask).sum(-1, keepdim=True) / count
    var = (((x - mean) * mask) ** 2).sum(-1, keepdim=True) / count
    normed = (x - mean) / torch.sqrt(var + module.norm.eps)
    if module.norm.affine:
        normed = normed * module.norm.weight[None, :, None] + module.norm.bias[None, :, None]
    return (1 + gamma) * normed + beta


def adain_res_blk(block: Any, x: Tensor, style: Tensor, masks: PaddingMasks) -> Tensor:
    """kokoro.istftnet.AdainResBlk1d (eval: dropout off)."""
    r = block.actv(adain(block.norm1, x, style, masks))
    if block.upsample_type != "none":
        r = conv(block.pool, r, masks)
    r = conv(block.conv1, r, masks)
    r = block.actv(adain(block.norm2, r, style, masks))
    r = conv(block.conv2, r, masks)
    shortcut = block.upsample(x)
    if block.learned_sc:
        shortcut = conv(block.conv1x1, shortcut, masks)
    return (r + shortcut) * _RSQRT2


def _snake(x: Tensor, alpha: Tensor) -> Tensor:
    return x + (1 / alpha) * (torch.sin(alpha * x) ** 2)


def ada_in_res_block(block: Any, x: Tensor, style: Tensor, masks: PaddingMasks) -> Tensor:
    """kokoro.istftnet.AdaINResBlock1: AdaIN, Snake, dilated convolution, twice, residual."""
    for c1, c2, n1, n2, a1, a2 in zip(
        block.convs1, block.convs2, block.adain1, block.adain2, block.alpha1, block.alpha2,
        strict=True,
    ):  # fmt: skip
        xt = conv(c1, _snake(adain(n1, x, style, masks), a1), masks)
        xt = conv(c2, _snake(adain(n2, xt, style, masks), a2), masks)
        x = xt + x
    return x


def harmonic_source(source: Any, f0: Tensor) -> Tensor:
    """kokoro's SourceModuleHnNSF without noise: (B, samples, 1) f0 in Hz to the merged source."""
    sine_gen = source.l_sin_gen
    with torch.autocast(f0.device.type, enabled=False):
        f0 = f0.float()
        harmonics = torch.arange(1, sine_gen.harmonic_num + 2, device=f0.device, dtype=f0.dtype)
        rad = (f0 * harmonics / sine_gen.sampling_rate) % 1
        scale = sine_gen.upsample_scale
        rad = F.interpolate(rad.transpose(1, 2), scale_factor=1 / scale, mode="linear")
        phase = torch.cumsum(rad.transpose(1, 2), dim=1) * 2 * torch.pi
        phase = F.interpolate(phase.transpose(1, 2) * scale, scale_factor=scale, mode="linear")
        sines = torch.sin(phase.transpose(1, 2)) * sine_gen.sine_amp
        voiced = (f0 > sine_gen.voiced_threshold).to(torch.float32)
        merged = source.l_linear(sines * voiced)
        return torch.tanh(merged)


def generator(gen: Any, x: Tensor, style: Tensor, f0: Tensor, masks: PaddingMasks) -> Tensor:
    """kokoro.istftnet.Generator: harmonic source, upsampling with residual blocks, iSTFT."""
    with torch.autocast(f0.device.type, enabled=False):
        f0_samples = gen.f0_upsamp(f0.float()[:, None]).transpose(1, 2)
        source = harmonic_source(gen.m_source, f0_samples).transpose(1, 2).squeeze(1)
        har_spec, har_phase = gen.stft.transform(source)
        har = torch.cat([har_spec, har_phase], dim=1)
    for i in range(gen.num_upsamples):
        x = F.leaky_relu(x, negative_slope=0.1)
        x_source = ada_in_res_block(
            gen.noise_res[i], conv(gen.noise_convs[i], har, masks), style, masks
        )
        x = conv(gen.ups[i], x, masks)
        if i == gen.num_upsamples - 1:
            x = gen.reflection_pad(x)
        x = x + x_source
        blocks = gen.resblocks[i * gen.num_kernels : (i + 1) * gen.num_kernels]
        xs = ada_in_res_block(blocks[0], x, style, masks)
        for block in blocks[1:]:
            xs = xs + ada_in_res_block(block, x, style, masks)
        x = xs / gen.num_kernels
    x = conv(gen.conv_post, F.leaky_relu(x), masks)
    with torch.autocast(x.device.type, enabled=False):
        x = x.float()
        spec = torch.exp(x[:, : gen.post_n_fft // 2 + 1, :])
        phase = torch.sin(x[:, gen.post_n_fft // 2 + 1 :, :])
        return gen.stft.inverse(spec, phase)


def decoder(
    dec: Any, asr: Tensor, f0: Tensor, n: Tensor, style: Tensor, masks: PaddingMasks
) -> Tensor:
    """kokoro.istftnet.Decoder: (B, C, T) aligned text, (B, 2T) F0 and energy -> (B, 1, samples)."""
    f0_down = conv(dec.F0_conv, f0.unsqueeze(1), masks)
    n_down = conv(dec.N_conv, n.unsqueeze(1), masks)
    x = adain_res_blk(dec.encode, torch.cat([asr, f0_down, n_down], dim=1), style, masks)
    asr_res = conv(dec.asr_res[0], asr, masks)
    residual = True
    for block in dec.decode:
        if residual:
            x = torch.cat([x, asr_res, f0_down, n_down], dim=1)
        x = adain_res_blk(block, x, style, masks)
        if block.upsample_type != "none":
            residual = False
    return generator(dec.generator, x, style, f0, masks)


def synthesize(
    model: Any,
    shared: Tensor,
    asr: Tensor,
    styles: Tensor,
    frames: Tensor | None,
) -> tuple[Tensor, Tensor]:
    """F0/N head and decoder: (B, T, 512) shared LSTM output, (B, 512, T) aligned text,
    (B, 256) styles, per item frame counts (None for a lone item) -> audio (B, 600T), F0 (B, 2T).

    The one function `torch.compile` wraps: its inputs are tensors only, so one graph covers it.
    """
    total = asr.shape[-1]
    masks = PaddingMasks(frames, total)
    prosody, acoustic = styles[:, 128:], styles[:, :128]
    predictor = model.predictor
    f0 = n = shared.transpose(-1, -2)
    for block in predictor.F0:
        f0 = adain_res_blk(block, f0, prosody, masks)
    f0 = conv(predictor.F0_proj, f0, masks).squeeze(1)
    for block in predictor.N:
        n = adain_res_blk(block, n, prosody, masks)
    n = conv(predictor.N_proj, n, masks).squeeze(1)
    if frames is not None:  # the curves past each item's end are zero, as they are alone
        curve = (torch.arange(2 * total, device=f0.device)[None, :] < 2 * frames[:, None]).to(
            f0.dtype
        )
        f0, n = f0 * curve, n * curve
    audio = decoder(model.decoder, asr, f0, n, acoustic, masks)
    return audio.reshape(audio.shape[0], -1).float(), f0.float()


def fold_weight_norm(model: Any) -> int:
    """Fold every weight-normalised module's g·v/|v| into a plain weight, once at load.

    Weight norm recomputes each weight from two tensors on every call (two extra kernels per
    convolution, hundreds per pass); at inference the weight never changes. Returns how many
    modules were folded.
    """
    from torch.nn.utils import remove_weight_norm

    folded = 0
    for module in model.modules():
        if hasattr(module, "weight_g") and hasattr(module, "weight_v"):
            remove_weight_norm(module)
            folded += 1
    return folded
