"""Autoregressive rollouts: what a trained model predicts on its own (Vafa et al. 2025 show them for the
Solar System), next to the true orbit.

A rollout takes the first ``prompt_steps`` steps of a sequence from the data and generates the next
``steps`` steps token by token, each conditioned on everything before it (the model's own outputs
included). A token model emits, per coordinate, the argmax bin (``greedy``) or a bin drawn from the
softmax at ``temperature`` (``sample``, a seeded ``torch.Generator``); time-step and pad ids are never
emitted. A regression model emits its predicted position. Generated tokens are decoded to bin centres
(AU) and compared with the exact positions (``Split.continuous``), per step, averaged over the bodies
(planets and star); ``repeat_last`` (each body stays where the prompt left it) is the baseline.

Token layout (``orbitlaw.orbits``): token 0 is the time-step token, then per step the planets and then the
star, so token k >= 1 is body (k - 1) mod (N + 1) at step (k - 1) div (N + 1). The whole rollout must fit
in the sequence (the truth) and, for learned positions, in the model's block.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from orbitlaw.models.gpt import GPT
from orbitlaw.validate import FieldError

MODES = ("greedy", "sample")


@dataclass
class Rollout:
    """Positions (AU) per generated step and body: ``predicted`` and ``true`` (steps, bodies, 2); ``prompt``
    (prompt_steps, bodies, 2) true positions; ``error`` (steps,) mean distance over bodies (AU);
    ``repeat_last`` (steps,) the same for the last prompt positions."""

    prompt: np.ndarray
    predicted: np.ndarray
    true: np.ndarray
    error: np.ndarray
    repeat_last: np.ndarray


def check_length(model: GPT, seq_len: int, bodies: int, prompt_steps: int, steps: int) -> int:
    """Tokens the rollout needs (time-step token, prompt and generated steps); one-line ValueError when it
    exceeds the sequence or a learned-position model's block."""
    if prompt_steps < 1 or steps < 1:
        raise FieldError(message=f"`prompt_steps` and `steps` must be >= 1, got {prompt_steps} and {steps}")
    need = 1 + (prompt_steps + steps) * bodies
    available = (seq_len - 1) // bodies
    if need > seq_len:
        raise FieldError(message=f"`prompt_steps` {prompt_steps} + `steps` {steps} = {prompt_steps + steps} steps, "
                         f"but the sequence holds {available} steps of {bodies} bodies")
    # positions the last forward reads: every token but the last generated one (a regression model also
    # drops the time-step token); a chunked model reads any length window by window
    offset = 1 if model.config.regression else 0
    if model.config.pos == "learned" and not getattr(model.config, "chunk", None) \
            and need - 1 - offset > model.config.block_size:
        most = (model.config.block_size + offset) // bodies - prompt_steps
        raise ValueError(f"the model reads at most {model.config.block_size} tokens (learned positions): at most "
                         f"{max(most, 0)} steps after a {prompt_steps}-step prompt")
    return need


@torch.no_grad()
def rollout(model: GPT, split, index: int, prompt_steps: int, steps: int, mode: str = "greedy",
            temperature: float = 1.0, seed: int = 0, device="cpu") -> Rollout:
    """Generate ``steps`` steps of sequence ``index`` of ``split`` after a ``prompt_steps``-step prompt."""
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}; choose greedy or sample")
    if not temperature > 0:
        raise FieldError("temperature", f"must be > 0, got {temperature}")
    if not 0 <= index < len(split):
        raise FieldError(message=f"`index` {index} is out of range: the split has {len(split)} sequences")
    bodies = int(split.n_planets[index]) + 1
    seq_len = split.tokens.shape[1]
    need = check_length(model, seq_len, bodies, prompt_steps, steps)
    truth = np.asarray(split.continuous(index))  # (seq_len - 1, 2): token k + 1 is continuous position k
    if not np.all(np.isfinite(truth[:need - 1])):
        raise ValueError(f"sequence {index} ends before step {prompt_steps + steps} (padding)")
    model.eval().to(device)
    generator = torch.Generator(device="cpu").manual_seed(seed)
    c = model.config
    first = 1 + prompt_steps * bodies
    if c.regression:
        seq = torch.from_numpy(truth[:first - 1].astype(np.float32))[None].to(device)
        for _ in range(need - first):
            out, _ = model(seq)
            seq = torch.cat([seq, model.positions(out[:, -1:]).float()], dim=1)
        generated = seq[0, first - 1:].cpu().double().numpy()
    else:
        spec = split.tokenizer
        seq = torch.from_numpy(np.asarray(split.tokens[index, :first], dtype=np.int64))[None].to(device)
        for _ in range(need - first):
            logits = model(seq)[0][0, -1, :, :spec.num_bins].float().cpu()  # (2, bins): position ids only
            if mode == "greedy":
                ids = logits.argmax(dim=-1)
            else:
                ids = torch.multinomial(torch.softmax(logits / temperature, dim=-1), 1, generator=generator)[:, 0]
            seq = torch.cat([seq, ids.to(device).view(1, 1, 2)], dim=1)
        generated = spec.decode(seq[0, first:].cpu().numpy())
    predicted = generated.reshape(steps, bodies, 2)
    true = truth[first - 1:need - 1].reshape(steps, bodies, 2)
    prompt = truth[:first - 1].reshape(prompt_steps, bodies, 2)
    error = np.linalg.norm(predicted - true, axis=-1).mean(axis=1)
    repeat = np.linalg.norm(prompt[-1][None] - true, axis=-1).mean(axis=1)
    return Rollout(prompt, predicted, true, error, repeat)


