"""Kokoro-82M's architecture, as `KModel` reads it from `config.json`.

The numbers are those of hexgrad/Kokoro-82M's config.json (also shipped inside the
`kokoro-onnx` wheel); `onnx_import` checks each against the shapes in the int8 graph before
it trusts them. The vocabulary is not repeated here: it comes with the weights.
"""

from __future__ import annotations

import copy
from typing import Any

_ARCHITECTURE: dict[str, Any] = {
    "istftnet": {
        "upsample_kernel_sizes": [20, 12],
        "upsample_rates": [10, 6],
        "gen_istft_hop_size": 5,
        "gen_istft_n_fft": 20,
        "resblock_dilation_sizes": [[1, 3, 5], [1, 3, 5], [1, 3, 5]],
        "resblock_kernel_sizes": [3, 7, 11],
        "upsample_initial_channel": 512,
    },
    "dim_in": 64,
    "dropout": 0.2,
    "hidden_dim": 512,
    "max_conv_dim": 512,
    "max_dur": 50,
    "multispeaker": True,
    "n_layer": 3,
    "n_mels": 80,
    "n_token": 178,
    "style_dim": 128,
    "text_encoder_kernel_size": 5,
    "plbert": {
        "hidden_size": 768,
        "num_attention_heads": 12,
        "intermediate_size": 2048,
        "max_position_embeddings": 512,
        "num_hidden_layers": 12,
        "dropout": 0.1,
    },
}


def kokoro_82m_config(vocab: dict[str, int]) -> dict[str, Any]:
    """A complete config.json dict for Kokoro-82M with the given phoneme vocabulary."""
    config = copy.deepcopy(_ARCHITECTURE)
    config["vocab"] = dict(vocab)
    return config
