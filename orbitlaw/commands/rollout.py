"""``orbitlaw rollout``: a trained model's autoregressive prediction of an orbit, next to the true one."""

from __future__ import annotations

import json


def add_parser(sub) -> None:
    p = sub.add_parser(
        "rollout", help="generate an orbit autoregressively from a trained model and draw it beside the truth",
        description="Prompt a trained run with the first --prompt-steps steps of one sequence, generate --steps "
        "more token by token (greedy, or sampled with --seed), and write FILE.png or FILE.gif (the true and the "
        "generated paths) and FILE.json (mean position error in AU per generated step, beside repeat-last).")
    p.add_argument("--run", required=True, metavar="RUN", help="trained run directory (orbitlaw train)")
    p.add_argument("--data", required=True, metavar="DIR", help="dataset directory")
    p.add_argument("--split", default=None, help="split name (default: val when present, else the first)")
    p.add_argument("--index", type=int, default=0, help="sequence index within the split")
    p.add_argument("--prompt-steps", type=int, default=None,
                   help="steps of the sequence given to the model (default: a quarter of what the model reads)")
    p.add_argument("--steps", type=int, required=True, help="steps to generate")
    p.add_argument("--mode", choices=("greedy", "sample"), default="greedy")
    p.add_argument("--temperature", type=float, default=1.0, help="sampling temperature (--mode sample)")
    p.add_argument("--seed", type=int, default=0, help="sampling seed (--mode sample)")
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    p.add_argument("--out", required=True, metavar="FILE.(png|gif)", help="figure; the JSON goes beside it")
    p.set_defaults(func=run)


def run(args) -> int:
    import inspect

    from orbitlaw.models.rollout import write_rollout

    # every flag's dest is the keyword of write_rollout that it sets
    doc = write_rollout(**{name: getattr(args, name) for name in inspect.signature(write_rollout).parameters})
    print(json.dumps({k: doc[k] for k in ("steps", "mean_position_error_au", "mean_repeat_last_error_au")}))
    return 0