def plot_rollout(r: Rollout, path, title: str) -> None:
    """PNG: each body's true path (prompt and rollout span) and the generated one. GIF: the same, drawn
    step by step (one frame per generated step)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from orbitlaw.provenance import atomic_path

    bodies = r.true.shape[1]
    names = [f"planet {b + 1}" for b in range(bodies - 1)] + ["star"]
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    fig, ax = plt.subplots(figsize=(5.5, 5.5))
    everything = np.concatenate([r.prompt, r.true, r.predicted]).reshape(-1, 2)
    lo, hi = np.nanmin(everything, axis=0), np.nanmax(everything, axis=0)
    pad = 0.05 * float(np.max(hi - lo)) + 1e-3
    ax.set_xlim(lo[0] - pad, hi[0] + pad)
    ax.set_ylim(lo[1] - pad, hi[1] + pad)
    ax.set_aspect("equal")
    ax.set_xlabel("x (AU)")
    ax.set_ylabel("y (AU)")
    ax.set_title(title, fontsize=9)
    for b in range(bodies):
        col = colours[b % len(colours)]
        path_true = np.concatenate([r.prompt[:, b], r.true[:, b]])
        ax.plot(path_true[:, 0], path_true[:, 1], color=col, lw=1, alpha=0.5, label=f"{names[b]}: true")
        ax.plot(r.prompt[:, b, 0], r.prompt[:, b, 1], color=col, lw=2.5, alpha=0.3)
    lines = [ax.plot([], [], "--o", color=colours[b % len(colours)], ms=2, lw=1, label=f"{names[b]}: model")[0]
             for b in range(bodies)]
    ax.legend(fontsize=7, loc="upper right")

    def draw(k):
        for b, line in enumerate(lines):
            line.set_data(r.predicted[:k + 1, b, 0], r.predicted[:k + 1, b, 1])
        return lines

    path = str(path)
    with atomic_path(path) as tmp:
        if path.endswith(".gif"):
            from matplotlib.animation import FuncAnimation, PillowWriter

            FuncAnimation(fig, draw, frames=len(r.predicted), blit=True).save(str(tmp), writer=PillowWriter(fps=10))
        else:
            draw(len(r.predicted) - 1)
            fig.savefig(tmp, dpi=120)
    plt.close(fig)


def write_rollout(run, data, out, split: str | None = None, index: int = 0, prompt_steps: int | None = None,
                  steps: int = 100, mode: str = "greedy", temperature: float = 1.0, seed: int = 0,
                  device: str = "auto") -> dict:
    """``orbitlaw rollout``: generate, draw ``out`` (.png or .gif) and write the JSON beside it; returns it.
    ``split`` None: val when present, else the first; ``prompt_steps`` None: a quarter of what the model
    reads."""
    from pathlib import Path

    from orbitlaw import orbits
    from orbitlaw.models.distributed import resolve_device
    from orbitlaw.models.evaluate import load_run
    from orbitlaw.provenance import code_version, dependency_versions, write_json_atomic

    out = Path(out)
    if out.suffix not in (".png", ".gif"):
        raise FieldError(message=f"`out` {out}: write a .png or a .gif")
    if not out.parent.is_dir():
        raise FieldError(message=f"`out` {out}: no directory {out.parent}")
    device = resolve_device(device)
    model, run_config = load_run(run, "cpu")
    dataset = orbits.load_dataset(data)
    name = split or ("val" if "val" in dataset else next(iter(dataset)))
    if name not in dataset:
        raise ValueError(f"no split {name!r} in {data}; it has {', '.join(dataset)}")
    part = dataset[name]
    if not 0 <= index < len(part):
        raise FieldError(message=f"`index` {index} is out of range: the split has {len(part)} sequences")
    bodies = int(part.n_planets[index]) + 1
    prompt = prompt_steps if prompt_steps is not None else max(1, int(run_config["context"]) // bodies // 4)
    r = rollout(model, part, index, prompt, steps, mode, temperature, seed, device)
    plot_rollout(r, out, f"{Path(run).name}: {steps} steps generated after {prompt} ({mode}), sequence {index}")
    doc = {"run": str(Path(run).resolve()), "data": str(Path(data).resolve()), "split": name, "index": index,
           "prompt_steps": prompt, "steps": steps, "mode": mode, "temperature": temperature, "seed": seed,
           "bodies": bodies, "units": "AU", "position_error_au": r.error.tolist(),
           "repeat_last_error_au": r.repeat_last.tolist(), "mean_position_error_au": float(r.error.mean()),
           "mean_repeat_last_error_au": float(r.repeat_last.mean()), "figure": out.name,
           "code_version": code_version(), "dependency_versions": dependency_versions()}
    write_json_atomic(out.with_suffix(".json"), doc)
    return doc
