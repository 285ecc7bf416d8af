"""What a probe writes and how it is scored: ``predictions.csv`` (the held-out rows), ``metrics.json`` (R^2 and
MAE of the held-out, near-training and training rows), and the checks that keep a result from being
overwritten by one of other settings. Units as :mod:`orbitlaw.discovery.probes.probe_data`."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from orbitlaw import orbits
from orbitlaw.discovery.probes import probe_data
from orbitlaw.discovery.probes.probe_data import (
    ACCELERATION_COLUMNS,
    CSV_COLUMNS,
    VECTOR_COLUMNS,
    columns,
    nearest_to_training,
    states,
    true_values,
)
from orbitlaw.provenance import code_version, dependency_versions, write_json_atomic


def regression_metrics(true: np.ndarray, pred: np.ndarray) -> dict:
    """R^2, MAE (in the target's units) and R^2 of the log for magnitudes (n,); for vectors (n, 2) the same on
    the magnitudes plus ``r2_vector`` (pooled over x and y) and ``mae_vector``. ``r2_log`` leaves out the
    ``nonpositive_pred`` rows whose predicted magnitude is <= 0 (a raw-scaled head can predict those)."""
    true, pred = np.asarray(true, float), np.asarray(pred, float)
    if len(true) == 0:
        return {"n": 0}
    out = {"n": int(len(true))}
    if true.ndim == 2:
        out["r2_vector"] = _r2(true.ravel(), pred.ravel(), center=True)
        out["mae_vector"] = float(np.mean(np.abs(true - pred)))
        true, pred = np.hypot(*true.T), np.hypot(*pred.T)
    out["r2"] = _r2(true, pred)
    out["mae"] = float(np.mean(np.abs(true - pred)))
    pos = (true > 0) & (pred > 0)
    out["nonpositive_pred"] = int(np.sum(pred <= 0))
    out["r2_log"] = _r2(np.log(true[pos]), np.log(pred[pos])) if pos.sum() > 1 else None
    return out


def _r2(true, pred, center=True) -> float | None:
    ss_tot = np.sum((true - true.mean()) ** 2) if center else np.sum(true**2)
    if len(true) < 2 or ss_tot == 0:
        return None
    return float(1 - np.sum((true - pred) ** 2) / ss_tot)


def check_out(out: Path, settings: dict) -> None:
    """Refuse an ``out`` that is a file or holds a result of different settings (creates nothing)."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise ValueError(f"{out} exists and is not a directory")
    metrics = out / "metrics.json"
    if metrics.exists():
        import json

        from orbitlaw.provenance import inside

        inside(out, metrics, "probe output")  # a link out of the output is refused, never read
        try:
            old = json.loads(metrics.read_text()).get("settings")
        except ValueError:
            old = None
        if old is not None and not same_settings(old, settings):
            raise ValueError(f"{out} holds a probe result with different settings; choose another --out")


def same_settings(old: dict, new: dict) -> bool:
    """Whether recorded settings ``old`` equal ``new``; a result written before the fine-tune recorded its
    ``protocol`` (or its lr ``schedule``) was an ``orbitlaw`` one (at a constant lr)."""
    for key, before in (("protocol", "orbitlaw"), ("schedule", "constant")):
        if key in new and key not in old:
            old = {**old, key: before}
    return old == new


def full_window(rows: dict, window: int | None, offset: int) -> np.ndarray:
    """Boolean mask (rows,): the rows whose reader sees a whole window of ``window`` positions (a chunked
    model, or a window oracle; None: every row). Input position ``token - offset`` reads positions
    ``token - offset - window + 1 ..``, so the first ``window - 1`` positions read only a prefix: at a planet
    step before the W-th of a W-step window no reader can see the curvature that gives the masses, and a
    chunked model was never trained to predict there."""
    if window is None:
        return np.ones(len(rows["token"]), bool)
    return np.asarray(rows["token"]) - offset >= window - 1


def write_result(out: Path, split, rows: dict, pred: np.ndarray, target: str, kind: str, settings: dict,
                 extra: dict | None = None, near_k: int = 5000, eligible: np.ndarray | None = None) -> dict:
    """Write ``out/predictions.csv`` (the held-out rows), ``out/metrics.json`` and, for force vectors on
    the solar-system preset, ``out/force_arrows.png``. ``pred`` is (rows,) or (rows, 2) in the target's units
    (:func:`true_values`), NaN where a row was not predicted. ``eligible`` (rows,): the rows ``near_train``
    (the symbolic regression's rows) may pick from (:func:`full_window`; default every row). Returns the
    metrics dict."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    true = true_values(rows, target)
    predicted = np.all(np.isfinite(pred.reshape(len(pred), -1)), axis=1)
    held, lab = rows["heldout"], rows["labelled"]
    test = held & ~lab
    train_ref = lab & ~held if (lab & ~held).any() else lab
    pool = test if eligible is None else test & eligible
    near = nearest_to_training(states(rows, pool), states(rows, train_ref), near_k)
    near_col = np.zeros(len(held), bool)
    near_col[np.flatnonzero(pool)] = near

    def score(mask):
        mask = mask & predicted
        return regression_metrics(true[mask], pred[mask])

    metrics = {"heldout_unlabelled": score(test), "heldout_all": score(held), "heldout_near_train": score(near_col),
               "train_labelled": score(lab & ~held)}
    cols = {c: rows[c] for c in CSV_COLUMNS if c in rows}
    if target == "force-vector":
        cols["F_pred"] = np.hypot(pred[:, 0], pred[:, 1])
        cols.update(Fx_true=rows["Fx_true"], Fy_true=rows["Fy_true"], Fx_pred=pred[:, 0], Fy_pred=pred[:, 1])
    elif target == "acceleration-magnitude":
        cols.update(F_pred=np.full(len(pred), np.nan), a_true=true, a_pred=pred)
    else:
        cols["F_pred"] = pred
    cols["near_train"] = near_col
    cols = {k: np.asarray(v)[held] for k, v in cols.items()}
    extra_columns = {"force-vector": VECTOR_COLUMNS, "acceleration-magnitude": ACCELERATION_COLUMNS}.get(target, ())
    cols = {k: cols[k] for k in (*CSV_COLUMNS, *extra_columns)}
    probe_data.write_csv_atomic(out / "predictions.csv", cols)
    result = {"kind": kind, "target": target, "columns": dict(zip(("true", "pred"), columns(target), strict=True)),
              "units": {"force": "M_sun AU/yr^2", "acceleration": "AU/yr^2", "length": "AU", "G": orbits.G},
              "metrics": metrics, "settings": settings, "seed": settings.get("seed"),
              "counts": {"rows": int(len(held)), "labelled": int(lab.sum()), "heldout_rows": int(held.sum()),
                         "heldout_unlabelled": int(test.sum()), "near_train": int(near_col.sum())},
              "dataset": {"path": str(Path(settings["data"]).resolve()), "preset": split.manifest["preset"],
                          "config_hash": split.manifest["config_hash"], "split": settings["split"]},
              "code_version": code_version(),
              "dependency_versions": dependency_versions(), **(extra or {})}
    if target == "force-vector" and orbits.presets.record(split.manifest["preset"]).real_system:  # named planets
        from orbitlaw.discovery.probes.forces_plot import plot_force_arrows

        params = split.manifest["params"]
        names = None if params.get("together") else {
            int(q): params["planets"][int(q) % len(params["planets"])][0] for q in np.unique(cols["sequence"])}
        plot_force_arrows(cols, out / "force_arrows.png", title=kind, names=names)
        result["figure"] = "force_arrows.png"
    write_json_atomic(out / "metrics.json", result)
    return result
