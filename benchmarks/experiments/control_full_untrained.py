"""The full-context control at its random initialisation, through exactly the controls study's stages.

    python benchmarks/experiments/control_full_untrained.py --out DIR [--result FILE.json]

A diagnostic beside the preset, not one of its rows. The trained full-context model's fine-tuned probe reads
Newton (``full``: ``newtonian`` 5/5 at 6,000 probe steps, and 4/5 at the exact test) while its frozen state
reads ln|a| linearly at R^2 0.505 only: is that the pretraining, or can the fine-tune, which retrains the
whole model on the whole orbit, find the law in any model of that shape? Here the ``full`` configuration
with the ``W3-untrained`` control's overrides (one step at lr 0, no input noise) runs the same data, probes
and symbolic regression (``run_controls`` with one configuration added). Writes
``benchmarks/results/control_full_untrained.json``.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from control_variants import summary  # a sibling script: benchmarks/experiments/ is on sys.path

from orbitlaw.provenance import code_version, dependency_versions, write_json_atomic
from orbitlaw.study import controls, stages
from orbitlaw.study.presets import study_config

UNTRAINED = ("max_steps", "lr", "input_noise", "checkpoint_every", "eval_every", "log_every")


def full_untrained(spec: dict) -> dict:
    """The ``full-untrained`` configuration: ``full``'s training with the untrained control's ``UNTRAINED``
    settings."""
    rows = controls.configurations(spec)
    full = next(r for r in rows if r["name"] == "full")
    untrained = next(r for r in rows if r["name"].endswith("-untrained"))
    return {"name": "full-untrained", "window": None,
            "train": {**full["train"], **{k: untrained["train"][k] for k in UNTRAINED}}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="study directory (resumable)")
    ap.add_argument("--result", default="benchmarks/results/control_full_untrained.json")
    args = ap.parse_args()
    spec = study_config("controls")["controls"]
    start = time.perf_counter()
    row, = controls.run_controls(stages.Study(args.out, progress=False), spec, workers=1, progress=False,
                                 only={"full-untrained"}, extra=[full_untrained(spec)])
    kept = summary(row)
    law = kept.pop("law")
    kept.pop("window")
    doc = {"benchmark": "control_full_untrained", "study": args.out, "row": kept, "law": law, "config": spec,
           "this_invocation_seconds": round(time.perf_counter() - start, 1), "code_version": code_version(),
           "dependency_versions": dependency_versions()}
    write_json_atomic(Path(args.result), doc)
    print(json.dumps({k: doc["row"][k] for k in ("verdict", "newtonian_seeds", "probe_r2_log")}))


if __name__ == "__main__":
    main()
