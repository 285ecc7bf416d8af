"""Training batches from an orbit dataset split, as a pure function of (seed, step).

The data order: global sample g = step * batch_size + b is sequence ``perm_e[g mod n]`` with ``e = g // n``
and ``perm_e`` a permutation seeded by (seed, e) (:func:`batch_indices`); each of W ranks takes every W-th
sample of the global batch. A token model reads token ids (:func:`make_batch`), a regression model body
positions in AU (:func:`regression_batch`), optionally one model window per sequence. The force probe
(``orbitlaw.discovery.probes.probe``) draws its batches and reads its sequences with the same functions.
"""

from __future__ import annotations

import numpy as np
import torch

from orbitlaw.models.gpt import GPTConfig
from orbitlaw.orbits.tokenizer import check_ids
from orbitlaw.validate import FieldError


def sample_order(seed: int, epoch: int, n: int) -> np.ndarray:
    """The permutation of n sequences that epoch ``epoch`` of seed ``seed`` reads them in."""
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence([seed, 0x0DA7A, epoch]))).permutation(n)


def batch_indices(seed: int, step: int, batch_size: int, n: int) -> np.ndarray:
    """Sequence indices of global batch ``step`` (pure function of seed and step)."""
    g = np.arange(step * batch_size, (step + 1) * batch_size)
    epochs = g // n
    out = np.empty(batch_size, np.int64)
    for e in np.unique(epochs):
        sel = epochs == e
        out[sel] = sample_order(seed, int(e), n)[g[sel] % n]
    return out


def make_batch(tokens: np.ndarray, idx: np.ndarray, context: int, device, vocab: int | None = None
               ) -> tuple[torch.Tensor, torch.Tensor]:
    """Inputs (B, context, 2) and next-token targets (B, context, 2), int64, from token sequences; with
    ``vocab``, ids outside 0..vocab-1 (a corrupted token file) are a one-line ValueError."""
    arr = np.asarray(tokens[idx], dtype=np.int64)[:, :context + 1]
    if vocab is not None:
        check_ids(arr, vocab)
    seqs = torch.from_numpy(arr)
    return seqs[:, :context].to(device), seqs[:, 1:context + 1].to(device)


def read_sequences(config: GPTConfig, split, idx: np.ndarray, length: int) -> torch.Tensor:
    """The first ``length`` positions of sequences ``idx`` as ``config``'s model reads them: (B, length, 2)
    int64 token ids, or for a regression model float32 body positions in AU (``Split.continuous``, which
    drops the time-step token: continuous position i is token i + 1; NaN where a sequence pads)."""
    if not config.regression:
        arr = np.asarray(split.tokens[idx], dtype=np.int64)[:, :length]
        check_ids(arr, config.vocab_size)
        return torch.from_numpy(arr)
    return torch.from_numpy(np.asarray(split.continuous(np.asarray(idx))[:, :length], dtype=np.float32))


def token_offset(config: GPTConfig) -> int:
    """Token index minus input position: 1 for a regression model (no time-step token), else 0."""
    return 1 if config.regression else 0


def model_window_tokens(window_steps: int | None, split) -> int | None:
    """Positions in a model window of ``window_steps`` steps (``TrainConfig.chunk_steps``) of every body of
    ``split``: W (N + 1); None for no model window. ValueError when the split mixes planet counts or its
    sequences are too short."""
    if window_steps is None:
        return None
    counts = np.unique(np.asarray(split.n_planets))
    if len(counts) != 1:
        raise FieldError(message="`chunk_steps` needs one planet count per dataset (this one mixes "
                         f"{', '.join(map(str, counts))})")
    tokens = window_steps * (int(counts[0]) + 1)
    if tokens > split.tokens.shape[1] - 2:
        raise FieldError(message=f"`chunk_steps` {window_steps} ({tokens} positions) does not fit the dataset's "
                         f"{split.tokens.shape[1] - 1}-position sequences")
    return tokens


