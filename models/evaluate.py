"""Evaluating a trained run: next-token loss, accuracy, decoded position error, R^2, and length
extrapolation (loss on sequences several times the training context; needs rotary positions).

Writes ``RUN/eval.json``. Position metrics use the decoded bin centres (AU) of the argmax prediction
and of the true next token, over targets that are positions (not time-step or pad ids).

``baselines`` puts the model beside two predictors that know no physics, on the same targets (positions
whose body has two earlier positions in the context): ``repeat_last`` predicts the body's previous
position, ``constant_velocity`` extrapolates its last two positions linearly. A model that has learned
anything about orbits beats both; one that has not sits near or above repeat_last.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import torch

from orbitlaw import orbits
from orbitlaw.models import checkpoint
from orbitlaw.models.batches import check_vocab, make_batch, regression_batch
from orbitlaw.models.gpt import GPT, GPTConfig
from orbitlaw.provenance import code_version, dependency_versions, inside, write_json_atomic
from orbitlaw.validate import FieldError


def load_run(run: str | Path, device="cpu") -> tuple[GPT, dict]:
    """The trained model of a run directory (latest checkpoint, its weights checked against their checksum)
    or of a pretrained folder (:mod:`orbitlaw.models.hub`), and its config.json; one-line ValueError for a file
    that is damaged or a link out of the directory."""
    run = Path(run)
    if not (run / "config.json").exists():
        raise ValueError(f"{run} is not a training run (no config.json)")
    config_file = inside(run, run / "config.json", "run")
    try:
        config = json.loads(config_file.read_bytes())
    except (ValueError, RecursionError):
        config = None
    if not isinstance(config, dict):
        raise ValueError(f"{run}/config.json is corrupted: it is not a JSON object")
    ckpt = checkpoint.weights_dir(run)
    if ckpt is None:
        raise ValueError(f"{run} has no checkpoint")
    try:
        model = GPT(GPTConfig(**config["model"]))
    except (TypeError, KeyError) as exc:  # an unknown or missing setting: another version's run, or tampered
        raise ValueError(f"{run}/config.json does not describe a model this orbitlaw can build: {exc}") from None
    checkpoint.load_weights(ckpt, model)  # never the trainer state: opening a run runs no pickle
    model.to(device).eval()
    return model, config


@torch.no_grad()
def next_token_metrics(model: GPT, split, n_seq: int, batch: int, context: int, device) -> dict:
    """Loss, per-coordinate accuracy, mean position error (AU) and position R^2 on a split."""
    spec = split.tokenizer
    total_loss, count = 0.0, 0
    correct = np.zeros(2)
    n_pos = 0
    errors, preds, trues = [], [], []
    base = {"model": [], "repeat_last": [], "constant_velocity": []}
    base_exact = {name: 0 for name in base}
    for start in range(0, min(n_seq, len(split)), batch):
        idx = np.arange(start, min(start + batch, n_seq, len(split)))
        x, y = make_batch(split.tokens, idx, context, device, model.config.vocab_size)
        logits, loss = model(x, y)
        total_loss += float(loss) * len(idx)
        count += len(idx)
        pred = logits.argmax(-1).cpu().numpy()
        true = y.cpu().numpy()
        is_pos = np.all(true < spec.num_bins, axis=-1)
        correct += (pred == true)[is_pos].sum(0)
        n_pos += int(is_pos.sum())
        p_xy, t_xy = spec.decode(pred[is_pos]), spec.decode(true[is_pos])
        p_xy = np.where(np.isnan(p_xy), 0.0, p_xy)  # a non-position id predicted: counts as the origin
        errors.append(np.linalg.norm(p_xy - t_xy, axis=-1))
        preds.append(p_xy)
        trues.append(t_xy)
        for row, i in enumerate(idx):
            guesses = _baseline_guesses(true[row], pred[row], int(split.n_planets[i]) + 1, spec.num_bins)
            if guesses is None:
                continue
            target, guesses = guesses
            for name, guess in guesses.items():
                guess_xy = np.nan_to_num(spec.decode(guess), nan=0.0)  # a non-position id: the origin, as above
                base[name].append(np.linalg.norm(guess_xy - spec.decode(target), axis=-1))
                base_exact[name] += int(np.all(guess == target, axis=-1).sum())
    preds, trues = np.concatenate(preds), np.concatenate(trues)
    n_base = sum(len(e) for e in base["model"])
    baselines = {"targets": n_base, **{name: {
        "position_error_au": float(np.concatenate(e).mean()) if n_base else None,
        "exact_bin_accuracy": base_exact[name] / n_base if n_base else None} for name, e in base.items()}}
    ss_res = np.sum((preds - trues) ** 2, axis=0)
    ss_tot = np.sum((trues - trues.mean(0)) ** 2, axis=0)
    return {"loss": total_loss / count, "accuracy": {"x": correct[0] / n_pos, "y": correct[1] / n_pos},
            "position_error_au": float(np.concatenate(errors).mean()),
            "r2_positions": {"x": float(1 - ss_res[0] / ss_tot[0]), "y": float(1 - ss_res[1] / ss_tot[1])},
            "baselines": baselines, "sequences": count, "tokens": count * context}


@torch.no_grad()
def regression_metrics(model: GPT, split, n_seq: int, batch: int, context: int, device) -> dict:
    """A regression model's loss (MSE in AU^2; cross-entropy with bin outputs) and mean position error (AU; the most
    likely bin's centre with bin outputs) on a split, read as in training (a
    chunked model: one fixed window per sequence, ending where its training windows end, with its training
    loss's targets), beside the no-physics predictors on the same targets (those whose body has two earlier
    positions in the input)."""
    bodies = int(np.asarray(split.n_planets)[0]) + 1
    total, count = 0.0, 0
    errs = {"model": [], "repeat_last": [], "constant_velocity": []}
    for start in range(0, min(n_seq, len(split)), batch):
        idx = np.arange(start, min(start + batch, n_seq, len(split)))
        x, y = regression_batch(split, idx, context, model.config.chunk, 0.0, (0, start), device,
                                model.config.window_end, model.config.window_loss)
        out, _ = model(x)
        total += float(model.loss(out, y)) * len(idx)
        count += len(idx)
        x, y, out = x.cpu().numpy(), y.cpu().numpy(), model.positions(out).float().cpu().numpy()
        i = np.arange(2 * bodies - 1, y.shape[1])  # target i is input i + 1
        if len(i):
            prev, prev2 = x[:, i + 1 - bodies], x[:, i + 1 - 2 * bodies]
            for name, guess in (("model", out[:, i]), ("repeat_last", prev), ("constant_velocity", 2 * prev - prev2)):
                e = np.linalg.norm(guess - y[:, i], axis=-1)
                errs[name].append(e[np.isfinite(e)])
    n = sum(len(e) for e in errs["model"])
    mean = {k: float(np.concatenate(v).mean()) if n else None for k, v in errs.items()}
    return {"loss": total / max(count, 1), "position_error_au": mean["model"], "sequences": count,
            "baselines": {"targets": n, **{k: {"position_error_au": mean[k]} for k in errs}}}


def _baseline_guesses(true: np.ndarray, pred: np.ndarray, bodies: int, num_bins: int):
    """For one sequence's targets (T, 2) and argmax predictions (T, 2), with ``bodies`` tokens per time step:
    the targets whose body has two earlier positions, and the model's, repeat-last and constant-velocity
    guesses for them ((n, 2) bin ids each, clipped to the bins); None if there are none."""
    t = np.arange(2 * bodies, len(true))
    prev, prev2 = true[t - bodies], true[t - 2 * bodies]
    keep = np.all((true[t] < num_bins) & (prev < num_bins) & (prev2 < num_bins), axis=-1)
    if not keep.any():
        return None
    t, prev, prev2 = t[keep], prev[keep].astype(np.int64), prev2[keep].astype(np.int64)
    linear = np.clip(2 * prev - prev2, 0, num_bins - 1)
    return true[t], {"model": pred[t], "repeat_last": prev, "constant_velocity": linear}


@torch.no_grad()
def extrapolation(model: GPT, run: Path, data_manifest: dict, lengths: list[int], n_seq: int,
                  context: int, device) -> dict:
    """Loss on sequences of m x context tokens for each multiple m, simulated from the training
    dataset's preset and parameters with another seed (cached in RUN/extrapolation-data)."""
    longest = max(lengths) * context
    preset = data_manifest["preset"]
    params = dict(data_manifest["params"])
    overrides = {**params, "seq_len": longest + 1, "steps": max(int(params["steps"]), -(-longest // 2))}
    seed = int(data_manifest["seed"]) + 1_000_003
    key = hashlib.sha256(json.dumps([preset, overrides, seed, n_seq], sort_keys=True).encode()).hexdigest()[:12]
    cache = run / f"extrapolation-data-{key}"
    inside(run, cache, "run")  # a cached dataset linked in from elsewhere is not this run's
    path = orbits.simulate(preset, {"test": n_seq}, seed, cache, overrides=overrides, progress=False)
    split = orbits.load_dataset(path)["test"]
    out = {}
    for m in lengths:
        T = m * context
        losses = []
        for i in range(len(split)):
            x, y = make_batch(split.tokens, np.array([i]), T, device, model.config.vocab_size)
            losses.append(float(model(x, y)[1]))
        out[str(m)] = float(np.mean(losses))
    return out


def evaluate(run: str | Path, data: str | Path, lengths: list[int] | None = None, split: str = "val",
             n_seq: int = 64, extrapolation_sequences: int = 4, chunk_size: int = 256) -> dict:
    """Evaluate a run on a dataset split and write RUN/eval.json; returns the same dict."""
    run = Path(run)
    if n_seq < 1:
        raise FieldError("n_seq", f"must be >= 1, got {n_seq}: evaluate at least one sequence")
    if lengths and extrapolation_sequences < 1:
        raise FieldError(message=f"`extrapolation_sequences` must be >= 1 with `lengths`, got "
                         f"{extrapolation_sequences}: the extrapolation loss is a mean over that many sequences")
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model, config = load_run(run, device)
    if lengths and model.config.regression:
        raise ValueError("length extrapolation is for token models; a regression model reads positions")
    if lengths and any(m > 1 for m in lengths) and model.config.pos == "learned":
        raise ValueError("length extrapolation needs rotary positions (train with --pos rope): learned "
                         f"positions stop at the block of {model.config.block_size} tokens")
    if lengths and any(m < 1 for m in lengths):
        raise FieldError("lengths", f"must be positive multiples, got {lengths}")
    model.config.chunk_size = chunk_size
    dataset = orbits.load_dataset(data)
    if split not in dataset:
        raise ValueError(f"dataset {data} has no split {split!r}; it has {', '.join(dataset)}")
    check_vocab(model.config, dataset[split])
    context = int(config["context"])
    metrics = regression_metrics if model.config.regression else next_token_metrics
    result = {"run": str(run), "data": str(data), "split": split,
              **metrics(model, dataset[split], n_seq, 8, context, device)}
    if lengths:
        result["extrapolation"] = {"context": context, "loss": extrapolation(
            model, run, dataset[split].manifest, lengths, extrapolation_sequences, context, device)}
    result["code_version"] = code_version()
    result["dependency_versions"] = dependency_versions()
    write_json_atomic(run / "eval.json", result)
    return result
