"""``orbitlaw verify``: check a dataset against its manifest (shapes, dtypes and every block's checksum)."""

from __future__ import annotations

import sys


def add_parser(sub) -> None:
    p = sub.add_parser("verify", help="check a dataset's files against the checksums in its manifest",
                       description="Recompute every block checksum of every file of a dataset (orbitlaw "
                       "simulate) and compare it with the manifest; also checks that token ids are in range. "
                       "Exit 0 when intact, 2 with a one-line error naming the damaged file otherwise.")
    p.add_argument("--data", required=True, metavar="DIR", help="dataset directory")
    p.set_defaults(func=run)


def run(args) -> int:
    import numpy as np

    from orbitlaw import orbits
    from orbitlaw.orbits.tokenizer import check_ids

    splits = orbits.load_dataset(args.data, verify=True)
    for name, split in splits.items():
        for start in range(0, len(split), 4096):
            try:
                check_ids(np.asarray(split.tokens[start:start + 4096]), split.tokenizer.vocab_size)
            except ValueError as exc:
                raise ValueError(f"{args.data}/{name}/tokens.npy: {exc}") from None
    total = sum(len(s) for s in splits.values())
    print(f"{args.data}: intact ({len(splits)} split{'s' if len(splits) != 1 else ''}, {total} sequences)",
          file=sys.stderr)
    return 0
