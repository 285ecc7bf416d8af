"""One block of a dataset: the arrays of ``SHARD_SIZE`` consecutive sequences of a split, built in memory.

Sequence ``i`` of a split depends only on (seed, split, i): block ``b`` (sequences ``b * SHARD_SIZE`` onwards)
is drawn from a random stream keyed by (seed, split, b), always as a whole block, so neither the number of
workers, the order in which blocks finish, nor the size of the split changes a byte. :func:`fields` says what
each sequence stores; :mod:`orbitlaw.orbits.writer` writes the blocks, :mod:`orbitlaw.orbits.reader` reads them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator

import numpy as np

from orbitlaw.orbits import forcelaw, generate, nbody, presets
from orbitlaw.orbits.systems import empty_batch
from orbitlaw.orbits.tokenizer import TokenizerSpec

SHARD_SIZE = 1024
"""Sequences per block: the unit of generation, of resuming and of the checksums."""

MAX_BLOCK_BYTES = 8 << 30
"""A block of SHARD_SIZE sequences is built in memory: larger than this is refused before anything runs."""

STATE_FIELDS = ("times", "positions", "velocities", "forces")
"""The per-step states, stored only for presets with ``stores_states``."""


def fields(preset: str, params: dict) -> dict[str, tuple[str, tuple[int, ...]]]:
    """Field name -> (dtype, per-sequence shape) of every array stored for ``preset``: the tokens, the
    initial conditions (:class:`orbitlaw.orbits.systems.SystemBatch`) and, if stored, the states."""
    record = presets.record(preset)
    P = record.planet_slots(params)
    systems = {name: (str(values.dtype), values.shape[1:]) for name, values in empty_batch(0, P).arrays().items()}
    out = {"tokens": ("uint16", (int(params["seq_len"]), 2)), **systems}
    if record.stores_states:
        S = record.max_steps(params)
        out.update(times=("float64", (S,)), positions=("float64", (S, P + 1, 2)),
                   velocities=("float64", (S, P + 1, 2)), forces=("float64", (S, P + 1, 2)))
    return out


def sequence_bytes(preset: str, params: dict) -> int:
    """Bytes one sequence takes in the dataset's files (every field of :func:`fields`)."""
    return sum(int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
               for dtype, shape in fields(preset, params).values())


def check_block_size(preset: str, params: dict) -> None:
    """ValueError when a block of ``SHARD_SIZE`` sequences would take more than ``MAX_BLOCK_BYTES``."""
    per_sequence = sequence_bytes(preset, params)
    if per_sequence * SHARD_SIZE > MAX_BLOCK_BYTES:
        block = per_sequence * SHARD_SIZE / 2**30
        raise ValueError(f"sequences of seq_len {params['seq_len']} and {params.get('steps')} steps need "
                         f"{per_sequence / 2**20:.0f} MiB each, {block:.0f} GiB per block of {SHARD_SIZE}: too "
                         f"large (at most {MAX_BLOCK_BYTES >> 30} GiB); lower seq_len or steps")


def blocks(splits: dict[str, int]) -> Iterator[tuple[str, int, int]]:
    """(split, block, count) of every block of ``splits`` ({name: sequences}), in order."""
    for split, n in splits.items():
        for block in range(-(-n // SHARD_SIZE)):
            yield split, block, min(SHARD_SIZE, n - block * SHARD_SIZE)


def split_key(split: str) -> int:
    """A stable 32-bit integer naming a split in the random-stream key."""
    return int.from_bytes(hashlib.sha256(split.encode()).digest()[:4], "little")


def build_block(preset: str, params: dict, spec: TokenizerSpec, seed: int, split: str, block: int,
                count: int) -> tuple[dict[str, np.ndarray], int]:
    """Arrays for sequences ``block * SHARD_SIZE`` .. ``+ count`` of ``split``, and the number of
    coordinates that fell outside the tokeniser range."""
    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence([seed, split_key(split), block])))
    record = presets.record(preset)
    # Always draw a whole block and keep the first `count`, so that a sequence never depends on how
    # many sequences the split has.
    batch = record.sample(rng, SHARD_SIZE, params, first_index=block * SHARD_SIZE)
    batch = batch.subset(slice(0, count))  # validated by whichever engine computes it
    seq_len = int(params["seq_len"])
    arrays = batch.arrays()
    if record.stores_states:
        steps = record.max_steps(params)
        per_seq = np.minimum(presets.steps_in_sequence(batch.n_planets, seq_len), steps)
        law = params.get("force_law")
        if not forcelaw.is_newton(law):  # another world's gravity (orbits.forcelaw): integrated, not Kepler
            pos, vel = forcelaw.integrate(batch, steps, law)
        elif record.interacting(params):
            pos, vel = nbody.integrate(batch, per_seq)
            pos, vel = _pad_steps(pos, steps), _pad_steps(vel, steps)
        else:
            pos, vel = generate.analytic_states(batch, steps)
        xy = generate.token_order(pos, batch.n_planets, seq_len)
        forces = (generate.gravitational_forces(pos, batch.masses) if forcelaw.is_newton(law)
                  else forcelaw.pair_forces(pos, batch.masses, law))
        arrays.update(times=np.arange(steps)[None, :] * batch.dt[:, None], positions=pos, velocities=vel,
                      forces=forces)
        arrays["tokens"], outside = generate.tokenize(xy, batch.dt_index, spec)
    else:
        arrays["tokens"], outside = generate.analytic_tokens(batch, seq_len, int(params["steps"]), spec)
    return arrays, outside


def _pad_steps(a: np.ndarray, steps: int) -> np.ndarray:
    if a.shape[1] == steps:
        return a
    out = np.full((a.shape[0], steps) + a.shape[2:], np.nan)
    out[:, : a.shape[1]] = a
    return out

