"""Pretraining a sequence model on an orbit dataset: next-token prediction, exact resume, DistributedDataParallel.

The reference optimiser by default (AdamW lr 6e-4, betas 0.9/0.95, weight decay 0.1 on matrices,
gradient clipping at 1.0, constant lr), with optional warmup and cosine decay. The data order is a pure
function of (seed, step) (``orbitlaw.models.batches``), each of W ranks takes every W-th sample of the global
batch, in micro-batches (gradient accumulation). Hence a resumed run sees exactly the data an uninterrupted
run would, and ``torchrun --nproc_per_node W`` matches one process with the same global batch
(``orbitlaw.models.distributed``).

Files of a run directory: ``config.json`` (model and training settings, dataset, seed, code version),
``metrics.jsonl`` and ``loss.png`` (``orbitlaw.models.metrics``), and checkpoints (see
``orbitlaw.models.checkpoint``); with ``log_to`` (``--log-to tensorboard|wandb``) the same rows also go to that
tracker (:mod:`orbitlaw.models.tracking`). The settings are :class:`orbitlaw.models.train_config.TrainConfig`.

:func:`train` reads its inputs and plans the run (:func:`plan_run`), takes the run's lock, starts or resumes
the model (:func:`start_model`), then takes optimiser steps (:func:`accumulate_gradients`), logging and saving as
it goes (:func:`_loop`).
"""

from __future__ import annotations

import contextlib
import functools
import json
import math
import os
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch

from orbitlaw import orbits
from orbitlaw.models import checkpoint, distributed
from orbitlaw.models.batches import (
    batch_indices,
    check_inputs,
    check_vocab,
    model_batch,
    model_window_tokens,
    token_offset,
)
from orbitlaw.models.distributed import Dist, init_distributed, resolve_device
from orbitlaw.models.gpt import GPT, GPTConfig, vocabulary
from orbitlaw.models.loop import StopOnSignal, TrainingStopped, adamw, autocast, scheduled_lr
from orbitlaw.models.memory import check_fits
from orbitlaw.models.metrics import append_metrics, keep_metrics_until, plot_losses, read_metrics
from orbitlaw.models.presets import model_config
from orbitlaw.models.resume import check_same_model, check_same_trajectory, find_checkpoint
from orbitlaw.models.rng import rng_state, set_rng_state
from orbitlaw.models.tracking import Tracker, open_tracker
from orbitlaw.models.train_config import TrainConfig
from orbitlaw.provenance import OutputLock, code_version, dependency_versions, undo_on_failure, write_text_atomic
from orbitlaw.validate import FieldError


@dataclass
class Plan:
    """What a run reads and how, fixed before anything of the run is written.

    model: the model's settings; model_window: positions per training window (None: the whole context);
    context: positions a sequence gives the model; per_rank: sequences per step on this process, ``micro`` of
    them at once; run_config: what ``config.json`` records."""

    train_split: object
    val_split: object | None
    model: GPTConfig
    model_window: int | None
    context: int
    per_rank: int
    micro: int
    run_config: dict


def plan_run(cfg: TrainConfig, dist: Dist) -> Plan:
    """Open the dataset and check that the model can train on it; one-line ValueErrors, nothing written."""
    data = orbits.load_dataset(cfg.data)
    if cfg.train_split not in data:
        raise ValueError(f"dataset {cfg.data} has no split {cfg.train_split!r}; it has {', '.join(data)}")
    train_split = data[cfg.train_split]
    val_split = data.get(cfg.val_split)
    model_window = model_window_tokens(cfg.chunk_steps, train_split)
    overrides = {**vocabulary(train_split.tokenizer), **cfg.model_overrides,  # the data's vocabulary, unless told
                 **({"chunk": model_window, "block_size": model_window} if model_window else {})}
    overrides.update(window_end=cfg.window_end, window_loss=cfg.window_loss)  # GPTConfig.validate checks them
    if cfg.pos is not None:
        overrides["pos"] = cfg.pos
    mcfg = model_config(cfg.preset, cfg.attention, arch=cfg.arch, p=cfg.p, window=cfg.window, **overrides)
    if (model_window or cfg.input_noise) and not mcfg.regression:
        raise FieldError(message="`chunk_steps` and `input_noise` train a regression model (e.g. `preset` control)")
    check_vocab(mcfg, train_split)
    check_inputs(mcfg, train_split, val_split)
    seq_len = train_split.tokens.shape[1]
    # positions read per sequence: a model with a model window reads the whole sequence, window by window
    # (a regression model's inputs drop the time-step token: seq_len - 1 positions, seq_len - 2 with a target)
    readable = seq_len - 1 - token_offset(mcfg)
    context = readable if model_window else min(mcfg.block_size, readable)
    per_rank = cfg.batch_size // dist.world
    if per_rank * dist.world != cfg.batch_size:
        raise ValueError(f"batch size {cfg.batch_size} is not divisible by {dist.world} processes")
    micro = cfg.micro_batch or per_rank
    if per_rank % micro:
        raise ValueError(f"per-process batch {per_rank} is not divisible by micro-batch {micro}")
    run_config = {"model": mcfg.to_dict(), "train": {**asdict(cfg), "betas": list(cfg.betas)},
                  "dataset": {"path": str(Path(cfg.data).resolve()), "preset": train_split.manifest["preset"],
                              "config_hash": train_split.manifest["config_hash"],
                              "seed": train_split.manifest["seed"]},
                  "world_size": dist.world, "context": context}
    batch_indices(cfg.seed, 0, cfg.batch_size, len(train_split))  # a batch too large fails here, before any file
    return Plan(train_split, val_split, mcfg, model_window, context, per_rank, micro, run_config)


