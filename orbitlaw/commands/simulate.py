"""``orbitlaw simulate``: write an orbit dataset (see ``orbitlaw.orbits.writer``)."""

from __future__ import annotations

import json
import sys

from orbitlaw.commands._choices import ORBIT_PRESETS
from orbitlaw.errors import UserError


def add_parser(sub) -> None:
    p = sub.add_parser("simulate", help="simulate planetary systems and write a tokenised dataset",
                       description="Simulate planetary systems and write a tokenised dataset directory.")
    p.add_argument("--preset", required=True, choices=ORBIT_PRESETS, help="which systems to simulate")
    p.add_argument("--splits", required=True, metavar="NAME=N[,NAME=N...]",
                   help="split names and sequence counts, e.g. train=10000,val=300")
    p.add_argument("--seed", type=int, required=True, help="random seed (sequence i of a split depends "
                   "only on seed, split and i)")
    p.add_argument("--out", required=True, metavar="DIR", help="dataset directory to create")
    p.add_argument("--workers", type=int, default=1, metavar="W", help="worker processes (default 1)")
    p.add_argument("--config", metavar="FILE.json",
                   help="JSON object overriding the preset's generator parameters")
    p.add_argument("--repair", action="store_true",
                   help="on a finished dataset: verify every file against its manifest and, if one fails, rebuild "
                   "the dataset (the same bytes as first written)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=run)


def run(args) -> int:
    from orbitlaw import orbits

    overrides = None
    if args.config:
        try:
            with open(args.config) as f:
                overrides = json.load(f)
        except json.JSONDecodeError as exc:
            raise UserError(f"--config {args.config} is not valid JSON: {exc}") from None
        if not isinstance(overrides, dict):
            raise UserError(f"--config {args.config} must hold a JSON object")
    splits = orbits.parse_splits(args.splits)
    out = orbits.simulate(args.preset, splits, args.seed, args.out, workers=args.workers,
                          overrides=overrides, progress=not args.quiet, repair=args.repair)
    manifest = json.loads((out / "manifest.json").read_text())
    for name, info in manifest["split_info"].items():
        note = f", {info['outside_range']} coordinates outside the token range (clipped)" \
            if info["outside_range"] else ""
        print(f"{name}: {info['count']} sequences{note}", file=sys.stderr)
    print(out)
    return 0
