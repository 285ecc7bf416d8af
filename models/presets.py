"""Model sizes (``MODEL_SIZES``, ``orbitlaw train --preset``). ``gpt-109m`` is exactly the reference model of
Vafa et al. (2025): nanoGPT GPT-2 small over pair tokens, 108.53M parameters. ``small`` fits one GPU (about
22M), ``tiny`` trains on 2 CPU cores within minutes (4.1M parameters, most of them in the two embedding tables
and the 2 x 7003 head; its context is the first 256 tokens of each sequence, since the 14006 logits per token
dominate the cost on a CPU). ``tiny`` starts its bin embeddings and head at Fourier features of the bin centres
(``embed_init="fourier"``, see ``GPT._fourier_init``): with the normal init a tiny model spends its
minutes learning the order of 7000 bins one by one (``benchmarks/tiny_convergence.py`` compares both).
``control`` is the positive control's regression GPT (docs/protocol.md, "A positive control", after Liu et al. 2026):
continuous (x, y) positions in AU in, MSE out, 2 layers, width 32, one head (25.8k parameters trained on
model windows of W = 3 steps, ``TrainConfig.chunk_steps``; 32.0k reading 200 positions whole)."""

from __future__ import annotations

from dataclasses import fields

from orbitlaw.models import architectures
from orbitlaw.models.gpt import GPT, GPTConfig

MODEL_SIZES: dict[str, dict] = {
    "gpt-109m": {"n_layer": 12, "n_head": 12, "n_embd": 768, "block_size": 999, "pos": "learned"},
    "small": {"n_layer": 6, "n_head": 6, "n_embd": 384, "block_size": 999},
    "tiny": {"n_layer": 2, "n_head": 4, "n_embd": 128, "block_size": 256, "embed_init": "fourier"},
    "control": {"n_layer": 2, "n_head": 1, "n_embd": 32, "block_size": 200, "regression": True, "pad_id": None},
}


def model_config(preset: str, attention: str = "softmax", arch: str = "gpt", **overrides) -> GPTConfig:
    """The GPTConfig of model size ``preset`` with ``attention`` and any GPTConfig field overridden (validated).

    Every size applies to every ``arch`` (same width, depth, embeddings and head; only the core blocks
    differ, see ``orbitlaw.models.architectures``); a core with a recurrent state reads positions in order and
    takes no position embedding (``pos="none"``) unless ``pos`` is given."""
    if preset not in MODEL_SIZES:
        raise ValueError(f"unknown model preset {preset!r}; choose one of {', '.join(MODEL_SIZES)}")
    known = {f.name for f in fields(GPTConfig)}
    unknown = set(overrides) - known
    if unknown:
        raise ValueError(f"unknown model setting(s) {', '.join(sorted(unknown))}")
    base = {**MODEL_SIZES[preset], "attention": attention, "arch": arch}
    if architectures.get(arch).recurrent_state:
        base["pos"] = "none"
    config = GPTConfig(**{**base, **overrides})
    config.validate()
    return config


def build_model(preset: str, attention: str = "softmax", **overrides) -> GPT:
    """A freshly initialised GPT; calling it on int64 tokens (B, T, 2) returns (logits (B, T, 2, vocab),
    loss or None)."""
    return GPT(model_config(preset, attention, **overrides))