def make_optimizer(model: GPT, cfg: TrainConfig, device) -> torch.optim.AdamW:
    """AdamW with weight decay on matrices (>= 2-D parameters) only, as nanoGPT (``orbitlaw.models.loop.adamw``)."""
    return adamw(model, cfg.lr, cfg.weight_decay, cfg.betas, device)


def learning_rate(cfg: TrainConfig, step: int) -> float:
    return scheduled_lr(cfg.lr, step, cfg.max_steps, cfg.schedule, cfg.warmup_steps, cfg.min_lr)


@torch.no_grad()
def evaluate_loss(model: GPT, split, n_seq: int, batch: int, context: int, device, amp) -> float:
    """Mean next-token loss over the first ``n_seq`` sequences of a split (a model with a model window: over one
    fixed window per sequence, drawn as in training, without noise)."""
    model.eval()
    total, count = 0.0, 0
    for start in range(0, min(n_seq, len(split)), batch):
        idx = np.arange(start, min(start + batch, n_seq, len(split)))
        x, y = model_batch(model.config, split, idx, context, model.config.chunk, 0.0, (0, start), device)
        with amp:
            _, loss = model(x, y)
        total += float(loss) * len(idx)
        count += len(idx)
    model.train()
    return total / max(count, 1)


def train(cfg: TrainConfig, resume: bool = False, progress: bool = True) -> dict:
    """Train (or resume) a run; returns a summary. Raises TrainingStopped on a signal or NaN loss.

    Holds the run's :class:`OutputLock` from before anything of the run is read (a checkpoint) to the end. A
    failure (bad input, a full disk, an interrupt) leaves the run as it was before, unless it already wrote a
    checkpoint (then it resumes from there, as after a kill): a new run is removed, a resumed one keeps its
    checkpoint and gets its config.json and metrics.jsonl back."""
    cfg.validate()
    dist = init_distributed(cfg.device)
    device = resolve_device(cfg.device, dist.local_rank)
    run = Path(cfg.out)
    plan = plan_run(cfg, dist)
    check_fits(plan.model, cfg.batch_size, plan.per_rank, plan.micro, plan.model_window or plan.context, device)
    # The run's lock comes before anything of the run is read (a resume beside a running train is refused in one
    # line, never sees a checkpoint being written); a failure leaves the run as it was (undo_on_failure).
    fresh = not os.path.lexists(run)
    lock = OutputLock(run / ".lock", f"run {run}").acquire() if dist.main else None  # one writer per run directory
    failed = True
    try:
        distributed.barrier(dist)  # the other ranks read the checkpoint once rank 0 holds the lock
        undo = contextlib.nullcontext()
        if dist.main:  # a failure undoes what it wrote, unless it wrote a checkpoint to resume from
            start = checkpoint.latest(run)
            undo = undo_on_failure(run, resumable=lambda: checkpoint.latest(run) != start,
                                   restore=("config.json", "metrics.jsonl"))
        with undo:
            summary = _train_locked(cfg, resume, progress, dist, device, run, plan)
        failed = False
    finally:
        if lock is not None:
            lock.release()
        if failed and fresh and dist.main:  # created by this command and emptied by undo_on_failure
            with contextlib.suppress(OSError):
                run.rmdir()
        distributed.leave(dist)  # once the DDP model, the group's last user, is gone with _train_locked's frame
    return summary


