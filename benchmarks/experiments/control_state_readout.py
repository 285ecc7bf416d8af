"""Does a control's frozen state hold the force as well as the raw window it reads? A nonlinear readout of
the state beside the same readout of the window.

    python benchmarks/experiments/control_state_readout.py --data PROBE_DATA --run NAME=RUN [--run NAME=RUN ...]

For each run (a chunked regression model, ``orbitlaw train --chunk-steps W``), on the rows the linear
probes use (``orbitlaw.discovery.probes.linear_probe``: up to 10 random planet steps of each of the first
``--train-sequences`` sequences of the probe data, and of the next ``--heldout-sequences``, so held out by
system), fit the fair MLP oracle's regressor (``orbitlaw.discovery.probes.oracle``: sklearn MLP 64 x 64, early
stopping, standardised inputs) on ln|F| (M_sun AU/yr^2) from three inputs:

- ``state_last``: the frozen hidden state of the last layer at the row's token (d_model);
- ``state_all``: every layer's state there, concatenated ((n_layer + 1) d_model);
- ``window``: the 2 W (N + 1) raw positions (AU) the model reads (``oracle.window_features``);

and ridge on ``state_all`` (the linear probe). Reports held-out R^2 in ln|F| of each. If the state's MLP
reaches the window's, the state holds the force and the fine-tuned probe is what loses it; if not, the
model never computed it. Writes ``benchmarks/results/control_state_readout.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

import numpy as np

from orbitlaw.discovery.probes import probe_data
from orbitlaw.discovery.probes.linear_probe import hidden_features, probe_rows, ridge_r2
from orbitlaw.discovery.probes.oracle import window_features, window_mlp
from orbitlaw.models.evaluate import load_run
from orbitlaw.provenance import code_version, dependency_versions, write_json_atomic


def mlp_r2(X_train: np.ndarray, y_train: np.ndarray, X_test: np.ndarray, y_test: np.ndarray, seed: int) -> float:
    """Held-out R^2 of the fair MLP oracle's regressor fitted on (X_train, y_train)."""
    from sklearn.metrics import r2_score
    from sklearn.preprocessing import StandardScaler

    scaler = StandardScaler().fit(X_train)
    fitted = window_mlp(seed).fit(scaler.transform(X_train), y_train)
    return float(r2_score(y_test, fitted.predict(scaler.transform(X_test))))


def readouts(run: str, data: str, train_sequences: int, heldout_sequences: int, per_sequence: int,
             seed: int) -> dict:
    model, run_config = load_run(run, probe_data.resolve_device("cpu"))
    if model.config.chunk is None:
        raise ValueError(f"{run}: not a chunked regression run (train it with --chunk-steps)")
    split = probe_data.open_split(data, "train")
    context = int(run_config["context"])
    window = int(run_config["train"]["chunk_steps"])
    plan = probe_data.default_plan(len(split), train_sequences, heldout_sequences, 0, seed)
    parts = {}
    for name, rows in probe_rows(split, plan, model.config, context, len(split), per_sequence, seed).items():
        states = hidden_features(model, split, rows, context, 32, "cpu")
        parts[name] = {"state_last": states[-1], "state_all": np.concatenate(list(states), axis=1),
                       "window": window_features(split, rows, window), "y": np.log(rows["F_true"])}
    tr, te = parts["train"], parts["heldout"]
    out = {f"mlp_{k}": mlp_r2(tr[k], tr["y"], te[k], te["y"], seed) for k in ("state_last", "state_all", "window")}
    out["ridge_state_all"] = float(ridge_r2(tr["state_all"], tr["y"][:, None], te["state_all"], te["y"][:, None])[0][0])
    out.update(window=window, n_embd=model.config.n_embd, rows={"train": len(tr["y"]), "heldout": len(te["y"])})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", required=True, help="the controls' probe data (STUDY/controls/data/probe)")
    ap.add_argument("--run", action="append", required=True, help="NAME=RUN directory; repeatable")
    ap.add_argument("--train-sequences", type=int, default=1000)
    ap.add_argument("--heldout-sequences", type=int, default=1000)
    ap.add_argument("--steps-per-sequence", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--result", default="benchmarks/results/control_state_readout.json")
    args = ap.parse_args()
    start = time.perf_counter()
    results = {}
    for item in args.run:
        name, sep, run = item.partition("=")
        if not sep:
            ap.error(f"--run {item!r}: expected NAME=RUN")
        results[name] = readouts(run, args.data, args.train_sequences, args.heldout_sequences,
                                 args.steps_per_sequence, args.seed)
        print(name, json.dumps({k: round(v, 3) for k, v in results[name].items() if isinstance(v, float)}))
    doc = {"benchmark": "control_state_readout", "target": "ln|F| (M_sun AU/yr^2), held-out R^2",
           "runs": {item.partition("=")[0]: item.partition("=")[2] for item in args.run}, "data": args.data,
           "results": results, "seconds": round(time.perf_counter() - start, 1),
           "settings": {k: getattr(args, k) for k in ("train_sequences", "heldout_sequences", "steps_per_sequence",
                                                        "seed")},
           "code_version": code_version(), "dependency_versions": dependency_versions(),
           "machine": {"cpus": os.cpu_count(), "platform": platform.platform()}}
    write_json_atomic(Path(args.result), doc)


if __name__ == "__main__":
    main()
