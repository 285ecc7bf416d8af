"""A dataset's manifest: its schema, the digest of its configuration and the checksums of its files.

``DIR/manifest.json`` holds the format version, the preset and its generator parameters, the seed, the
tokenizer, the splits, a ``config_hash`` over all of these, and per split and file the dtype, shape and
checksum: the sha256 of the concatenated hex sha256 digests of the file's blocks of ``shard_size``
sequences (:func:`file_digest`), so a writer hashes each block as it writes it and a reader can check a file
without a second copy. :func:`check_manifest` is the schema a reader relies on.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path

import numpy as np

from orbitlaw.orbits.blocks import SHARD_SIZE, STATE_FIELDS, fields
from orbitlaw.orbits.constants import UNITS
from orbitlaw.orbits.systems import SystemBatch
from orbitlaw.orbits.tokenizer import TokenizerSpec
from orbitlaw.provenance import code_version, dependency_versions

FORMAT_VERSION = 1

ARRAY_FIELDS = ("tokens", *SystemBatch.__dataclass_fields__, *STATE_FIELDS)
"""Every array a split may store (see ``blocks.fields``); the states only for presets that store them."""

_CONFIG_KEYS = ("format_version", "preset", "params", "seed", "splits", "tokenizer", "shard_size")
"""The manifest keys its ``config_hash`` covers (:func:`dataset_config`)."""

_SPLIT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
_HEX64 = re.compile(r"^[0-9a-f]{64}$")


def parse_splits(text: str) -> dict[str, int]:
    """``"train=1000,val=100"`` -> {"train": 1000, "val": 100}; ValueError on anything malformed."""
    splits: dict[str, int] = {}
    for part in text.split(","):
        name, sep, count = part.strip().partition("=")
        if not sep or not _SPLIT_NAME.match(name):
            raise ValueError(f"malformed --splits entry {part!r}: expected NAME=N, e.g. train=1000,val=100")
        try:
            n = int(count)
        except ValueError:
            raise ValueError(f"malformed --splits entry {part!r}: N must be an integer") from None
        if n <= 0:
            raise ValueError(f"split {name!r} has N = {n}; N must be > 0")
        if name in splits:
            raise ValueError(f"split {name!r} given twice")
        splits[name] = n
    check_split_names(splits)
    return splits


RESERVED_NAMES = ("manifest.json", "config.json", "done.jsonl")
"""Files at a dataset's top level (or in its staging directory): no split may take their name."""


def check_split_names(splits: dict) -> None:
    for name in splits:
        if not isinstance(name, str) or not _SPLIT_NAME.match(name) or name in RESERVED_NAMES:
            raise ValueError(f"split name {name!r} is not allowed: use letters, digits, '_', '-' and '.', and "
                             f"none of {', '.join(RESERVED_NAMES)}")



def dataset_config(preset: str, params: dict, spec: TokenizerSpec, seed: int, splits: dict[str, int]) -> dict:
    """What makes a dataset: the manifest keys ``config_hash`` covers (every byte follows from them)."""
    return {"format_version": FORMAT_VERSION, "preset": preset, "params": params, "seed": int(seed),
            "splits": dict(splits), "tokenizer": spec.to_dict(), "shard_size": SHARD_SIZE}


def config_hash(config: dict) -> str:
    """sha256 of the configuration as sorted JSON: the manifest's ``config_hash``."""
    return hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest()


def build_manifest(config: dict, digest: str, done: dict[tuple[str, int], dict]) -> dict:
    """The manifest of a finished dataset: ``config`` and its ``digest``, and per split and file the dtype,
    shape and checksum, from ``done`` ({(split, block): the record of the written block})."""
    schema = fields(config["preset"], config["params"])
    split_info = {}
    for split, n in config["splits"].items():
        recs = sorted((r for (s, _), r in done.items() if s == split), key=lambda r: r["block"])
        files = {}
        for name, (dtype, shape) in schema.items():
            joined = "".join(r["sha256"][name] for r in recs)
            files[name] = {"file": f"{split}/{name}.npy", "dtype": dtype, "shape": [n, *shape],
                           "sha256_of_blocks": hashlib.sha256(joined.encode()).hexdigest()}
        outside = int(sum(r["outside"] for r in recs))
        split_info[split] = {"count": n, "outside_range": outside, "files": files}
    manifest = {
        **config,
        "config_hash": digest,
        "code_version": code_version(),
        "dependency_versions": dependency_versions(),
        "units": dict(UNITS),
        "body_order": "planets 1..N, then the star (last body slot); absent planets are NaN",
        "checksum": "per file: sha256 of the concatenated hex sha256 digests of its blocks of shard_size "
                    "sequences, in order",
        "split_info": split_info,
    }
    return {**manifest, "manifest_sha256": manifest_digest(manifest)}


