"""Figure of the symbolic regression: every seed's Pareto front (error vs complexity) and its choice."""

from __future__ import annotations

from pathlib import Path

from matplotlib.figure import Figure  # object API: never switches the caller's backend

from orbitlaw.discovery.sr.law import ERROR_FLOOR
from orbitlaw.provenance import atomic_path


def plot_pareto(law: dict, out: str | Path) -> Path:
    """Write ``out`` (PNG): relative L1 error (log) against complexity, one line per seed, the chosen
    model of each seed circled and the reported expression in the title."""
    out = Path(out)
    fig = Figure(figsize=(6.4, 4.2), dpi=120)
    ax = fig.subplots()
    for row in law["per_seed"]:
        front = row["pareto"]
        xs = [c["complexity"] for c in front]
        ys = [max(c["error"], ERROR_FLOOR) for c in front]
        (line,) = ax.step(xs, ys, where="post", marker=".", alpha=0.7, label=f"seed {row['seed']}")
        ax.plot([row["complexity"]], [max(row["error"], ERROR_FLOOR)], "o", mfc="none", ms=10,
                color=line.get_color())
    ax.set_yscale("log")
    ax.set_xlabel("complexity (expression nodes)")
    metric = law.get("error_metric", "relative")
    ax.set_ylabel("held-out " + ("mean |ln y - ln f|" if metric == "log" else "relative L1 error"))
    verdict = law.get("verdict") or ("newtonian" if law["newtonian"] else
                                     ("power-law" if law["power_law"] else "not-a-power-law"))
    ax.set_title(f"{law['expression']}\n{verdict}; {law['seeds_agreeing']}/{law['seeds']} seeds agree",
                 fontsize=9)
    if len(law["per_seed"]) <= 10:
        ax.legend(fontsize=7)
    fig.tight_layout()
    with atomic_path(out) as tmp:
        fig.savefig(tmp)
    return out
