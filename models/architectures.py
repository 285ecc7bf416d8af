"""Every sequence-model core of orbitlaw, by name: the one table that the model, the CLI, the study and the
benchmarks read (``GPTConfig.arch``, ``orbitlaw train --arch``).

Adding a core is one entry in ``ARCHITECTURES``: a builder of one layer (``block(config) -> nn.Module`` with
``forward(x, rope=None)``, x (B, T, d) -> (B, T, d), causal), a one-line summary and its traits. Every core
sits between the same embeddings and head (``orbitlaw.models.gpt``), so every model size
(``orbitlaw.models.presets.MODEL_SIZES``) applies to each.

The names, summaries and ``baseline`` traits are copied torch-free into ``orbitlaw/commands/_choices.py`` for
the parser (tests/test_cli_startup.py checks that the copy equals this table).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch.nn as nn

from orbitlaw.models.recurrent import MambaBlock, RecurrentBlock
from orbitlaw.models.transformer import Block


@dataclass(frozen=True)
class Architecture:
    """One sequence-model core.

    block: ``(GPTConfig) -> nn.Module``, one layer of the core; summary: one line;
    has_attention: it attends (``attention``, ``p``, the attention ``window`` and ``pos="rope"`` apply to it);
    recurrent_state: it carries a state from position to position, so it reads positions in order and takes
    no position embedding unless one is asked for (``pos="none"`` by default);
    baseline: one of the reference's comparison models (Vafa et al. 2025), trained beside the GPTs by
    ``orbitlaw run --arch``;
    slow_scan: it steps through time in plain Python (Mamba's selective scan here): too slow for the CPU
    benchmarks.
    """

    block: Callable[..., nn.Module]
    summary: str
    has_attention: bool = False
    recurrent_state: bool = False
    baseline: bool = False
    slow_scan: bool = False


ARCHITECTURES: dict[str, Architecture] = {
    "gpt": Architecture(Block, "transformer blocks: causal self-attention and a GELU MLP", has_attention=True),
    "lstm": Architecture(lambda c: RecurrentBlock(c.n_embd, "lstm", c.bias, c.dropout),
                         "LSTM blocks: x + W LSTM(LN(x)), then the transformer's MLP", recurrent_state=True,
                         baseline=True),
    "rnn": Architecture(lambda c: RecurrentBlock(c.n_embd, "rnn", c.bias, c.dropout),
                        "tanh RNN blocks: x + W RNN(LN(x)), then the transformer's MLP", recurrent_state=True,
                        baseline=True),
    "mamba": Architecture(lambda c: MambaBlock(c.n_embd, c.bias),
                          "Mamba blocks: selective state-space scan (plain PyTorch, slow)", recurrent_state=True,
                          baseline=True, slow_scan=True),
}

NAMES = tuple(ARCHITECTURES)
BASELINES = tuple(name for name, arch in ARCHITECTURES.items() if arch.baseline)
"""The study's comparison cores (``orbitlaw run --arch``)."""


def get(name: str) -> Architecture:
    """The entry of ``name``; a one-line ValueError naming the choices for an unknown name."""
    if name not in ARCHITECTURES:
        raise ValueError(f"unknown architecture {name!r}; choose one of {', '.join(NAMES)}")
    return ARCHITECTURES[name]


def describe() -> str:
    """One line per core, for ``--help``: ``name: summary``."""
    return "; ".join(f"{name}: {arch.summary}" for name, arch in ARCHITECTURES.items())
