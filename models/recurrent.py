"""Recurrent and state-space cores for the sequence model: the reference's baselines beside the GPT (Vafa et
al. 2025 compare GPT with RNN, LSTM and Mamba models).

Each block is a drop-in replacement for the transformer block (``forward(x, rope=None)``, x (B, T, d) ->
(B, T, d), causal), so the model keeps the GPT's embeddings, head, trainer, checkpoints and probes; only
the core differs (``GPTConfig.arch``, one record per core in ``orbitlaw.models.architectures``):

- ``lstm`` / ``rnn``: pre-LayerNorm residual blocks, x + W LSTM(LN(x)) (or a tanh RNN; W a d x d output
  projection initialised small like the transformer's residual projections, so the untrained block starts
  near the identity), then x + MLP(LN(x)), the MLP as the transformer's (4d GELU). Per layer 17 d^2 (LSTM)
  or 11 d^2 (RNN) weights against the transformer block's 12 d^2.
- ``mamba``: the Mamba block (Gu & Dao 2023), x + Mixer(LN(x)): in-projection to 2 x (expand d), a causal
  depthwise convolution (width 4) and SiLU on one half, the selective scan h_t = exp(dt_t A) h_{t-1} +
  dt_t B_t u_t, y_t = C_t h_t + D u_t with input-dependent dt (softplus), B, C (state size 16), gated by
  SiLU of the other half, out-projection (about 6 d^2 weights). The scan here is plain PyTorch, one step at
  a time (:func:`selective_scan`, checked against the closed form in the tests): it runs on any device,
  slowly; the fused CUDA kernels of ``mamba-ssm`` are not used.
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from orbitlaw.models.transformer import MLP


class RecurrentBlock(nn.Module):
    """x + W RNN(LN(x)), then x + MLP(LN(x)); ``kind`` is ``lstm`` or ``rnn`` (tanh)."""

    def __init__(self, d: int, kind: str, bias: bool = True, dropout: float = 0.0):
        super().__init__()
        self.ln_1 = nn.LayerNorm(d, bias=bias)
        cell = nn.LSTM if kind == "lstm" else nn.RNN
        self.rnn = cell(d, d, batch_first=True, bias=bias)
        self.c_proj = nn.Linear(d, d, bias=bias)
        self.ln_2 = nn.LayerNorm(d, bias=bias)
        self.mlp = MLP(d, bias, dropout)

    def forward(self, x: torch.Tensor, rope=None) -> torch.Tensor:
        out, _ = self.rnn(self.ln_1(x))
        x = x + self.c_proj(out)
        return x + self.mlp(self.ln_2(x))


def selective_scan(u: torch.Tensor, dt: torch.Tensor, A: torch.Tensor, B: torch.Tensor, C: torch.Tensor,
                   D: torch.Tensor) -> torch.Tensor:
    """The Mamba recurrence, step by step.

    u, dt: (batch, T, channels); A: (channels, N) (negative); B, C: (batch, T, N); D: (channels,).
    h_t = exp(dt_t A) * h_{t-1} + dt_t B_t u_t (h: (batch, channels, N), h_0 = 0); y_t = h_t C_t + D u_t.
    Returns y (batch, T, channels).
    """
    batch, T, channels = u.shape
    h = u.new_zeros(batch, channels, A.shape[1])
    decay = torch.exp(dt.unsqueeze(-1) * A)  # (batch, T, channels, N)
    drive = (dt * u).unsqueeze(-1) * B.unsqueeze(2)  # (batch, T, channels, N)
    ys = []
    for t in range(T):
        h = decay[:, t] * h + drive[:, t]
        ys.append(torch.einsum("bcn,bn->bc", h, C[:, t]))
    return torch.stack(ys, dim=1) + u * D


class MambaBlock(nn.Module):
    """x + Mixer(LN(x)), the Mamba mixer with expand 2, state size 16, convolution width 4."""

    def __init__(self, d: int, bias: bool = True, d_state: int = 16, d_conv: int = 4, expand: int = 2):
        super().__init__()
        inner = expand * d
        self.dt_rank = math.ceil(d / 16)
        self.ln = nn.LayerNorm(d, bias=bias)
        self.in_proj = nn.Linear(d, 2 * inner, bias=bias)
        self.conv = nn.Conv1d(inner, inner, d_conv, groups=inner, padding=d_conv - 1)
        self.x_proj = nn.Linear(inner, self.dt_rank + 2 * d_state, bias=False)
        self.dt_proj = nn.Linear(self.dt_rank, inner)
        # S4D-real initialisation A = -(1..N) per channel; dt starts in [1e-3, 1e-1] (log-uniform)
        self.A_log = nn.Parameter(torch.log(torch.arange(1, d_state + 1, dtype=torch.float32)).repeat(inner, 1))
        self.D = nn.Parameter(torch.ones(inner))
        self.A_log._no_weight_decay = True  # as the reference Mamba: decay would pull every A toward -1
        self.out_proj = nn.Linear(inner, d, bias=bias)
        self.d_state = d_state
        self.post_init()

    @torch.no_grad()
    def post_init(self) -> None:
        """dt's bias so that dt starts log-uniform in [1e-3, 1e-1] (the model calls this again after its
        own weight init, which zeroes biases)."""
        inner = self.dt_proj.bias.shape[0]
        dt = torch.exp(torch.rand(inner) * (math.log(0.1) - math.log(1e-3)) + math.log(1e-3))
        self.dt_proj.bias.copy_(dt + torch.log(-torch.expm1(-dt)))  # softplus^-1(dt)

    def forward(self, x: torch.Tensor, rope=None) -> torch.Tensor:
        T = x.shape[1]
        u, z = self.in_proj(self.ln(x)).chunk(2, dim=-1)
        u = F.silu(self.conv(u.transpose(1, 2))[..., :T].transpose(1, 2))  # causal: the left padding only
        dt_raw, B, C = self.x_proj(u).split([self.dt_rank, self.d_state, self.d_state], dim=-1)
        dt = F.softplus(self.dt_proj(dt_raw))
        y = selective_scan(u.float(), dt.float(), -torch.exp(self.A_log.float()), B.float(), C.float(),
                           self.D.float()).to(u.dtype)
        return x + self.out_proj(y * F.silu(z))

