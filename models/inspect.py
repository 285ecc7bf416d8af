"""Looking inside a trained GPT: the attention weights of every layer and their entropy.

``attention_weights(model, tokens)`` runs the model once and returns, per layer, the (B, H, T, T) matrix
W of weights each query i puts on each key j, such that the attention output (before the output
projection) is exactly what the model computes:

- every attention but LASER: output = W @ v;
- laser: output = log(W @ exp(v - m)) + m, m the per-channel max of v over the sequence (W is the
  softmax of q k^T / sqrt(d) that LASER applies to exp(v)).

q and k are taken from the model's own forward pass (a forward pre-hook on each block's attention
records its input and rotary tables; q, k, v are then formed by the block's ``c_attn`` exactly as
``CausalSelfAttention.forward`` does), and the weights are the registry's
(``orbitlaw.kernels.registry.weights``: the formulas of ``orbitlaw.kernels.weights``, docs/protocol.md, "Attentions")
with the model's causal mask, sliding window, power p and position encoding. Weights are computed in
float32 (float64 for a float64 model), whatever backend (SDPA, Triton) the model itself used. Memory:
n_layer x B x H x T^2 floats (gpt-109m at T = 999: 48 MB per sequence and layer).

Only the normalised variants' weights sum to 1 over a row; sigmoid and relu weights do not
(sigmoid: each in (0, 1); relu: relu(s) / n_i, possibly all zero), and a relu-l1 row can be all zero.
``attention_entropy`` and ``max_weight`` normalise each row to sum 1 first, so they describe the *shape* of
the distribution over keys for every variant alike.
"""

from __future__ import annotations

import torch

from orbitlaw.kernels import registry
from orbitlaw.models.gpt import GPT
from orbitlaw.models.transformer import CausalSelfAttention, apply_rope


@torch.no_grad()
def attention_qkv(model: GPT, tokens: torch.Tensor) -> list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """(q, k, v) of every layer, each (B, H, T, D) in the model's dtype, rope applied to q and k, as the
    model's attention sees them when run on ``tokens`` (B, T, 2) (the model is run in eval mode)."""
    records: list[tuple[CausalSelfAttention, torch.Tensor, tuple | None]] = []

    def record(module, args):
        x, rope = args
        records.append((module, x, rope))

    hooks = [block.attn.register_forward_pre_hook(record) for block in model.blocks]
    was_training = model.training
    try:
        model.eval()
        model(tokens)
    finally:
        model.train(was_training)
        for hook in hooks:
            hook.remove()
    out = []
    for attn, x, rope in records:  # the same steps as CausalSelfAttention.forward
        B, T, C = x.shape
        H = attn.config.n_head
        q, k, v = attn.c_attn(x).split(C, dim=2)
        q, k, v = (t.view(B, T, H, C // H).transpose(1, 2) for t in (q, k, v))
        if rope is not None:
            q, k = apply_rope(q, *rope), apply_rope(k, *rope)
        out.append((q, k, v))
    return out


def attention_weights(model: GPT, tokens: torch.Tensor) -> list[torch.Tensor]:
    """Attention weights of every layer of ``model`` on ``tokens``.

    Args:
        model: a GPT (any attention of ``orbitlaw.models.attention.ATTENTIONS``, window, learned or rope positions).
        tokens: (B, T, 2) integer token ids (continuous (B, T, 2) AU for a regression model).
    Returns:
        n_layer float32 (float64 for a float64 model) tensors (B, H, T, T): entry [b, h, i, j] is the
        weight query i puts on key j (0 outside the causal mask and window); see the module docstring.
    """
    c = model.config
    return [weights_from_qk(c.attention, q, k, p=c.p, window=c.window) for q, k, _ in attention_qkv(model, tokens)]


def weights_from_qk(name: str, q: torch.Tensor, k: torch.Tensor, p: float = 15.0,
                    window: int | None = None) -> torch.Tensor:
    """(B, H, T, T) weights of attention ``name`` for q, k (B, H, T, D), computed as the model does
    (``orbitlaw.kernels.registry.weights``)."""
    return registry.weights(name, q, k, p=p, window=window)


def _normalised(weights: torch.Tensor) -> torch.Tensor:
    if weights.shape[-1] == 0:
        raise ValueError("attention weights must have at least one key (last dim > 0)")
    return weights / weights.sum(dim=-1, keepdim=True)


def attention_entropy(weights: torch.Tensor) -> torch.Tensor:
    """Entropy (nats) of each query's weights over the keys: (..., T, T) -> (..., T).

    Each row is first divided by its sum, so unnormalised variants (sigmoid, relu) are measured by the
    shape of their distribution (the normalisation is for the entropy only). Uniform weights over the
    causal prefix of query t (0-based) give log(t + 1); all weight on one key gives 0. A row of all-zero
    weights (relu attention where every score is negative) has no distribution: its entropy is NaN.
    """
    prob = _normalised(weights)
    return -torch.special.xlogy(prob, prob).sum(dim=-1)


def max_weight(weights: torch.Tensor) -> torch.Tensor:
    """Largest normalised weight of each query, in [1/n_i, 1] (NaN for an all-zero row): (..., T, T) -> (..., T)."""
    return _normalised(weights).amax(dim=-1)
