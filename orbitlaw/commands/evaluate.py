"""``orbitlaw evaluate``: score a trained run on a dataset split, with length extrapolation."""

from __future__ import annotations

import json


def _lengths(text: str) -> list[int]:
    try:
        values = [int(x) for x in text.split(",")]
    except ValueError:
        raise ValueError(f"--lengths must be comma-separated integers, got {text!r}") from None
    return values


def add_parser(sub) -> None:
    p = sub.add_parser("evaluate", help="evaluate a trained run",
                       description="Next-token loss, accuracy, position error and R^2 of a run on a "
                       "dataset split, written to RUN/eval.json.")
    p.add_argument("--run", required=True, metavar="RUN")
    p.add_argument("--data", required=True, metavar="DIR")
    p.add_argument("--split", default="val")
    p.add_argument("--sequences", type=int, default=64, help="sequences to evaluate")
    p.add_argument("--lengths", default=None, metavar="1,2,4,8,16",
                   help="context multiples for length extrapolation (needs --pos rope)")
    p.add_argument("--extrapolation-sequences", type=int, default=4)
    p.set_defaults(func=run, field_flags={"n_seq": "--sequences"})


def run(args) -> int:
    from orbitlaw.models.evaluate import evaluate

    lengths = _lengths(args.lengths) if args.lengths else None
    result = evaluate(args.run, args.data, lengths=lengths, split=args.split, n_seq=args.sequences,
                      extrapolation_sequences=args.extrapolation_sequences)
    print(json.dumps({k: result[k] for k in ("loss", "accuracy", "position_error_au", "r2_positions") if k in result}))
    return 0
