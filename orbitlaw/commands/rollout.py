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
    from pathlib import Path

    from orbitlaw import orbits
    from orbitlaw.discovery.probe_data import resolve_device
    from orbitlaw.models.evaluate import load_run
    from orbitlaw.models.rollout import plot_rollout, rollout
    from orbitlaw.orbits.provenance import code_version, dependency_versions, write_json_atomic

    out = Path(args.out)
    if out.suffix not in (".png", ".gif"):
        raise ValueError(f"--out {out}: write a .png or a .gif")
    if not out.parent.is_dir():
        raise ValueError(f"--out {out}: no directory {out.parent}")
    device = resolve_device(args.device)
    model, run_config = load_run(args.run, "cpu")
    data = orbits.load_dataset(args.data)
    name = args.split or ("val" if "val" in data else next(iter(data)))
    if name not in data:
        raise ValueError(f"no split {name!r} in {args.data}; it has {', '.join(data)}")
    split = data[name]
    if not 0 <= args.index < len(split):
        raise ValueError(f"--index {args.index} is out of range: the split has {len(split)} sequences")
    bodies = int(split.n_planets[args.index]) + 1
    prompt = args.prompt_steps or max(1, int(run_config["context"]) // bodies // 4)
    r = rollout(model, split, args.index, prompt, args.steps, args.mode, args.temperature, args.seed, device)
    plot_rollout(r, out, f"{Path(args.run).name}: {args.steps} steps generated after {prompt} "
                         f"({args.mode}), sequence {args.index}")
    doc = {"run": str(Path(args.run).resolve()), "data": str(Path(args.data).resolve()), "split": name,
           "index": args.index, "prompt_steps": prompt, "steps": args.steps, "mode": args.mode,
           "temperature": args.temperature, "seed": args.seed, "bodies": bodies, "units": "AU",
           "position_error_au": r.error.tolist(), "repeat_last_error_au": r.repeat_last.tolist(),
           "mean_position_error_au": float(r.error.mean()), "mean_repeat_last_error_au": float(r.repeat_last.mean()),
           "figure": out.name, "code_version": code_version(), "dependency_versions": dependency_versions()}
    write_json_atomic(out.with_suffix(".json"), doc)
    print(json.dumps({k: doc[k] for k in ("steps", "mean_position_error_au", "mean_repeat_last_error_au")}))
    return 0
