"""Scores of LLM force answers, per system, and the answers table for symbolic regression.

Per system and model: ``r2_all`` = 1 - SS_res / SS_tot over every answered step (with all 450 answered
this is sklearn's ``r2_score`` on all timesteps, revealed ones included, the number comparable with the
reference), ``r2_heldout`` the same over the answered steps whose force was not revealed, ``mae`` and
``mae_heldout`` the mean absolute error (M_sun AU / yr^2), ``n_parsed`` the number of answered steps in
range. R^2 is None when fewer than two steps are answered or the truth is constant.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from pathlib import Path

import numpy as np

from orbitlaw.discovery.llm.parse import parse_answer
from orbitlaw.discovery.llm.systems import System, read_layout
from orbitlaw.provenance import write_text_atomic
from orbitlaw.validate import FieldError

ANSWER_COLUMNS = ("model", "system", "step", "r", "m1", "m2", "F_true", "F_pred", "revealed")
"""answers.csv: r (AU), m1 planet and m2 star mass (M_sun), forces (M_sun AU / yr^2, G = 4 pi^2)."""


def r2(y_true: np.ndarray, y_pred: np.ndarray) -> float | None:
    """Coefficient of determination 1 - SS_res / SS_tot (float64); None if undefined."""
    y_true, y_pred = np.asarray(y_true, np.float64), np.asarray(y_pred, np.float64)
    if len(y_true) < 2:
        return None
    ss_tot = float(np.sum((y_true - y_true.mean()) ** 2))
    if ss_tot == 0.0:
        return None
    return 1.0 - float(np.sum((y_true - y_pred) ** 2)) / ss_tot


def _finite(x: float | None) -> float | None:
    return None if x is None or not math.isfinite(x) else float(x)


def score_system(system: System, values: dict[int, float]) -> dict:
    """Scores of one system's answers ``values`` (step -> |F|); see the module docstring."""
    n = len(system.force)
    steps = np.array(sorted(k for k in values if 0 <= k < n), dtype=np.int64)
    pred = np.array([values[int(k)] for k in steps], dtype=np.float64)
    true = system.force[steps] if len(steps) else np.zeros(0)
    held = ~np.isin(steps, system.revealed)
    out = {"n_steps": n, "n_parsed": len(steps), "n_heldout": int(held.sum()),
           "n_out_of_range": sum(1 for k in values if not 0 <= k < n),
           "r2_all": None, "r2_heldout": None, "mae": None, "mae_heldout": None}
    if len(steps):
        out["r2_all"] = _finite(r2(true, pred))
        out["mae"] = _finite(float(np.mean(np.abs(true - pred))))
    if held.any():
        out["r2_heldout"] = _finite(r2(true[held], pred[held]))
        out["mae_heldout"] = _finite(float(np.mean(np.abs(true[held] - pred[held]))))
    return out


def answer_rows(model: str, system: System, values: dict[int, float]) -> list[dict]:
    """answers.csv rows (see :data:`ANSWER_COLUMNS`) of one system's answered steps; [] without states."""
    if system.state is None:
        return []
    n, revealed = len(system.force), set(system.revealed.tolist())
    r, m1, m2 = system.r, system.m1, system.m2
    return [{"model": model, "system": system.index, "step": k, "r": float(r[k]), "m1": float(m1[k]),
             "m2": float(m2[k]), "F_true": float(system.force[k]), "F_pred": float(v), "revealed": k in revealed}
            for k, v in sorted(values.items()) if 0 <= k < n]


def write_answers_csv(path: Path, rows: list[dict]) -> None:
    """Write answers.csv atomically (floats with repr precision)."""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=ANSWER_COLUMNS, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: (repr(v) if isinstance(v, float) else v) for k, v in row.items()})
    write_text_atomic(path, buf.getvalue())


def answers_table(rows: list[dict]) -> dict[str, np.ndarray]:
    """Column arrays of answer rows (the table handed to symbolic regression)."""
    return {c: np.array([row[c] for row in rows]) for c in ANSWER_COLUMNS}


def _read_prediction(path: Path) -> tuple[dict[int, float], str | None]:
    """A stored prediction: a JSON dict step -> value (the reference layout), or raw text with an
    ``ANSWER:`` (parsed like a live response)."""
    text = path.read_text(encoding="utf-8", errors="replace")
    try:
        obj = json.loads(text)
    except ValueError:
        parsed = parse_answer(text)
        return parsed.values, parsed.error
    if not isinstance(obj, dict):
        return {}, f"{path.name} holds a JSON {type(obj).__name__}, not a dict of timestep to value"
    values: dict[int, float] = {}
    for k, v in obj.items():
        try:
            key, value = int(k), float(v)
        except (TypeError, ValueError):
            return values, f"{path.name}: entry {k!r}: {v!r} is not timestep: number"
        if not math.isfinite(value):
            return values, f"{path.name}: entry {k!r} is not finite"
        values[key] = value
    return values, None


def score_reference(prompts: Path, predictions: Path) -> tuple[list[dict], list[dict]]:
    """Score every model directory ``<predictions>/<model>/<i>.json`` against ``<prompts>``.

    Returns (results, answer rows); a system a model did not answer is recorded as not parsed.
    ValueError (one line) when a directory is missing or holds no predictions.
    """
    systems = read_layout(Path(prompts))
    predictions = Path(predictions)
    if not predictions.is_dir():
        raise FieldError(message=f"`predictions` {predictions}: no such directory")
    models = sorted(p.name for p in predictions.iterdir() if p.is_dir() and not p.name.startswith("."))
    if not models:
        raise FieldError(message=f"`predictions` {predictions}: no <model>/ directories")
    results, rows = [], []
    for model in models:
        for s in systems:
            path = predictions / model / f"{s.index}.json"
            record = {"model": model, "provider": None, "system": s.index, "source": str(path)}
            if not path.exists():
                values, error = {}, f"{path.name} is missing"
            else:
                values, error = _read_prediction(path)
            record.update(parsed=error is None, parse_error=error, **score_system(s, values if not error else {}))
            results.append(record)
            if error is None:
                rows += answer_rows(model, s, values)
    if not any(r["parsed"] for r in results):
        raise FieldError(message=f"`predictions` {predictions}: no readable <model>/<i>.json matching the prompts")
    return results, rows


def model_slug(model: str) -> str:
    """A directory name for a model name (``meta/llama-3`` -> ``meta_llama-3``)."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", model).strip("._")
    return slug or "model"