def manifest_digest(manifest: dict) -> str:
    """sha256 of the manifest's canonical JSON (sorted keys) without its own ``manifest_sha256``: a byte of the
    manifest changed (a file's checksum included) is then blamed on the manifest, not on the file. It detects
    damage, not tampering (anyone can recompute it); token ids are checked on every batch regardless."""
    body = {k: v for k, v in manifest.items() if k != "manifest_sha256"}
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


def read_manifest(directory: Path, manifest_path: Path | None = None):
    """The parsed ``directory/manifest.json`` (or ``manifest_path``), whatever JSON value it holds; a one-line
    ValueError naming the file where it is missing, a directory, not UTF-8, not JSON or nested too deeply.
    :func:`check_manifest` then checks what it holds."""
    manifest_path = manifest_path or directory / "manifest.json"
    try:
        return json.loads(manifest_path.read_bytes())
    except FileNotFoundError:
        raise ValueError(f"{directory} is not an orbitlaw dataset (no manifest.json)") from None
    except IsADirectoryError:
        raise ValueError(f"{directory}/manifest.json is a directory, not a manifest") from None
    except UnicodeDecodeError:
        raise ValueError(f"{directory}/manifest.json is corrupted: not UTF-8 text") from None
    except json.JSONDecodeError as exc:  # its message gives the position, never the text
        raise ValueError(f"{directory}/manifest.json is corrupted: {exc}") from None
    except RecursionError:
        raise ValueError(f"{directory}/manifest.json is corrupted: nested too deeply to be a manifest") from None


def check_manifest(manifest, path: Path) -> None:
    """One-line ValueError (``PATH/manifest.json is corrupted: ...``) unless ``manifest`` is a dataset's
    manifest: every key a reader needs, with the right types (the schema below); a ``config_hash`` that is
    the digest of its preset, params, seed, splits, tokenizer and shard size (so none of them was edited);
    one ``split_info`` entry per split, each file entry a known field whose shape starts with the split's
    count and whose recorded path stays inside the dataset directory ``path`` (no absolute path, no '..' out
    of it; a link out of it is refused when the file is opened).

    Schema: format_version 1; config_hash, preset: str; seed, shard_size: int; params, tokenizer: object;
    splits: {name: int > 0}; split_info: {split: {count: int, files: {field: {file: str, dtype: str,
    shape: [int, ...], sha256_of_blocks: 64 hex digits}}}}.
    """
    where = f"{path}/manifest.json"

    def bad(why: str) -> ValueError:
        return ValueError(f"{where} is corrupted: {why}")

    if not isinstance(manifest, dict):
        raise bad(f"it holds a JSON {_json_type(manifest)}, not an object")
    if manifest.get("format_version") != FORMAT_VERSION:
        raise ValueError(f"{path}: dataset format {str(manifest.get('format_version'))[:20]} is not supported "
                         f"(this orbitlaw reads format {FORMAT_VERSION})")
    schema = {"config_hash": str, "preset": str, "seed": int, "params": dict, "splits": dict, "tokenizer": dict,
              "shard_size": int, "split_info": dict}
    for key, kind in schema.items():
        if key not in manifest:
            raise bad(f"it has no {key!r}")
        if not _is(manifest[key], kind):
            raise bad(f"{key!r} is a JSON {_json_type(manifest[key])}, not {_json_name(kind)}")
    if manifest["shard_size"] < 1:
        raise bad(f"shard_size {manifest['shard_size']} is not >= 1")
    for name, n in manifest["splits"].items():
        if not _SPLIT_NAME.match(name) or name in RESERVED_NAMES or not _is(n, int) or n < 1:
            raise bad(f"'splits' entry {name[:40]!r} is not a split name with a count >= 1")
    try:
        TokenizerSpec.from_dict(manifest["tokenizer"])
    except (KeyError, TypeError, ValueError):
        raise bad("'tokenizer' lacks num_bins, lo, hi or time_steps, or holds a value of the wrong type") from None
    if manifest["config_hash"] != config_hash({k: manifest[k] for k in _CONFIG_KEYS}):
        raise bad("its config_hash is not the digest of its preset, params, seed, splits and tokenizer (one of "
                  "them was changed)")
    if list(manifest["split_info"]) != list(manifest["splits"]):
        raise bad(f"'split_info' describes splits {list(manifest['split_info'])[:8]}, 'splits' "
                  f"{list(manifest['splits'])}")
    for split, info in manifest["split_info"].items():
        _check_split_info(split, info, manifest["splits"][split], path, bad)
    if "manifest_sha256" in manifest and manifest["manifest_sha256"] != manifest_digest(manifest):  # older: none
        raise bad("its contents differ from what was written (manifest_sha256 does not match them), so its "
                  "checksums cannot be trusted; re-run the simulate command that made the dataset with --repair")


