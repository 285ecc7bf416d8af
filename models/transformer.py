"""The transformer core of the sequence model, as nanoGPT's: pre-LayerNorm blocks of causal self-attention
(any attention of ``orbitlaw.kernels.registry``, optionally over a sliding attention window) and a GELU MLP,
with optional rotary position embeddings on queries and keys.

Every block maps x (B, T, d) to (B, T, d); ``rope`` is None or the (cos, sin) tables of :func:`rope_tables`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
import torch.nn as nn
import torch.nn.functional as F

from orbitlaw.models.attention import attend

if TYPE_CHECKING:
    from orbitlaw.models.gpt import GPTConfig


def rope_tables(T: int, head_dim: int, base: float, device, dtype=torch.float32):
    """cos and sin tables (T, head_dim / 2) of rotary position embeddings, positions 0..T-1."""
    inv_freq = 1.0 / base ** (torch.arange(0, head_dim, 2, device=device, dtype=torch.float32) / head_dim)
    angles = torch.arange(T, device=device, dtype=torch.float32)[:, None] * inv_freq[None, :]
    return angles.cos().to(dtype), angles.sin().to(dtype)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate pairs (x[..., 2i], x[..., 2i+1]) of x (B, H, T, D) by the position angles."""
    x1, x2 = x[..., 0::2], x[..., 1::2]
    out = torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)
    return out.flatten(-2)


class CausalSelfAttention(nn.Module):
    """Multi-head causal attention ``config.attention`` over the last ``config.window`` keys (the attention
    window; None: all of them), its queries evaluated ``config.chunk_size`` at a time (a memory chunk)."""

    def __init__(self, config: GPTConfig):
        super().__init__()
        self.config = config
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd, bias=config.bias)
        self.c_proj = nn.Linear(config.n_embd, config.n_embd, bias=config.bias)
        self.resid_dropout = nn.Dropout(config.dropout)

    def forward(self, x: torch.Tensor, rope=None) -> torch.Tensor:
        B, T, C = x.shape
        H = self.config.n_head
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (t.view(B, T, H, C // H).transpose(1, 2) for t in (q, k, v))  # (B, H, T, D)
        if rope is not None:
            q, k = apply_rope(q, *rope), apply_rope(k, *rope)
        c = self.config
        y = attend(c.attention, q, k, v, p=c.p, window=c.window, chunk_size=c.chunk_size)
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_dropout(self.c_proj(y))


class MLP(nn.Module):
    """d -> 4d -> GELU -> d, then dropout; the feed-forward half of every block (transformer and recurrent)."""

    def __init__(self, d: int, bias: bool, dropout: float):
        super().__init__()
        self.c_fc = nn.Linear(d, 4 * d, bias=bias)
        self.c_proj = nn.Linear(4 * d, d, bias=bias)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        return self.dropout(self.c_proj(F.gelu(self.c_fc(x))))


class Block(nn.Module):
    """x + Attention(LN(x)), then x + MLP(LN(x))."""

    def __init__(self, config: GPTConfig):
        super().__init__()
        self.ln_1 = nn.LayerNorm(config.n_embd, bias=config.bias)
        self.attn = CausalSelfAttention(config)
        self.ln_2 = nn.LayerNorm(config.n_embd, bias=config.bias)
        self.mlp = MLP(config.n_embd, config.bias, config.dropout)

    def forward(self, x, rope=None):
        x = x + self.attn(self.ln_1(x), rope)
        return x + self.mlp(self.ln_2(x))
