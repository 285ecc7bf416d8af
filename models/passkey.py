"""Passkey retrieval: the LSSAR write-up's "cleanest probe" of whether an attention stays sharp past the
length it was trained at, on the toolkit's own GPT.

A sequence of ``length`` pair tokens (the GPT's (x, y) inputs, ids from a 21-token vocabulary) is a
filler of random digit pairs (each coordinate 0-9) with a key hidden at a uniformly random depth: one
token (10 + a, 10 + b), a and b digits (100 keys). The last token is the query (20, 20); the model must
then output (a, b) as digits: a hit is both coordinates' argmax right (chance 1/100). The query has to
find the one key token among ``length`` and copy it, so its attention must stay on one token however
many there are. Designs tried first, with 2-layer width-64 models: a periodic filler let softmax and
LSSAR both recall 96-100% of keys at 8x after 600 steps; a marker token before a key drawn from the
filler's own digits (so that finding it takes two hops) stayed at chance (loss ln 100) for 1,500 steps.
Training uses ``train_length`` tokens and the loss at the answer only; accuracy is measured at 1x, 2x, 4x,
8x and 16x that length on fresh sequences.
The model is the toolkit's GPT (rotary positions, any attention of the registry), so what transfers
from here to orbits is the attention's behaviour, not the task.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from orbitlaw.models.gpt import GPT, GPTConfig
from orbitlaw.provenance import code_version, dependency_versions, write_json_atomic
from orbitlaw.validate import at_least

DIGITS, KEY, QUERY, VOCAB = 10, 10, 20, 21


@dataclass
class PasskeyConfig:
    """One passkey run: the attention under test, the task, the optimisation and the model's size."""

    attention: str = "softmax"
    p: float = 15.0
    seed: int = 0
    train_length: int = 32  # tokens per training sequence (at least 8)
    steps: int = 400  # optimiser steps of ``batch`` sequences, AdamW at peak ``lr``
    batch: int = 32
    lr: float = 3e-3
    n_layer: int = 2  # the GPT's depth, heads and width
    n_head: int = 2
    n_embd: int = 64
    test_multiples: list[int] = field(default_factory=lambda: [1, 2, 4, 8, 16])  # test lengths / train_length
    test_samples: int = 200  # fresh test sequences per length

    def validate(self) -> None:
        if self.train_length < 8:
            raise ValueError(f"train-length must be at least 8 tokens, got {self.train_length}")
        at_least(self, 1, "steps", "batch", "test_samples")
        if not self.test_multiples or min(self.test_multiples) < 1:
            raise ValueError(f"test multiples must be >= 1, got {self.test_multiples}")


def make_batch(rng: np.random.Generator, batch: int, length: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Tokens (batch, length, 2) int64 and answers (batch, 2): the key of each sequence (module doc)."""
    tokens = rng.integers(0, DIGITS, (batch, length, 2))
    depth = rng.integers(0, length - 1, batch)  # the key anywhere before the query, which is last
    key = rng.integers(0, DIGITS, (batch, 2))
    tokens[np.arange(batch), depth] = KEY + key
    tokens[:, -1] = QUERY
    return torch.from_numpy(tokens), torch.from_numpy(key)


def build(cfg: PasskeyConfig) -> GPT:
    return GPT(GPTConfig(vocab_size=VOCAB, block_size=cfg.train_length, n_layer=cfg.n_layer, n_head=cfg.n_head,
                         n_embd=cfg.n_embd, attention=cfg.attention, p=cfg.p, pos="rope", pad_id=None))


def answer_loss(model: GPT, tokens: torch.Tensor, key: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Cross-entropy of the key at the last position (summed over both coordinates) and the hits (B,)."""
    logits, _ = model(tokens)
    last = logits[:, -1].reshape(len(tokens), 2, VOCAB)
    loss = F.cross_entropy(last.reshape(-1, VOCAB), key.reshape(-1)) * 2
    return loss, (last.argmax(-1) == key).all(-1)


@torch.no_grad()
def accuracy(model: GPT, length: int, samples: int, seed: int, batch: int = 50) -> float:
    """Fraction of ``samples`` fresh sequences of ``length`` tokens whose key the model recalls."""
    model.eval()
    rng = np.random.default_rng(seed)
    hits = 0
    for start in range(0, samples, batch):
        tokens, key = make_batch(rng, min(batch, samples - start), length)
        hits += int(answer_loss(model, tokens, key)[1].sum())
    return hits / samples


def run_passkey(cfg: PasskeyConfig, out: str | Path | None = None) -> dict:
    """Train on ``train_length`` and test at every multiple; returns (and writes to ``out``) the result."""
    cfg.validate()
    torch.manual_seed(cfg.seed)
    rng = np.random.default_rng(cfg.seed)
    model = build(cfg)
    optimiser = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=0.0)
    start = time.perf_counter()
    losses = []
    for step in range(cfg.steps):
        lr = cfg.lr * min(1.0, (step + 1) / 50) * 0.5 * (1 + np.cos(np.pi * step / cfg.steps))
        for group in optimiser.param_groups:
            group["lr"] = lr
        model.train()
        loss, _ = answer_loss(model, *make_batch(rng, cfg.batch, cfg.train_length))
        optimiser.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimiser.step()
        losses.append(float(loss.detach()))
    result = {"config": asdict(cfg), "final_train_loss": float(np.mean(losses[-50:])),
              "accuracy": {str(m): accuracy(model, m * cfg.train_length, cfg.test_samples, 10_000 + cfg.seed)
                           for m in cfg.test_multiples},
              "seconds": time.perf_counter() - start, "code_version": code_version(),
              "dependency_versions": dependency_versions()}
    if out is not None:
        write_json_atomic(Path(out), result)
    return result


if __name__ == "__main__":  # python -m orbitlaw.models.passkey ATTENTION: one quick run
    import sys

    print(json.dumps(run_passkey(PasskeyConfig(attention=sys.argv[1] if len(sys.argv) > 1 else "softmax")),
                     indent=1)[:2000])