def _train_locked(cfg: TrainConfig, resume: bool, progress: bool, dist: Dist, device, run: Path, plan: Plan) -> dict:
    """The body of :func:`train` once rank 0 holds the run's lock: resume or start, then the loop."""
    model, optimizer, step = start_model(cfg, find_checkpoint(run, resume), run, plan, device)
    tracker = _open_records(cfg, dist, run, plan.run_config, step)
    net = distributed.wrap(model, dist, device)
    if cfg.compile and device.type == "cuda":
        net = torch.compile(net)
    step = _loop(cfg, dist, device, run, plan, model, net, optimizer, step, tracker, progress)
    if dist.main:
        plot_losses(run)
    final = read_metrics(run)
    return {"run": str(run), "step": step, "train_loss": final[-1]["train_loss"] if final else None}


def start_model(cfg: TrainConfig, ckpt: Path | None, run: Path, plan: Plan, device
                ) -> tuple[GPT, torch.optim.AdamW, int]:
    """The model, its optimiser and the step to start at: fresh from ``cfg.seed``, or as checkpoint ``ckpt``
    left them (model, optimiser and RNG states) once it is checked to continue the same trajectory."""
    torch.manual_seed(cfg.seed)
    model = GPT(plan.model).to(device)
    optimizer = make_optimizer(model, cfg, device)
    if ckpt is None:
        return model, optimizer, 0
    check_same_model(run, plan.model)  # before loading: another model's weights do not fit this one
    _, state = checkpoint.load(ckpt, model)
    check_same_trajectory(state["run_config"], plan.run_config, cfg, run)
    optimizer.load_state_dict(state["optimizer"])
    set_rng_state(state["rng"])
    return model, optimizer, int(state["step"])


def _open_records(cfg: TrainConfig, dist: Dist, run: Path, run_config: dict, step: int) -> Tracker:
    """Rank 0 writes config.json, keeps metrics.jsonl up to ``step`` and opens the tracker (one that cannot
    start leaves no run behind); the other ranks log nowhere."""
    if not dist.main:
        return Tracker()
    run_config["code_version"] = code_version()
    run_config["dependency_versions"] = dependency_versions()
    tracker = open_tracker(cfg.log_to, run, run_config, step)
    write_text_atomic(run / "config.json", json.dumps(run_config, indent=2) + "\n")
    keep_metrics_until(run, step)
    return tracker


