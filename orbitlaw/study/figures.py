"""The study's figures: loss curves, length extrapolation, attention maps, attention entropy, controls.

Each function draws with matplotlib's object API (Agg canvas, no pyplot state), writes one PNG
atomically (a temporary file beside it, then ``os.replace``), creates the parent folder and returns the
path. Each takes a dict keyed by a label (normally the attention name) and raises a one-line ValueError
when there is nothing to draw. Every attention of ``orbitlaw.models.attention.ATTENTIONS`` keeps one colour
(modulo 10) in every figure; other labels take the remaining colours in order.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import torch
from matplotlib.colors import LogNorm
from matplotlib.figure import Figure

from orbitlaw.models.attention import ATTENTIONS
from orbitlaw.models.gpt import GPT
from orbitlaw.models.inspect import attention_entropy, attention_weights
from orbitlaw.models.metrics import read_metrics
from orbitlaw.provenance import atomic_path

DPI = 110
MAP_TOKENS = 200
"""Attention maps show the first MAP_TOKENS queries and keys."""


def _colours(labels) -> dict[str, str]:
    """A matplotlib colour per label: C<i mod 10> for the i-th of the ATTENTIONS, then the next ones for
    other labels."""
    others = iter(range(len(ATTENTIONS), 10_000))
    return {name: f"C{(ATTENTIONS.index(name) if name in ATTENTIONS else next(others)) % 10}" for name in labels}


def _save(fig: Figure, out: Path) -> Path:
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(out) as tmp:
        fig.savefig(tmp, dpi=DPI, bbox_inches="tight")
    return out


def plot_loss_curves(runs: dict[str, Path], out: Path) -> Path:
    """Training and validation loss (nats per coordinate) against step, one colour per run.

    Args:
        runs: label -> training run directory (its ``metrics.jsonl``, see ``orbitlaw.models.train``); runs without
            metrics are left out.
        out: the PNG to write (left panel: training loss; right panel: validation loss).
    """
    metrics = {name: read_metrics(Path(run)) for name, run in runs.items()}
    metrics = {name: rows for name, rows in metrics.items() if rows}
    if not metrics:
        raise ValueError("plot_loss_curves: no run with metrics.jsonl rows to plot")
    colours = _colours(runs)
    fig = Figure(figsize=(10, 4), layout="constrained")
    ax_train, ax_val = fig.subplots(1, 2, sharey=True)
    for name, rows in metrics.items():
        ax_train.plot([r["step"] for r in rows], [r["train_loss"] for r in rows], color=colours[name], label=name)
        val = [r for r in rows if "val_loss" in r]
        ax_val.plot([r["step"] for r in val], [r["val_loss"] for r in val], "o-", ms=3, color=colours[name],
                    label=name)
    for ax, title in ((ax_train, "training loss"), (ax_val, "validation loss")):
        ax.set_title(title)
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
    losses = [r[key] for rows in metrics.values() for r in rows for key in ("train_loss", "val_loss") if key in r]
    if min(losses) > 0 and max(losses) > 3 * min(losses):  # log scale only when the losses span a range
        ax_train.set_yscale("log")
    ax_train.set_ylabel("cross-entropy (nats per coordinate)")
    ax_val.legend()
    return _save(fig, out)


def plot_extrapolation(evals: dict[str, dict], out: Path) -> Path:
    """Next-token loss against the context multiple (log2 axis) for each run with length extrapolation.

    Args:
        evals: label -> the dict of a run's ``eval.json`` (``orbitlaw.models.evaluate.evaluate``); entries without
            an ``extrapolation`` part ({"context": tokens, "loss": {"1": loss, "2": loss, ...}}) are skipped.
        out: the PNG to write.
    """
    curves = {name: ev["extrapolation"] for name, ev in evals.items() if ev.get("extrapolation")}
    if not curves:
        raise ValueError("plot_extrapolation: no eval has an extrapolation part (evaluate rope runs with lengths)")
    colours = _colours(evals)
    fig = Figure(figsize=(6, 4), layout="constrained")
    ax = fig.subplots()
    multiples = set()
    for name, ext in curves.items():
        xs = sorted(int(m) for m in ext["loss"])
        multiples.update(xs)
        ax.plot(xs, [ext["loss"][str(m)] for m in xs], "o-", color=colours[name], label=name)
    contexts = {int(ext["context"]) for ext in curves.values()}
    ax.set_xscale("log", base=2)
    ax.set_xticks(sorted(multiples), [f"{m}x" for m in sorted(multiples)])
    unit = f" (1x = {contexts.pop()} tokens)" if len(contexts) == 1 else ""
    ax.set_xlabel(f"evaluation length / training context{unit}")
    ax.set_ylabel("cross-entropy (nats per coordinate)")
    ax.set_title("length extrapolation")
    ax.grid(alpha=0.3)
    ax.legend()
    return _save(fig, out)


@torch.no_grad()
def _weights(model: GPT, tokens: np.ndarray) -> list[torch.Tensor]:
    """Per-layer (B, H, T, T) weights on tokens, cut to the block of a learned-position model."""
    if model.config.pos == "learned":
        tokens = tokens[:, :model.config.block_size]
    device = next(model.parameters()).device
    return [w.cpu() for w in attention_weights(model, torch.from_numpy(np.asarray(tokens, np.int64)).to(device))]


def plot_attention(models: dict[str, GPT], tokens: np.ndarray, maps_out: Path, entropy_out: Path,
                   layer: int = -1) -> tuple[Path, Path]:
    """Attention maps and attention entropy against query position, one per model.

    Args:
        models: label -> GPT (any attention; run in eval mode, on its own device, without gradients).
        tokens: (B, T, 2) token ids (e.g. ``split.tokens[:8, :T]``); a learned-position model sees only
            its first block_size tokens.
        maps_out: PNG of one panel per model: the weights of layer ``layer`` averaged over heads, for the
            first sequence and the first MAP_TOKENS queries and keys, on a log colour scale (white: masked).
        entropy_out: PNG of the entropy (nats, ``orbitlaw.models.inspect.attention_entropy``; rows normalised to
            sum 1) of each query's weights, averaged over heads, layers and sequences, against query
            position t (0-based), with uniform attention over the causal prefix, log(t + 1), dashed.
            A model with a sliding window w can reach at most log(w).
    Returns:
        (maps_out, entropy_out).
    """
    if not models:
        raise ValueError("plot_attention: no models to plot")
    tokens = np.asarray(tokens)
    if tokens.ndim != 3 or tokens.shape[-1] != 2 or 0 in tokens.shape[:2]:
        raise ValueError(f"plot_attention: tokens must have shape (B, T, 2) with B, T >= 1, got {tokens.shape}")
    colours = _colours(models)
    ncols = min(3, len(models))
    nrows = math.ceil(len(models) / ncols)
    fig_maps = Figure(figsize=(4.2 * ncols, 3.6 * nrows), layout="constrained")
    axes = np.atleast_1d(fig_maps.subplots(nrows, ncols)).ravel()
    fig_ent = Figure(figsize=(6, 4), layout="constrained")
    ax_ent = fig_ent.subplots()
    maps, longest = {}, 0
    for name, model in models.items():
        weights = _weights(model, tokens)
        maps[name] = (weights[layer][0].mean(0)[:MAP_TOKENS, :MAP_TOKENS].double().numpy(), len(weights))  # (T', T')
        entropy = torch.stack([attention_entropy(w) for w in weights])  # (layers, B, H, T)
        curve = entropy.flatten(0, 2).double().nanmean(0).numpy()  # (T,)
        ax_ent.plot(np.arange(len(curve)), curve, color=colours[name], label=name)
        longest = max(longest, len(curve))
    # one colour scale for every panel, so that a colour is the same weight in each: the largest weight shown, down
    # to the smallest positive one, at most six decades below it
    positive = np.concatenate([shown[shown > 0] for shown, _ in maps.values()])
    vmax = positive.max() if positive.size else 1.0
    norm = LogNorm(vmin=max(positive.min() if positive.size else vmax * 1e-6, vmax * 1e-6), vmax=vmax)
    image = None
    for ax, (name, (shown, n_layer)) in zip(axes, maps.items(), strict=False):
        image = ax.imshow(np.ma.masked_less_equal(shown, 0), norm=norm, cmap="viridis", interpolation="nearest")
        ax.set_title(f"{name} (layer {layer % n_layer + 1}/{n_layer}, mean of heads)", fontsize=9)
        ax.set_xlabel("key position")
        ax.set_ylabel("query position")
    fig_maps.colorbar(image, ax=axes[:len(models)].tolist(), label="attention weight (log scale; white: masked)")
    for ax in axes[len(models):]:
        ax.set_axis_off()
    t = np.arange(longest)
    ax_ent.plot(t, np.log(t + 1), "k--", lw=1, label="uniform, log(t + 1)")
    ax_ent.set_xlabel("query position t")
    ax_ent.set_ylabel("attention entropy (nats)")
    ax_ent.set_title("attention entropy (mean over heads, layers, sequences)")
    ax_ent.grid(alpha=0.3)
    ax_ent.legend(fontsize=8)
    return _save(fig_maps, maps_out), _save(fig_ent, entropy_out)


def plot_controls(controls: list[dict], r2_out: Path, forces_out: Path) -> dict[str, Path]:
    """Two figures of the controls (``orbitlaw.study.controls`` rows): held-out R² of the fine-tuned probe's
    target (ln|F|, or ln|a| for the planet's acceleration) and of ln|F| and the acceleration (best linear
    layer) per configuration; and predicted against true target (log-log) for the first positive control and
    the W = 1 control."""
    import pandas as pd

    from orbitlaw.discovery.probes.probe_data import columns
    from orbitlaw.study.controls import target_text

    if not controls:
        raise ValueError("no controls to draw")
    names = [c["name"] for c in controls]
    symbol, unit, _ = target_text(controls[0])
    fig = Figure(figsize=(max(6.0, 0.8 * len(names)), 4), layout="constrained")
    ax = fig.subplots()
    x = np.arange(len(names))
    series = [("probe_r2_log", f"fine-tuned probe, ln{symbol}"), ("linear_probe_r2_log", "linear, ln|F|"),
              ("linear_probe_r2_accel", "linear, acceleration")]
    for i, (key, label) in enumerate(series):
        values = [c.get(key) if c.get(key) is not None else np.nan for c in controls]
        ax.bar(x + (i - 1) * 0.27, np.clip(values, -0.2, 1.0), width=0.27, label=label)
    ax.set_xticks(x, names, rotation=30, ha="right")
    ax.set_ylabel("held-out R² (clipped at -0.2)")
    ax.set_ylim(-0.2, 1.2)  # headroom: the legend sits above the bars
    ax.axhline(0, color="k", lw=0.5)
    ax.legend(fontsize=8, loc="upper center", ncol=3)
    made = {"controls_r2": _save(fig, r2_out)}
    picks = [c for c in controls if "-s" in c["name"]][:1] + [c for c in controls if c["name"] == "W1"]
    if picks:
        fig = Figure(figsize=(4.2 * len(picks), 4), layout="constrained")
        axes = np.atleast_1d(fig.subplots(1, len(picks)))
        for ax, c in zip(axes, picks, strict=True):
            true, pred = columns(c.get("target", "force-magnitude"))
            table = pd.read_csv(c["predictions"])
            table = table[np.isfinite(table[pred]) & (table[pred] > 0)]
            ax.loglog(table[true], table[pred], ".", ms=1, alpha=0.3)
            lo, hi = table[true].min(), table[true].max()
            ax.plot([lo, hi], [lo, hi], "k--", lw=0.8)
            ax.set_xlabel(f"true {symbol} ({unit})")
            ax.set_ylabel(f"predicted {symbol}")
            law = c.get("law") or {}
            ax.set_title(f"{c['name']}: {law.get('verdict', '—')}", fontsize=9)
        made["controls_forces"] = _save(fig, forces_out)
    return made


def _departure(row: dict) -> tuple[float, float, float] | None:
    """(departure, lower, upper) of a row's exact law from Newton's form, in percent; None if not measured."""
    law = row.get("law") or {}
    d = law.get("newton_departure_exact")
    if d is None:
        return None
    lo, hi = law.get("newton_departure_exact_ci95") or (d, d)
    return 100 * d, 100 * lo, 100 * hi


def _bars(d: np.ndarray) -> list[np.ndarray]:
    """Error bar lengths (below, above) of rows (departure, lower, upper): an exact law of Newton's form departs
    by ~1e-16 while its interval's lower end is above that, so the lengths are clipped at 0."""
    return [np.clip(d[:, 0] - d[:, 1], 0, None), np.clip(d[:, 2] - d[:, 0], 0, None)]


