"""Kokoro's F0/N head and iSTFTNet decoder over a padded batch, with the padding masks as tensors.

`KModel` runs one sequence at a time. In a padded batch a short item must not hear its
neighbours' padding: every convolution after the text encoders sees zeros past the item's end,
and every instance norm (AdaIN) takes its statistics over the item's real frames only. Here
those masks are plain tensors built from the items' frame counts, once per time resolution of
the pass, and handed to each module call; nothing is read from a context variable or a hook.

Most of the decoder's GPU time went to the elementwise chain in front of nearly every
convolution: AdaIN (a style projection, instance statistics, scale and shift), the Snake or
leaky ReLU activation, and the padding mask, about 20 kernels each time. `adain_act` is that
chain as one function of tensors and plain numbers: `torch.compile` (dynamic shapes) turns
it into a reduction and a pointwise kernel, with the mask computed inside them, one small
graph for every block of every width and length, so compiling takes seconds, not the
minutes a whole-decoder graph takes, and a compile cache restores it as fast.

The functions walk kokoro's own modules (same weights, same arithmetic) and replace only
their `forward`. The generator's noise (random initial phase, additive Gaussian noise) is
left out, as in the int8 ONNX export, so synthesis is deterministic. The harmonic source's
phase is a running sum over up to a minute of samples: it is computed in float32 even when
the rest of the pass runs in bfloat16 or float16, which would lose the phase within a second.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

Tensor = torch.Tensor
_RSQRT2 = 1 / math.sqrt(2)


def padding_mask(share: Tensor, x: Tensor) -> Tensor:
    """(B, 1, L) float32, 1 on each item's real part of x's last axis (length L).

    An item whose share of the pass's frame axis is `share` holds round(share * L) positions
    (at least 1): exact at the resolutions that are whole multiples of the frame axis, the
    nearest position at the generator's odd one.
    """
    length = x.shape[-1]
    valid = torch.clamp(torch.round(share * length).long(), 1, length)
    return (torch.arange(length, device=x.device)[None, :] < valid[:, None]).float()[:, None, :]


class PaddingMasks:
    """What every module call of one pass shares: the items' shares of the frame axis (None
    for a lone item), the masks built from them once per time resolution, and the AdaIN
    chain to run (`adain_act`, or its compiled form)."""

    def __init__(
        self, frames: Tensor | None, total: int, chain: Callable[..., Tensor] | None = None
    ) -> None:
        self.share = None if frames is None else frames.to(torch.float32) / total
        self.chain = chain or adain_act
        self._by_length: dict[int, Tensor] = {}

    def at(self, x: Tensor) -> Tensor | None:
        if self.share is None:
            return None
        length = x.shape[-1]
        if length not in self._by_length:
            self._by_length[length] = padding_mask(self.share, x)
        return self._by_length[length]


def conv(module: Any, x: Tensor, masks: PaddingMasks) -> Tensor:
    """A convolution on the frame axis that reads zeros past each item's end."""
    mask = masks.at(x)
    return module(x if mask is None else x * mask.to(x.dtype))


def adain_act(
    x: Tensor,
    h: Tensor,
    norm_weight: Tensor,
    norm_bias: Tensor,
    eps: float,
    alpha: Tensor | None,
    slope: float,
    share: Tensor | None,
) -> Tensor:
    """AdaIN, then Snake(alpha) (or leaky ReLU(slope) when alpha is None), then zeros past
    each item's end: the elementwise chain in front of nearly every decoder convolution.

    `h` is the style projection (gamma, beta). With `share`, the instance statistics cover
    each item's real frames only, so a padded item is normalised as it would be alone. The
    arithmetic is float32 whatever x's dtype; the result has x's dtype. Only tensors and
    plain numbers go in, so `torch.compile` makes one small fused graph of it that serves
    every block of every size (`fused_adain_act`).
    """
    dtype = x.dtype
    x = x.float()
    channels = x.shape[1]
    gamma, beta = h[:, :channels, None].float(), h[:, channels:, None].float()
    if share is None:
        mask = None
        mean = x.mean(-1, keepdim=True)
        var = ((x - mean) ** 2).mean(-1, keepdim=True)
    else:
        mask = padding_mask(share, x)
        count = mask.sum(-1, keepdim=True)
        mean = (x * mask).sum(-1, keepdim=True) / count
        var = (((x - mean) * mask) ** 2).sum(-1, keepdim=True) / count
    normed = (x - mean) / torch.sqrt(var + eps) * norm_weight[None, :, None] + norm_bias[
        None, :, None
    ]
    y = (1 + gamma) * normed + beta
    if alpha is None:
        y = F.leaky_relu(y, slope)
    else:
        alpha = alpha.float()
        y = y + (1 / alpha) * (torch.sin(alpha * y) ** 2)  # Snake1D
    if mask is not None:
        y = y * mask
    return y.to(dtype)


