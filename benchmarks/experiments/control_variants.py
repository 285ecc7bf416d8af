"""Design changes to the controls preset, measured through exactly the controls study's stages.

    python benchmarks/experiments/control_variants.py --variant NAME --out DIR [--seeds 0,1,2]
        [--result FILE.json] [--negatives [--rows W1,W3-untrained]]

Each variant (``VARIANTS``) replaces some settings of the ``controls`` preset's spec (``variant_spec``: a part's
settings are updated key by key, so a variant's ``model_overrides`` replaces the preset's whole) and runs the
positive control's training seeds (``W3-s<k>``) through the same train, fine-tuned probe, linear probes and
symbolic regression as ``orbitlaw run --preset controls``, in its own cached, resumable study directory (a rerun
only rebuilds the JSON). ``--negatives`` runs the W = 1 and untrained controls under the variant instead (``--rows``
picks some of them): a change to the probe must leave them not Newtonian. The verdict rule and the data's
distribution are the preset's, never a variant's (``force-target`` changes what is probed, and so which law is
Newton's; ``probe-3x-systems`` draws more probe systems from the same prior).

- model and training: ``wide`` (width 128, 4 heads, lr 1e-3), ``wide-probe-lr`` (``wide`` with the probe at lr
  3e-4), ``heads-4`` (4 heads at the default width), ``heads-4-w64`` (4 heads at width 64),
  ``heads-4-w64-low-noise`` (the same with input noise 0.005 AU), ``no-noise`` and ``low-noise`` (input noise 0 and
  0.005 AU), ``long-train`` (32,000 pretraining steps);
- probe: ``probe-previous`` (constant lr, 1,000 steps), ``probe-constant-3k`` (constant lr, 3,000 steps),
  ``probe-cosine-1k`` (cosine, 1,000 steps), ``probe-6k`` (6,000 steps), ``probe-3k`` (3,000 steps reading every
  window of each sequence), ``probe-3x-systems`` (3,000 training systems of a 4,000-system probe set),
  ``probe-6k-every-window`` (the largest probe budget, 6,000 steps reading every window: for the negatives);
- target: ``force-target`` (the force |F| instead of the planet's acceleration).

Which of these shaped the preset, and why, is in docs/history.md. Writes
``benchmarks/results/control_variant_<variant>.json`` unless ``--result`` names another file.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

from orbitlaw.provenance import code_version, dependency_versions, write_json_atomic
from orbitlaw.study import stages
from orbitlaw.study.controls import configurations, run_controls
from orbitlaw.study.presets import study_config

VARIANTS = {
    "wide": {"train": {"model_overrides": {"n_embd": 128, "n_head": 4}, "lr": 1e-3}},
    "wide-probe-lr": {"train": {"model_overrides": {"n_embd": 128, "n_head": 4}, "lr": 1e-3},
                      "probe": {"lr": 3e-4}},
    "no-noise": {"train": {"input_noise": 0.0}},
    "probe-previous": {"probe": {"schedule": "constant", "steps": 1000, "checkpoint_every": 250}},
    "probe-constant-3k": {"probe": {"schedule": "constant", "steps": 3000, "checkpoint_every": 750}},
    "probe-cosine-1k": {"probe": {"schedule": "cosine", "steps": 1000, "checkpoint_every": 250}},
    "probe-6k": {"probe": {"steps": 6000, "checkpoint_every": 1500}},
    "long-train": {"train": {"max_steps": 32000, "warmup_steps": 400, "eval_every": 32000, "checkpoint_every": 8000,
                             "log_every": 1600}},
    "force-target": {"target": "force-magnitude"},
    "low-noise": {"train": {"input_noise": 0.005}},
    "heads-4": {"train": {"model_overrides": {"n_head": 4}}},
    "heads-4-w64": {"train": {"model_overrides": {"n_head": 4, "n_embd": 64}}},
    "heads-4-w64-low-noise": {"train": {"model_overrides": {"n_head": 4, "n_embd": 64}, "input_noise": 0.005}},
    "probe-3x-systems": {"data": {"probe": {"preset": "binary", "splits": {"train": 4000}, "seed": 11,
                                            "overrides": {"a_range": [2.0, 3.0]}}},
                         "probe": {"train_sequences": 3000, "heldout_sequences": 1000}},
    "probe-3k": {"probe": {"steps": 3000, "checkpoint_every": 750, "windows_per_sequence": None}},
    "probe-6k-every-window": {"probe": {"steps": 6000, "checkpoint_every": 1500, "windows_per_sequence": None}},
}


def variant_spec(name: str) -> dict:
    """The ``controls`` study's spec (as ``orbitlaw run --preset controls`` resolves it, so the stages a variant
    leaves unchanged have the study's keys) with variant ``name`` applied (each part's settings updated)."""
    spec = study_config("controls")["controls"]
    for part, changes in VARIANTS[name].items():
        spec[part] = {**spec[part], **changes} if isinstance(changes, dict) else changes
    return spec


KEEP = ("name", "window", "target", "probe_r2", "probe_r2_log", "linear_probe_r2", "linear_probe_r2_log",
        "linear_probe_r2_accel", "linear_probe_r2_log_accel", "newtonian", "verdict", "newtonian_seeds", "val_loss")
LAW_KEEP = stages.LAW_ROW_KEYS


def summary(row: dict) -> dict:
    """A ``run_controls`` row as the result JSONs keep it: its numbers and its law's summary."""
    return {**{k: row.get(k) for k in KEEP}, "law": {k: (row["law"] or {}).get(k) for k in LAW_KEEP},
            "law_frozen": {k: row["law_frozen"].get(k) for k in LAW_KEEP} if row.get("law_frozen") else None}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--variant", required=True, choices=sorted(VARIANTS))
    ap.add_argument("--out", required=True, help="study directory (resumable)")
    ap.add_argument("--seeds", default=None, help="training seeds, comma-separated (default: the preset's)")
    ap.add_argument("--result", default=None, help="default: benchmarks/results/control_variant_<variant>.json")
    ap.add_argument("--negatives", action="store_true",
                    help="run the W = 1 and untrained controls under the variant instead of the training seeds")
    ap.add_argument("--rows", default=None, help="with --negatives: just these of W1, W3-untrained (comma-separated)")
    args = ap.parse_args()
    spec = variant_spec(args.variant)
    if args.seeds is not None:
        spec["seeds"] = [int(s) for s in args.seeds.split(",")]
    names = [c["name"] for c in configurations(spec)]
    negative = {n for n in names if n == "W1" or n.endswith("-untrained")}
    chosen = negative if args.negatives else {n for n in names if "-s" in n}
    if args.rows:
        chosen &= set(args.rows.split(","))
    start = time.perf_counter()
    study = stages.Study(args.out, progress=False)
    write_json_atomic(study.path("study.json"), {"variant": args.variant, "config": spec,
                                                 "code_version": code_version()})
    rows = run_controls(study, spec, workers=1, progress=False, only=chosen)
    out_rows = [summary(row) for row in rows]
    count = "negative_controls_newtonian" if args.negatives else "positive_control_newtonian_training_seeds"
    doc = {"benchmark": "control_variants", "variant": args.variant, "change": VARIANTS[args.variant],
           count: f"{sum(r['newtonian'] for r in out_rows)}/{len(out_rows)}",
           "this_invocation_seconds": round(time.perf_counter() - start, 1), "rows": out_rows, "config": spec,
           "code_version": code_version(), "dependency_versions": dependency_versions(),
           "machine": {"cpus": os.cpu_count(), "platform": platform.platform()}}
    result = Path(args.result or f"benchmarks/results/control_variant_{args.variant}.json")
    write_json_atomic(result, doc)
    print(json.dumps({k: doc[k] for k in ("variant", count)}))


if __name__ == "__main__":
    main()
