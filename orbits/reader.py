"""Reading a dataset: its splits memory-mapped read-only, each file checked against the manifest's checksum.

A dataset directory (written by :mod:`orbitlaw.orbits.writer`) opens as {split name: :class:`Split`}; a
split opens each array's file the first time it is read, after checking that the file stays inside the
dataset and matches the manifest (:mod:`orbitlaw.orbits.manifest`) in shape, dtype and checksum.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from orbitlaw.orbits import generate
from orbitlaw.orbits.manifest import ARRAY_FIELDS, check_manifest, file_digest, read_manifest
from orbitlaw.orbits.systems import SystemBatch
from orbitlaw.orbits.tokenizer import TokenizerSpec
from orbitlaw.provenance import inside, write_text_atomic


class Split:
    """One split of a dataset, arrays memory-mapped read-only as attributes named by ``ARRAY_FIELDS`` (the
    initial conditions of :class:`~orbitlaw.orbits.systems.SystemBatch`, the tokens and the states). Fields
    not stored for a preset are None.

    tokens: (n, seq_len, 2) uint16. positions, velocities: (n, steps, bodies, 2) AU and AU/yr.
    forces: (n, steps, bodies, 2) net gravitational force, M_sun AU/yr^2. masses: (n, bodies) M_sun.
    times: (n, steps) yr. Body order: planets, then the star. Orbital elements: a, e, omega,
    mean_anomaly0 (n, planets); n_planets, dt (yr), dt_index, com, star_frozen, star_position (n, ...).

    Each array's file is opened the first time the attribute is read, and (unless the dataset was opened
    with ``verify=False``) checked against the manifest's checksum then: a caller pays for hashing only the
    files it reads, and never computes on a damaged one (one-line ValueError naming the file).
    """

    def __init__(self, name: str, manifest: dict, root: Path, verify: bool = True):
        self.name = name
        self.manifest = manifest
        self._root = root
        self._verify = verify

    def __getattr__(self, field: str):
        """Open ``field``'s file on first read (Python calls this only while the attribute is unset)."""
        if field not in ARRAY_FIELDS or "_root" not in self.__dict__:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {field!r}")
        meta = self.manifest["split_info"][self.name]["files"].get(field)
        arr = None if meta is None else _open_file(self._root, meta, self.manifest["shard_size"], self._verify)
        self.__dict__[field] = arr
        return arr

    def __repr__(self) -> str:
        return f"Split({self.name!r}, {len(self)} sequences of {self._root})"

    def __len__(self) -> int:
        return int(self.manifest["split_info"][self.name]["count"])  # equal to every file's first dimension

    def open_all(self) -> None:
        """Open (and check, unless opened with ``verify=False``) every file of the split now."""
        for field in ARRAY_FIELDS:
            getattr(self, field)

    @property
    def tokenizer(self) -> TokenizerSpec:
        return TokenizerSpec.from_dict(self.manifest["tokenizer"])

    def systems(self, rows=slice(None)) -> SystemBatch:
        """The initial conditions of the selected sequences, as the generator drew them."""
        return SystemBatch(**{name: np.asarray(getattr(self, name)[rows]) for name in SystemBatch.__dataclass_fields__})

    def continuous(self, rows=slice(None)) -> np.ndarray:
        """The continuous representation for regression models: (n, seq_len - 1, 2) float64 body
        positions in AU in token order (per step planets 1..N, then the star; NaN where a sequence
        pads), exact rather than binned. Stored positions are reordered; for presets that keep only
        orbital elements (vafa2025) the Kepler orbits are recomputed bit for bit."""
        if isinstance(rows, (int, np.integer)):  # one sequence: (seq_len - 1, 2)
            return self.continuous(slice(int(rows), int(rows) + 1 or None))[0]
        seq_len = int(self.manifest["params"]["seq_len"])
        if self.positions is not None:
            return generate.token_order(np.asarray(self.positions[rows]), np.asarray(self.n_planets[rows]), seq_len)
        batch = self.systems(rows)
        return generate.token_order(generate.analytic_states(batch, int(self.manifest["params"]["steps"]))[0],
                                    batch.n_planets, seq_len)


def load_dataset(path: str | Path, verify: bool | str = "on-read") -> dict[str, Split]:
    """Open a dataset directory: {split name: Split}, arrays memory-mapped read-only.

    ``verify``: ``"on-read"`` (the default) checks each file against the manifest's checksum the first time
    its array is read (``Split``), so a command hashes exactly the files it uses, once, at about 1.5 GB/s:
    the 81 MB of tokens a ``cpu``-size train start reads (two-body, 20,000 + 256 sequences) hash in about
    50 ms, where hashing every file at open (1 GB with the stored states, which token training never
    reads) took 640 ms. ``True`` checks every file now (``orbitlaw verify``). ``False`` skips the checksums
    (shapes and dtypes are still checked): only for a caller that has just verified the dataset.

    Raises a one-line ValueError naming the file for a missing, unreadable or malformed manifest
    (:func:`check_manifest`), a file that leads outside the dataset (a link or '..'), and a file whose
    size, dtype, shape or checksum does not match the manifest (truncated or corrupted).
    """
    if verify not in (True, False, "on-read"):
        raise ValueError(f"verify must be True, False or 'on-read', got {verify!r}")
    path = Path(path)
    manifest = read_manifest(path, inside(path, path / "manifest.json", "dataset"))
    check_manifest(manifest, path)
    splits = {name: Split(name, manifest, path, verify=bool(verify)) for name in manifest["split_info"]}
    if verify is True:
        for split in splits.values():
            split.open_all()
    return splits


def write_checked_manifest(directory: Path, manifest: dict) -> None:
    """Write ``manifest`` into a dataset ``directory`` being built (by an import), then open the dataset and check
    every file against it: a dataset that does not read back is never published."""
    write_text_atomic(Path(directory) / "manifest.json", json.dumps(manifest, indent=2) + "\n")
    load_dataset(directory, verify=True)


REBUILD = "re-run the simulate command that made the dataset with --repair to rebuild it"


def _open_file(root: Path, meta: dict, shard_size: int, verify: bool) -> np.ndarray:
    """Memory-map one file of a dataset read-only, after checking that it stays inside ``root``, and that
    its shape and dtype (and with ``verify`` its checksum: sha256 of its blocks of ``shard_size``
    sequences, as written) match the manifest entry ``meta``."""
    file = root / meta["file"]
    real = inside(root, file, "dataset")
    try:
        arr = np.load(real, mmap_mode="r")  # never unpickles (allow_pickle is False)
    except OSError as exc:
        raise ValueError(f"{file} is missing or unreadable: {exc.strerror or exc}") from None
    except Exception as exc:  # numpy raises ValueError, EOFError, SyntaxError, tokenize.TokenError... on a bad header
        raise ValueError(f"{file} is corrupted: not a readable .npy file ({type(exc).__name__}); {REBUILD}") from None
    if not isinstance(arr, np.memmap) or list(arr.shape) != meta["shape"] or arr.dtype != np.dtype(meta["dtype"]):
        raise ValueError(f"{file} is corrupted: shape {getattr(arr, 'shape', '?')} {getattr(arr, 'dtype', '')}, "
                         f"manifest says {tuple(meta['shape'])} {meta['dtype']}")
    if verify and file_digest(arr, shard_size) != meta["sha256_of_blocks"]:
        raise ValueError(f"{file} is corrupted: checksum mismatch (it differs from what was written); {REBUILD}")
    return arr
