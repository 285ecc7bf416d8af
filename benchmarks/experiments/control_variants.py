"""Design changes to the positive control, measured through exactly the controls study's stages.

    python benchmarks/control_variants.py --variant wide --out DIR [--seeds 0,1,2] [--result FILE.json]
        [--negatives]

Each variant changes the ``controls`` preset's spec in one named way, chosen from a measured cause before it
is run, and runs the positive control's training seeds (``W3-s<k>``) through the same train, fine-tuned
probe, linear probes and symbolic regression as ``orbitlaw run --preset controls`` (in its own cached,
resumable study directory, so a rerun only rebuilds the JSON); ``--negatives`` runs the W = 1 and untrained
controls under the variant instead, which a variant that changes the probe must leave not Newtonian. The
verdict, its tolerance and the data's distribution are the preset's, never a variant's (``force-target``
changes what is probed, and so which law is Newton's; ``probe-3x-systems`` draws more probe systems from the
same prior).

Variants (``VARIANTS``). The first three were measured against the preset of commit 93c4bf1, whose probe
fine-tuned at a constant lr for 1,000 steps (each result JSON records its whole spec); the preset now
fine-tunes with a cosine decay over 3,000 steps, which the ``probe-*`` variants measure against:

- ``wide``: the regression GPT at width 128 with 4 heads (2 layers, about 400k parameters) and lr 1e-3 (the
  usual rate at that width), instead of width 32, one head, lr 3e-3. Cause: the width-32 control's
  validation MSE of the planet's next position is 2.2-3.5e-3 AU^2 (about 0.05 AU RMS, a few per cent of a
  step's curvature), where three exact positions of both bodies determine the next one, and its best
  linear probe reads the planet's acceleration at R^2 0.91 and ln m1, ln m2 at 0.18-0.40: under-fitted.
- ``wide-probe-lr``: ``wide`` with the fine-tuned probe at lr 3e-4 instead of 1e-3 (run into the same
  study directory as ``wide``, whose trained models it reuses). Cause: the wide control's frozen layers
  read ln|F| linearly at R^2 0.86 while fine-tuning the whole model at 1e-3 ends at 0.81, so the
  fine-tune loses part of what the state has.
- ``no-noise``: the width-32 control trained without the Gaussian noise on its input positions (sigma 0
  instead of 0.02 AU). Cause: with noisy inputs the best prediction shrinks the curvature, and so each
  mass, toward the prior mean (three positions with 0.02 AU noise give the planet's curvature to 2-12%
  at 1.0-0.4 rad a step), which is the fitted exponents' pattern (m1 0.77, m2 0.86, r -1.39).
- ``probe-previous``: the preset's probe as it was at 93c4bf1, a constant lr for 1,000 steps. Cause of the
  change away from it: that fine-tune fits its own training labels no better than the held-out ones
  (R^2 ln|F| 0.861 and 0.860 for W3-s0): it is under-trained, not over-fitted.
- ``probe-constant-3k``: a constant lr for 3,000 steps (more steps alone).
- ``probe-cosine-1k``: the cosine decay over the previous 1,000 steps (the schedule alone).

The preset's probe now reads the planet's acceleration (``acceleration-magnitude``) and judges its law at
the 1% precision; the last two variants are measured against that:

- ``force-target``: the force |F| again (the preset's target before, judged as a force). Cause of the change
  away from it: a model trained on the planet's next position needs its acceleration G m2 / r^2 and is
  never asked for the planet's mass m1, so a force probe must learn m1 by itself.
- ``long-train``: 32,000 pretraining steps instead of 8,000 (same cosine schedule). Cause: the acceleration
  probe's errors on W3-s0 are mostly per system (RMS ln error 7.1% between systems, 2.7% within one), a
  star mass each window mis-reads alike, and the training loss was still falling at 8,000 steps.
- ``low-noise``: input noise sigma 0.005 AU instead of 0.02. Cause: three positions with 0.02 AU noise give
  the curvature only to 1-12% (0.049 AU on a second difference of 0.4-5 AU), and a model trained on them
  learns the noisy-input optimum, which shrinks each system's star mass toward the prior mean: the
  exponents' pattern (r -1.77, m2 0.96). At 0.005 AU the slowest step's curvature is known to 3%.
- ``heads-4``: 4 heads of width 8 instead of one of width 32 (same width, same parameter count). Cause: one
  softmax head returns a convex combination of its window's values, so it cannot weigh the planet's three
  positions +1, -2, +1 as a second difference does; with one head per step the output projection can.
- ``heads-4-w64``: ``heads-4`` at width 64 (about 100k parameters). Cause: ``heads-4`` lowered the validation
  MSE 3.9e-3 -> 1.8e-3 AU^2 and the departure 4.2% -> 2.5%, and its training loss was still falling.
- ``heads-4-w64-low-noise``: ``heads-4-w64`` with ``low-noise``'s sigma (the two causes together: with one
  head of width 32 the noise was not what limited the model, ``low-noise`` measured so).
- ``probe-6k``: the preset's design (``heads-4-w64-low-noise``) with the fine-tuned probe's budget doubled,
  6,000 cosine steps instead of 3,000. Cause: the three training seeds read the same systematic error
  (exponents r -1.95, m1 -0.01, m2 1.00 in each; ln(predicted/true |a|) +0.9 to +1.3% on the weakest quartile
  of |a| and -0.7 to +0.2% on the strongest, against +0.3% / -0.4% for the MLP on the same window), a
  compressed range that a regressor short of its optimum gives, and the probe fits its training rows barely
  better than held-out ones (R^2 ln|a| 0.991 against 0.989 on W3-s2): is the probe's budget or the state the
  limit? A diagnostic on W3-s2 (0/5, 1.17% from Newton), not a change the preset has made.

With 6,000 probe steps (the preset since) the training seeds read 2/5, 2/5, 4/5 (W3-s0, W3-s1, W3-s2):

- ``probe-3x-systems``: the fine-tuned probe trains on 3,000 systems instead of 1,000 (the probe set drawn with
  4,000 instead of 2,000; 1,000 held out as before, so symbolic regression reads as many rows). Cause: the
  weak corner of the prior decides the verdict. ``control_corner.py`` on W3-s1 (2/5): without its 62 corner
  rows (m2 < 0.3 M_sun, r > 3 AU, of the 5,000 that symbolic regression reads) 5/5 searches are Newtonian,
  without 62 random rows 0-3/5 (1 of 10 draws Newtonian); every readout over-predicts there (+5.3 to +7.8% for
  the GPT seeds, +4.4% for the MLP on the raw window), what a regressor fitted on few systems at the edge of
  its data gives (about 12 of the 1,000 training systems reach that corner). Measured: W3-s0, W3-s1 and W3-s2
  ``newtonian`` 5/5 each (C = 39.44, 39.42, 39.46), the corner's bias -1.2 to -2.0% (38 rows); under it
  (``--negatives``) W = 1 stays 0/5 (39% off) and the untrained control 0/5 (3.8% off, against 6.1%).

The preset has since adopted ``probe-3x-systems``; the next variant is measured against it:

- ``probe-3k``: 3,000 fine-tuning steps instead of 6,000 (the probe's other settings, its 3,000 training
  systems included, unchanged). Cause: time. The preset takes some 2.5 hours of one core without the tokenised
  row, against a 45-minute target on two cores, and a W = 3 row's 6,000-step probe is about 21 of its 29
  minutes. With 1,000 training systems 3,000 steps were too few (the weakest accelerations over-predicted,
  1/3 seeds Newtonian); whether they are with 3,000 systems is what this measures, not a reason to expect it.
  Measured: W3-s0, W3-s1, W3-s2 ``newtonian`` 5/5 each (C = 39.47, 39.36, 39.45; R^2 ln|a| 0.988, 0.991,
  0.992); under it (``--negatives``) W = 1 0/5 (39% off) and the untrained control 0/5 (6.1% off, R^2 ln|a|
  0.920). Every probe step read all 100 windows of each sequence, as this variant still does.

The preset has since adopted ``probe-3k`` and reads 25 windows of each sequence per probe step
(``windows_per_sequence``, cause in ``orbitlaw.study.presets``), measured whole by ``benchmarks/controls.py``.

- ``probe-6k-every-window``: the largest fine-tuning budget any design used (6,000 steps, every window of each
  sequence read), for the negatives only (``--negatives``; issue 35: the untrained control's distance from
  Newton moved with the probe's budget, 3.8% at this budget and 7.8% at the preset's, so a negative is strong
  only if it stays not Newtonian at the largest). Judged by the study's one rule.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

from orbitlaw.orbits.provenance import code_version, dependency_versions, write_json_atomic
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
LAW_KEEP = ("expression", "verdict", "seeds_agreeing", "seeds", "power_law", "newton_departure", "fitted_exponents",
            "fitted_exponents_ci95", "newton_departure_exact", "newton_departure_exact_ci95", "resolution", "rule",
            "newton_test", "exact")


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