def plot_path(rows: list[dict], out: Path, precision: float | None = None) -> Path:
    """The path (``orbitlaw.study.path``): the exact law's departure from Newton (% RMS of ln, with its 95%
    interval over systems) along the rungs, one line per attention through the first seed's rows (the other
    seeds' as open markers); and at the last rung against the training tokens, one line per attention and
    width through the first seed's rows (the other seeds' as open markers, circles at the smallest width and
    squares at the others). ``precision``: the verdict rule's precision, drawn as a dashed line."""
    if not rows:
        raise ValueError("no path rows to draw")
    negatives = [r for r in rows if r.get("negative") and _departure(r)]
    rows = [r for r in rows if not r.get("negative")]
    rungs = sorted({(r["rung_index"], r["rung"]) for r in rows})
    attentions = list(dict.fromkeys(r["attention"] for r in rows))
    colours = _colours(attentions or ["softmax"])
    first = min(r["seed"] for r in rows)
    fig = Figure(figsize=(11, 4.2))
    left, right = fig.subplots(1, 2)
    for k, attention in enumerate(attentions or ["softmax"]):
        shift = (k - (len(attentions) - 1) / 2) * 0.08
        chain = sorted((r for r in rows if not r["width_row"] and r["attention"] == attention),
                       key=lambda r: r["rung_index"])
        main = [(r["rung_index"], _departure(r)) for r in chain if r["seed"] == first and _departure(r)]
        if main:
            x = np.array([i for i, _ in main]) + shift
            d = np.array([v for _, v in main])
            left.errorbar(x, d[:, 0], yerr=_bars(d), marker="o", capsize=3,
                          color=colours[attention], label=attention)
        more = [(r["rung_index"], _departure(r)) for r in chain if r["seed"] != first and _departure(r)]
        if more:
            left.scatter([i + shift for i, _ in more], [v[0] for _, v in more], facecolors="none",
                         edgecolors=colours[attention])
        whole = [r for r in rows if r["attention"] == attention and r["rung"] == "whole" and _departure(r)]
        last = [r for r in whole if r["seed"] == first]
        widths = sorted({r["width"] for r in last})
        for width in widths:
            smallest = width == widths[0]
            pts = sorted((r["training_tokens"], _departure(r)) for r in last if r["width"] == width)
            t = np.array([p[0] for p in pts], float)
            d = np.array([p[1] for p in pts])
            right.errorbar(t, d[:, 0], yerr=_bars(d), marker="o" if smallest else "s", capsize=3,
                           color=colours[attention], linestyle="-" if smallest else "--",
                           label=f"{attention}, width {width}")
            again = [r for r in whole if r["seed"] != first and r["width"] == width]
            if again:
                right.scatter([r["training_tokens"] for r in again], [_departure(r)[0] for r in again],
                              marker="o" if smallest else "s", facecolors="none", edgecolors=colours[attention])
    for r in negatives:  # an untrained negative control, at the rung whose model it is
        d = _departure(r)
        left.errorbar([r["rung_index"] + 0.3], [d[0]], yerr=_bars(np.array([d])), marker="x", capsize=3,
                      color="grey", linestyle="none", label=r["name"])
    for ax in (left, right):
        if precision:
            ax.axhline(100 * precision, color="grey", linestyle=":", label=f"rule's precision ({precision:.0%})")
        ax.set_ylabel("exact law from Newton (% RMS of ln)")
        ax.set_yscale("symlog", linthresh=1.0)  # linear below 1%: an exact law of Newton's form departs by 0
        if ax.get_legend_handles_labels()[0]:  # nothing labelled, no legend (matplotlib warns)
            ax.legend(fontsize=7)
    left.set_xticks([i for i, _ in rungs], [name for _, name in rungs], rotation=20)
    left.set_title("along the path (one change per rung)")
    right.set_xscale("log")
    right.set_xlabel("training tokens (positions read), rung 'whole'")
    right.set_title("size and training budget")
    return _save(fig, out)
