"""The reference pair tokeniser: each token is an (x, y) pair of bin ids.

Each coordinate (AU) falls into one of ``num_bins`` uniform bins over ``[lo, hi)``:
``bin = floor((x - lo) / width)`` clipped to ``[0, num_bins - 1]``, width = (hi - lo) / num_bins
(7000 bins over [-50, 50] AU: 0.0142857 AU). A sequence is ``[time-step token]`` followed, per time step,
by the bodies in order planet 1..N then the star, truncated to ``seq_len`` tokens and padded with the
pad token if shorter. Ids: ``0..num_bins-1`` positions, ``num_bins + k`` the k-th time step (week, six
months), then one padding/mask id. Unlike the reference code, the mask id is not a time-step id.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numba
import numpy as np

from orbitlaw.orbits.constants import YEARS_PER_DAY

TIME_STEPS = (7 * YEARS_PER_DAY, 180 * YEARS_PER_DAY)
"""One week and six months in years, as the reference defines them (``YEARS_PER_DAY`` = 0.0027 yr per day)."""


@dataclass(frozen=True)
class TokenizerSpec:
    """Binning and special ids. ``time_steps`` are the years each time-step token stands for."""

    num_bins: int = 7000
    lo: float = -50.0
    hi: float = 50.0
    time_steps: tuple[float, ...] = TIME_STEPS

    def __post_init__(self):
        if self.num_bins < 2 or self.num_bins + len(self.time_steps) + 1 > 65536:
            raise ValueError(f"num_bins must be in [2, {65535 - len(self.time_steps)}], got {self.num_bins}")
        if not self.hi > self.lo:
            raise ValueError("tokenizer range must have hi > lo")

    @property
    def width(self) -> float:
        """Bin width in AU."""
        return (self.hi - self.lo) / self.num_bins

    def time_step_id(self, index: int) -> int:
        """Token id of the ``index``-th time step in ``time_steps``."""
        return self.num_bins + index

    @property
    def pad_id(self) -> int:
        """Padding / mask id, distinct from every position and time-step id."""
        return self.num_bins + len(self.time_steps)

    @property
    def vocab_size(self) -> int:
        """Number of ids per coordinate: bins, time steps, pad (7003 for the reference)."""
        return self.pad_id + 1

    def to_dict(self) -> dict:
        d = asdict(self)
        d.update(time_steps=list(self.time_steps), width=self.width, pad_id=self.pad_id,
                 vocab_size=self.vocab_size,
                 time_step_ids=[self.time_step_id(i) for i in range(len(self.time_steps))])
        return d

    @classmethod
    def from_dict(cls, d: dict) -> TokenizerSpec:
        return cls(num_bins=int(d["num_bins"]), lo=float(d["lo"]), hi=float(d["hi"]),
                   time_steps=tuple(float(t) for t in d["time_steps"]))

    def encode(self, xy: np.ndarray) -> tuple[np.ndarray, int]:
        """Bin ids (uint16, same shape) of coordinates in AU, and how many fell outside [lo, hi)."""
        xy = np.asarray(xy, dtype=np.float64)
        if not np.all(np.isfinite(xy)):
            raise ValueError("cannot tokenise non-finite coordinates")
        out = np.empty(xy.shape, np.uint16)
        outside = _encode_many(xy.reshape(-1), self.lo, self.width, self.num_bins,
                               out.reshape(-1))
        return out, int(outside)

    def decode(self, ids: np.ndarray) -> np.ndarray:
        """Bin centres in AU for position ids; NaN for time-step and pad ids."""
        ids = np.asarray(ids)
        centres = self.lo + (ids.astype(np.float64) + 0.5) * self.width
        return np.where(ids < self.num_bins, centres, np.nan)


@numba.njit(cache=True, inline="always")
def _bin(x, lo, width, num_bins):
    """Bin id of one coordinate, clipped; second value is 1 when x lies outside the range. Branch-free
    (selects only), so that loops over it vectorise."""
    b = np.floor((x - lo) / width)
    top = num_bins - 1.0
    outside = (b < 0.0) | (b > top)
    return np.int32(min(max(b, 0.0), top)), np.int32(outside)


@numba.njit(cache=True)
def _encode_many(x, lo, width, num_bins, out):
    outside = 0
    for i in range(x.size):
        b, o = _bin(x[i], lo, width, num_bins)
        out[i] = b
        outside += o
    return outside


def check_ids(arr: np.ndarray, vocab: int) -> None:
    """ValueError (one line) when a token id of ``arr`` is outside 0..vocab-1: the trainer checks it on the
    host, per batch, so a flipped byte in a token file is named instead of crashing the embedding; ``orbitlaw
    verify`` checks every token file with it."""
    if arr.size and (arr.max() >= vocab or arr.min() < 0):
        bad = int(arr.max()) if arr.max() >= vocab else int(arr.min())
        raise ValueError(f"token id {bad} is outside the vocabulary 0..{vocab - 1}: the dataset's token file is "
                         "corrupted (orbitlaw verify checks its files against the manifest's checksums)")