def _norm_act(
    module: Any, x: Tensor, style: Tensor, masks: PaddingMasks, alpha: Tensor | None, slope: float
) -> Tensor:
    """kokoro's AdaIN1d `module` on x, the activation, and the mask of the convolution after."""
    norm = module.norm
    # Plain tensors, not Parameters: compile treats a Parameter's shape as fixed and would make
    # one graph per channel count.
    weight, bias = norm.weight.detach(), norm.bias.detach()
    alpha = None if alpha is None else alpha.detach()
    return masks.chain(x, module.fc(style), weight, bias, norm.eps, alpha, slope, masks.share)


def adain_res_blk(block: Any, x: Tensor, style: Tensor, masks: PaddingMasks) -> Tensor:
    """kokoro.istftnet.AdainResBlk1d (eval: dropout off)."""
    slope = block.actv.negative_slope
    r = _norm_act(block.norm1, x, style, masks, None, slope)
    if block.upsample_type != "none":
        r = conv(block.pool, r, masks)  # input already masked; its output is masked by conv1
        r = conv(block.conv1, r, masks)
    else:
        r = block.conv1(r)
    r = block.conv2(_norm_act(block.norm2, r, style, masks, None, slope))
    shortcut = block.upsample(x)
    if block.learned_sc:
        shortcut = conv(block.conv1x1, shortcut, masks)
    return (r + shortcut) * _RSQRT2


def ada_in_res_block(block: Any, x: Tensor, style: Tensor, masks: PaddingMasks) -> Tensor:
    """kokoro.istftnet.AdaINResBlock1: AdaIN, Snake, dilated convolution, twice, residual."""
    for c1, c2, n1, n2, a1, a2 in zip(
        block.convs1, block.convs2, block.adain1, block.adain2, block.alpha1, block.alpha2,
        strict=True,
    ):  # fmt: skip
        xt = c1(_norm_act(n1, x, style, masks, a1, 0.0))
        xt = c2(_norm_act(n2, xt, style, masks, a2, 0.0))
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
    return istft_tail(gen, generator_spectrum(gen, x, style, f0, masks))


def generator_spectrum(
    gen: Any, x: Tensor, style: Tensor, f0: Tensor, masks: PaddingMasks
) -> Tensor:
    """The generator up to its last convolution: (B, n_fft + 2, L) log-magnitude and phase
    logits. Everything here has static shapes for given input shapes (no host waits), so a
    CUDA graph can hold it; `istft_tail` (torch.istft checks its window on the host) cannot."""
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
    return conv(gen.conv_post, F.leaky_relu(x), masks)


def istft_tail(gen: Any, x: Tensor) -> Tensor:
    """The generator's last step, in float32: magnitude and phase to samples (B, 1, samples)."""
    with torch.autocast(x.device.type, enabled=False):
        x = x.float()
        spec = torch.exp(x[:, : gen.post_n_fft // 2 + 1, :])
        phase = torch.sin(x[:, gen.post_n_fft // 2 + 1 :, :])
        return gen.stft.inverse(spec, phase)


def decoder(
    dec: Any, asr: Tensor, f0: Tensor, n: Tensor, style: Tensor, masks: PaddingMasks
) -> Tensor:
    """kokoro.istftnet.Decoder: (B, C, T) aligned text, (B, 2T) F0 and energy -> (B, 1, samples)."""
    return istft_tail(dec.generator, decoder_spectrum(dec, asr, f0, n, style, masks))


def decoder_spectrum(
    dec: Any, asr: Tensor, f0: Tensor, n: Tensor, style: Tensor, masks: PaddingMasks
) -> Tensor:
    """`decoder` up to the iSTFT (`generator_spectrum`)."""
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
    return generator_spectrum(dec.generator, x, style, f0, masks)


def synthesize(
    model: Any,
    shared: Tensor,
    asr: Tensor,
    styles: Tensor,
    frames: Tensor | None,
    chain: Callable[..., Tensor] | None = None,
) -> tuple[Tensor, Tensor]:
    """F0/N head and decoder: (B, T, 512) shared LSTM output, (B, 512, T) aligned text,
    (B, 256) styles, per item frame counts (None for a lone item) -> audio (B, 600T), F0 (B, 2T).

    `chain` runs every AdaIN + activation + mask chain (default `adain_act`, eager).
    """
    spectrum, f0 = synthesize_spectrum(model, shared, asr, styles, frames, chain)
    audio = istft_tail(model.decoder.generator, spectrum)
    return audio.reshape(audio.shape[0], -1).float(), f0


def synthesize_spectrum(
    model: Any,
    shared: Tensor,
    asr: Tensor,
    styles: Tensor,
    frames: Tensor | None,
    chain: Callable[..., Tensor] | None = None,
) -> tuple[Tensor, Tensor]:
    """`synthesize` up to the iSTFT: the generator's (B, n_fft + 2, L) output and F0 (B, 2T),
    float32. No host waits: what `cuda_graphs.GraphedSynthesis` captures."""
    total = asr.shape[-1]
    masks = PaddingMasks(frames, total, chain)
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
    return decoder_spectrum(model.decoder, asr, f0, n, acoustic, masks), f0.float()


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