def _check_split_info(split: str, info, count: int, path: Path, bad) -> None:
    """The schema of one ``split_info`` entry (see :func:`check_manifest`); ``bad(why)`` makes the error."""
    if not _is(info, dict) or not _is(info.get("files"), dict) or info.get("count") != count:
        raise bad(f"split_info[{split!r}] needs 'count' equal to splits[{split!r}] and an object 'files'")
    files = info["files"]
    missing = [f for f in ARRAY_FIELDS if f not in STATE_FIELDS and f not in files]
    unknown = [f for f in files if f not in ARRAY_FIELDS]
    if missing or unknown:
        raise bad(f"split_info[{split!r}] files: missing {missing}, unknown {[f[:40] for f in unknown[:4]]}")
    for field, meta in files.items():
        entry = f"split_info[{split!r}] file {field!r}"
        if not _file_entry_typed(meta):
            raise bad(f"{entry} needs 'file', 'dtype', 'shape' (non-negative integers) and a sha256 "
                      "'sha256_of_blocks'")
        if meta["shape"][0] != count:
            raise bad(f"{entry} has {meta['shape'][0]} sequences, the split {count}")
        try:
            np.dtype(meta["dtype"])
        except (TypeError, ValueError):
            raise bad(f"{entry} has an unknown dtype {meta['dtype'][:40]!r}") from None
        name = os.path.normpath(meta["file"])  # links are resolved when the file is opened (reader)
        if os.path.isabs(name) or name.split(os.sep)[0] in ("..", ".") or "\0" in name:
            raise bad(f"{entry} leads outside the dataset directory (an absolute path or '..')")


def _file_entry_typed(meta) -> bool:
    """Whether a ``files`` entry has its four keys with the right JSON types."""
    return (_is(meta, dict) and _is(meta.get("file"), str) and _is(meta.get("dtype"), str)
            and _is(meta.get("shape"), list) and bool(meta["shape"])
            and all(_is(d, int) and d >= 0 for d in meta["shape"])
            and _is(meta.get("sha256_of_blocks"), str) and bool(_HEX64.match(meta["sha256_of_blocks"])))


def _is(value, kind: type) -> bool:
    """``isinstance`` for JSON values, where a boolean is not an integer."""
    return isinstance(value, kind) and not (kind is int and isinstance(value, bool))


def _json_type(value) -> str:
    return {dict: "object", list: "list", str: "string", bool: "boolean", int: "number", float: "number",
            type(None): "null"}.get(type(value), type(value).__name__)


def _json_name(kind: type) -> str:
    return {dict: "an object", str: "a string", int: "an integer"}[kind]



def file_digest(arr: np.ndarray, shard_size: int) -> str:
    """sha256 of the concatenated hex sha256 digests of ``arr``'s blocks of ``shard_size`` sequences: the
    manifest's ``sha256_of_blocks``. Hashes the memory map in place (no copy), about 1 GB/s."""
    blocks = [hashlib.sha256(memoryview(np.ascontiguousarray(arr[i:i + shard_size]))).hexdigest()
              for i in range(0, arr.shape[0], shard_size)]
    return hashlib.sha256("".join(blocks).encode()).hexdigest()