def _save_checkpoint(run: Path, model: GPT, optimizer, cfg: TrainConfig, plan: Plan, dist: Dist, at_step: int) -> None:
    """Rank 0 writes checkpoint ``at_step``: weights, optimiser and RNG states, the data position, the config."""
    if dist.main:
        state = {"optimizer": optimizer.state_dict(), "rng": rng_state(), "step": at_step,
                 "data_position": {"samples_seen": at_step * cfg.batch_size,
                                   "epoch": at_step * cfg.batch_size // len(plan.train_split)},
                 "run_config": plan.run_config}
        checkpoint.save(run, at_step, model, state)


def accumulate_gradients(cfg: TrainConfig, plan: Plan, dist: Dist, device, net, amp, step: int) -> float:
    """Forward and backward this rank's share of global batch ``step``, ``plan.micro`` sequences at a time
    (under DDP the gradients are averaged over ranks at the last micro-batch); returns the step's mean loss
    over every rank."""
    idx = batch_indices(cfg.seed, step, cfg.batch_size, len(plan.train_split))[dist.rank::dist.world]
    micro, per_rank = plan.micro, plan.per_rank
    total = 0.0
    for m in range(0, per_rank, micro):
        x, y = model_batch(plan.model, plan.train_split, idx[m:m + micro], plan.context, plan.model_window,
                           cfg.input_noise, (cfg.seed, step, dist.rank, m), device)
        sync = m + micro >= per_rank
        with net.no_sync() if dist.world > 1 and not sync else contextlib.nullcontext(), amp:
            _, loss = net(x, y)
        (loss * (micro / per_rank)).backward()
        total += loss.item() * micro / per_rank
    return distributed.mean_over_ranks(total, dist, device)


def _stopped(what: str, run: Path, last_saved: int) -> TrainingStopped:
    """The TrainingStopped (exit code 3) of a run that went non-finite: ``what`` happened, and where the last
    good checkpoint is."""
    last = (f"The last good checkpoint is step {last_saved} in {run}" if checkpoint.latest(run)
            else "No checkpoint had been written yet")
    return TrainingStopped(f"{what}. {last}", 3)


def _check_finite(loss: float, grad_norm: float, step: int, run: Path, last_saved: int) -> None:
    """TrainingStopped before step ``step + 1`` is taken with a non-finite loss or gradient."""
    if math.isfinite(loss) and math.isfinite(grad_norm):
        return
    what = f"loss became {loss}" if not math.isfinite(loss) else f"gradient norm became {grad_norm}"
    raise _stopped(f"{what} at step {step + 1}; stopped without taking that step", run, last_saved)


def _check_weights(model: GPT, step: int, run: Path, last_saved: int) -> None:
    """TrainingStopped when step ``step`` left a weight non-finite (an lr so large that one update overflows):
    checked before that step is saved, so no checkpoint holds it (a validation loss of such weights is
    non-finite, and stops the run before its row is written)."""
    bad = [name for name, p in model.named_parameters() if not bool(torch.isfinite(p).all())]
    if bad:
        raise _stopped(f"step {step} made {len(bad)} weight tensors non-finite (e.g. {bad[0]}): the update "
                       "diverged (try a smaller --lr); that step was not saved", run, last_saved)


def _metrics_row(cfg: TrainConfig, plan: Plan, model: GPT, step: int, loss: float, lr: float, rate: float, device,
                 amp) -> dict | None:
    """The metrics row of ``step``, or None when it logs nothing: the training loss every ``log_every`` steps
    (with the throughput, tokens per second), the validation loss every ``eval_every``, both at the last."""
    row = None
    last = step == cfg.max_steps
    if step % cfg.log_every == 0 or last:
        row = {"step": step, "train_loss": loss, "lr": lr, "tokens_per_s": rate}
    if plan.val_split is not None and (step % cfg.eval_every == 0 or last):
        row = row or {"step": step, "train_loss": loss, "lr": lr}
        row["val_loss"] = evaluate_loss(model, plan.val_split, cfg.eval_sequences, plan.micro, plan.context, device,
                                        amp)
    return row


def _loop(cfg: TrainConfig, dist: Dist, device, run: Path, plan: Plan, model: GPT, net, optimizer, step: int,
          tracker: Tracker, progress: bool) -> int:
    """Optimiser steps from ``step`` to ``cfg.max_steps``: log, evaluate and save on schedule, stop (saved) on a
    signal; returns the last step taken."""
    from tqdm import tqdm

    amp = autocast(device, cfg.precision)
    stop = StopOnSignal().install()
    save = functools.partial(_save_checkpoint, run, model, optimizer, cfg, plan, dist)
    bar = tqdm(total=cfg.max_steps, initial=step, unit="step", disable=not (progress and dist.main),
               desc=f"train {cfg.preset}/{cfg.attention}")
    last_saved = first_step = step
    tokens_per_step = cfg.batch_size * (plan.model_window or plan.context)
    t0 = time.perf_counter()
    try:
        while step < cfg.max_steps:
            lr = learning_rate(cfg, step)
            for group in optimizer.param_groups:
                group["lr"] = lr
            loss = accumulate_gradients(cfg, plan, dist, device, net, amp, step)
            grad_norm = float(torch.nn.utils.clip_grad_norm_(
                model.parameters(), cfg.grad_clip if cfg.grad_clip > 0 else math.inf))
            _check_finite(loss, grad_norm, step, run, last_saved)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            step += 1
            bar.update(1)
            rate = tokens_per_step * (step - first_step) / max(time.perf_counter() - t0, 1e-9)
            saves = step % cfg.checkpoint_every == 0 or step == cfg.max_steps
            if saves:
                _check_weights(model, step, run, last_saved)
            row = _metrics_row(cfg, plan, model, step, loss, lr, rate, device, amp)
            if row is not None and not math.isfinite(row.get("val_loss", 0.0)):
                raise _stopped(f"the validation loss became {row['val_loss']} at step {step}; that step was not "
                               "saved", run, last_saved)
            if row is not None and dist.main:
                append_metrics(run, row)
                tracker.log(row)
                bar.set_postfix(loss=f"{loss:.3f}", tok_s=f"{rate:.0f}")
            if saves:
                save(step)
                last_saved = step
            stop.signal = distributed.agree_on_signal(stop.signal, dist, device)  # every rank stops at one step
            stop.stop_here(step, last_saved == step, save, run, "continue with --resume")
        distributed.barrier(dist)  # every rank finishes its last collective before the group is torn down
    finally:
        bar.close()
        stop.restore()
        try:
            tracker.close()
        except Exception as exc:  # the run is saved; a tracker that cannot finish does not undo it
            print(f"orbitlaw train: warning: --log-to {cfg.log_to} did not close cleanly: {exc}", file=sys.stderr)
    return step
