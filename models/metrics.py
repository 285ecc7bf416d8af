"""A run's metrics: ``RUN/metrics.jsonl`` (one JSON object per logged step: step, train_loss, val_loss when
evaluated, lr, tokens_per_s) and its figure ``RUN/loss.png``."""

from __future__ import annotations

import json
from pathlib import Path

from orbitlaw.provenance import atomic_path, inside, naming, write_text_atomic


def read_metrics(run: Path) -> list[dict]:
    """The rows of RUN/metrics.jsonl (up to a line cut short by a kill); ValueError if it links out of the run."""
    path = Path(run) / "metrics.jsonl"
    if not path.exists():
        return []
    rows = []
    for line in inside(run, path, "run").read_text().splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            break  # a line cut short by a kill
    return rows


def append_metrics(run: Path, row: dict) -> None:
    """Add one row to RUN/metrics.jsonl (strict JSON: a NaN or infinity is a ValueError, never written)."""
    line = json.dumps(row, allow_nan=False) + "\n"
    with naming(run / "metrics.jsonl"), open(run / "metrics.jsonl", "a") as f:
        f.write(line)


def keep_metrics_until(run: Path, step: int) -> None:
    """Rewrite RUN/metrics.jsonl without the rows after ``step`` (a resumed run logs them again)."""
    rows = [r for r in read_metrics(run) if r["step"] <= step]
    write_text_atomic(run / "metrics.jsonl", "".join(json.dumps(r) + "\n" for r in rows))


def plot_losses(run: Path) -> Path:
    """RUN/loss.png: training (and validation) loss against step."""
    from matplotlib.figure import Figure  # object API: never switches the caller's backend

    rows = read_metrics(run)
    fig = Figure(figsize=(6, 4))
    ax = fig.subplots()
    ax.plot([r["step"] for r in rows], [r["train_loss"] for r in rows], label="train")
    val = [r for r in rows if "val_loss" in r]
    if val:
        ax.plot([r["step"] for r in val], [r["val_loss"] for r in val], "o-", label="validation")
    ax.set_xlabel("step")
    cfg = json.loads((run / "config.json").read_text())
    mse = cfg["model"].get("regression", False) and cfg["model"].get("outputs", "positions") == "positions"
    ax.set_ylabel("mean squared error (AU^2)" if mse else "cross-entropy (nats per coordinate)")
    ax.set_yscale("log")
    ax.legend()
    ax.set_title(f"{cfg['train']['preset']} / {cfg['train']['attention']}")
    with atomic_path(run / "loss.png") as tmp:
        fig.savefig(tmp, dpi=110, bbox_inches="tight")
    return run / "loss.png"