def regression_batch(split, idx: np.ndarray, length: int, model_window: int | None, noise: float, key: tuple,
                     device, window_end: str = "planet", window_loss: str = "all"
                     ) -> tuple[torch.Tensor, torch.Tensor]:
    """Inputs and next-position targets (B, T, 2) float32 (AU) for a regression model.

    Without a model window: the first ``length`` positions. With one: one window of ``model_window``
    positions per sequence, ending at a uniformly drawn planet position (``window_end="planet"``) or star
    position (``"step"``, the last body of a step), never before the sequence start: a window always ends the
    way the probes read it (``orbitlaw.models.gpt`` reads each position through the window that ends there),
    so the model knows which body each position holds. ``window_loss="last"`` keeps only the window's last
    target (the others NaN). Gaussian noise of standard deviation ``noise`` (AU) is added to the inputs, never
    the targets. Windows and noise come from a PCG64 stream keyed by ``key`` (seed, step, rank, micro-batch):
    batches are a pure function of it. NaN pads read as 0 and stay NaN (ignored) in the targets."""
    seqs = np.asarray(split.continuous(np.asarray(idx)), dtype=np.float32)
    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence([*key, 0xC4A2])))
    if model_window is not None:
        bodies = int(np.asarray(split.n_planets)[idx[0]]) + 1
        ends = np.arange(model_window - 1, seqs.shape[1] - 1)
        star = ends % bodies == bodies - 1  # the star is the last body of each step
        ends = ends[star if window_end == "step" else ~star]
        start = ends[rng.integers(0, len(ends), size=len(seqs))] - model_window + 1
        seqs = seqs[np.arange(len(seqs))[:, None], start[:, None] + np.arange(model_window + 1)]
        length = model_window
    x, y = seqs[:, :length], seqs[:, 1:length + 1]
    if noise > 0:
        x = x + noise * rng.standard_normal(x.shape, dtype=np.float32)
    x = np.nan_to_num(x, nan=0.0)
    if model_window is not None and window_loss == "last":
        y = np.concatenate([np.full_like(y[:, :-1], np.nan), y[:, -1:]], axis=1)
    return torch.from_numpy(x).to(device), torch.from_numpy(np.ascontiguousarray(y)).to(device)


def model_batch(config: GPTConfig, split, idx: np.ndarray, context: int, model_window: int | None, noise: float,
                key: tuple, device) -> tuple[torch.Tensor, torch.Tensor]:
    """Inputs and targets of sequences ``idx`` as ``config``'s model trains on them: a regression batch
    (:func:`regression_batch`: ``model_window``, noise of ``noise`` AU, drawn from ``key``) or a token batch
    of ``context`` tokens."""
    if config.regression:
        return regression_batch(split, idx, context, model_window, noise, key, device, config.window_end,
                                config.window_loss)
    return make_batch(split.tokens, idx, context, device, config.vocab_size)


def check_vocab(model_cfg: GPTConfig, split) -> None:
    """One-line ValueError when the model cannot read ``split``: another vocabulary, or other bins."""
    spec = split.tokenizer
    if model_cfg.regression:  # reads positions, not token ids; its bins, if any, must be the dataset's tokeniser's
        bins = (model_cfg.position_bins, model_cfg.bin_lo, model_cfg.bin_hi)
        if {"bins", "centres"} & {model_cfg.inputs, model_cfg.outputs} and bins != (spec.num_bins, spec.lo, spec.hi):
            raise ValueError(f"the model's bins ({bins[0]} over [{bins[1]}, {bins[2]}) AU) are not the dataset's "
                             f"tokeniser's ({spec.num_bins} over [{spec.lo}, {spec.hi}) AU)")
        return
    if spec.vocab_size != model_cfg.vocab_size or spec.pad_id != model_cfg.pad_id:
        raise ValueError(f"dataset vocabulary ({spec.vocab_size} ids, pad {spec.pad_id}) does not match the "
                         f"model's ({model_cfg.vocab_size} ids, pad {model_cfg.pad_id})")


def check_inputs(config: GPTConfig, *splits) -> None:
    """Read one sequence of each split the way training reads them: opening a dataset file checks it
    against its checksum (``orbits.load_dataset``), so a damaged file the run would read (tokens, or a
    regression model's positions) is a one-line ValueError now, before the run directory is written."""
    for split in splits:
        if split is not None:
            read_sequences(config, split, np.arange(1), 1)
