"""The force probe (Vafa et al. 2025, §5 of the science notes): adapt a pretrained orbit GPT to predict
the gravitational force on each planet from a few labels, then read its predictions on held-out steps.

Adaptation: load the pretrained run, drop its 2 x vocab token head, put a fresh linear head d_model -> 1
(|F|, or the planet's acceleration |a| = |F| / m1 for ``acceleration-magnitude``) or -> 2 (F_x, F_y) on the
final LayerNorm, and fine-tune the whole model with masked MSE on the
labelled planet steps (AdamW, betas 0.9/0.95, weight decay 0.1 on matrices, clip 1.0, constant lr;
reference: 10k steps, batch 64, lr 6e-4 for |F| and 2e-4 for the vector). ``schedule="cosine"`` instead
decays the lr from its value to 0 over the steps (:func:`orbitlaw.models.loop.scheduled_lr`), which ends a
short fine-tune much closer to its optimum (``benchmarks/experiments/control_variants.py``, the ``probe-*`` variants).
Label alignment and the label split are described in :mod:`orbitlaw.discovery.probes.probe_data`.

Protocols (``ProbeConfig.protocol``) fix what the head learns from which labels; the budget (steps,
batch, lr) is free under both and defaults to the reference's:

- ``orbitlaw`` (default): target scaling ``log`` unless ``scaling`` says otherwise; the loss is the mean
  squared error over all labelled entries of the batch (:func:`masked_mse`); held-out labels drawn by
  the ``orbitlaw`` layout (a PCG64 stream).
- ``reference``: the reference code's choices. Target the raw force (scaling ``raw``, fixed: any other
  scaling is an error); the loss is the mean squared error per sequence over its labelled entries, then
  the mean over the batch's sequences (:func:`sequence_mse`), so a held-out sequence with two labels
  weighs as much as a fully labelled one; held-out labels drawn by the ``reference`` layout
  (``numpy.random.RandomState(seed)``, :func:`orbitlaw.discovery.probes.labels.reference_labels`). The reference
  also selects its checkpoint by the loss on a file that holds the held-out sequences' labels: a leak,
  deliberately NOT reproduced here (the probe is always the model after the last step).

Target scaling (forces span many orders of magnitude). ``log`` (the orbitlaw default): for |F| the head
predicts z = (ln|F| - mu) / sigma, mu and sigma the mean and standard deviation of ln|F| over the labels;
for the vector it predicts z = F/|F| * (ln|F| - L0) / sigma with L0 = min ln|F| - sigma over the labels,
so the direction of z is the force's and its length ln|F| on an affine scale (predictions cannot fall
below exp(L0)). ``linear``: z = F / s, s the root-mean-square labelled |F|. ``raw`` (the reference's):
z = |F| or z = F in physical units, no log, no standardisation (a raw head can predict |F| <= 0). Either
way the written ``F_pred`` (``a_pred``) is decoded back to physical units, M_sun AU/yr^2 (AU/yr^2); a
magnitude target (|F| or |a|) is scaled as |F| is.

On CUDA the forward runs under bf16 autocast (loss in fp32), as pretraining does; on the CPU in fp32.

Batches: global batch ``step`` is a pure function of (seed, step) over the sequences holding a label
(``orbitlaw.models.train.batch_indices``), and dropout is off, so a probe killed at any point and run again with
the same command resumes from ``PROBE/latest`` to the same result as an uninterrupted run. A windowed model
may read a subset of each sequence's positions per step (``windows_per_sequence``, :func:`window_columns`),
also drawn by (seed, step). Checkpoints
(``orbitlaw.models.checkpoint``) are written every K steps and on SIGTERM/SIGINT.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn as nn

from orbitlaw.discovery.probes import probe_data, probe_result
from orbitlaw.models import checkpoint
from orbitlaw.models.batches import batch_indices, check_vocab, read_sequences, token_offset
from orbitlaw.models.evaluate import load_run
from orbitlaw.models.gpt import GPT
from orbitlaw.models.loop import SCHEDULES, StopOnSignal, TrainingStopped, adamw, autocast, scheduled_lr
from orbitlaw.models.memory import check_fits
from orbitlaw.validate import FieldError, at_least, positive

__all__ = ["ForceProbe", "ForceScaling", "ProbeConfig", "finetune", "masked_mse", "predict", "sequence_mse"]

DEFAULT_LR = {"force-magnitude": 6e-4, "force-vector": 2e-4, "acceleration-magnitude": 6e-4}
SCALINGS = ("log", "linear", "raw")
PROTOCOLS = {
    "orbitlaw": {"scaling": "log", "loss": "batch", "layout": "orbitlaw"},
    "reference": {"scaling": "raw", "loss": "sequence", "layout": "reference"},
}
"""Per protocol: the default (orbitlaw) or fixed (reference) target scaling, the loss (``batch``: masked
mean over the batch's labelled entries; ``sequence``: per-sequence masked mean, then the batch mean) and
the held-out label layout (:data:`orbitlaw.discovery.probes.labels.LAYOUTS`)."""


@dataclass
class ProbeConfig:
    run: str  # pretrained run directory (orbitlaw train)
    data: str  # dataset with forces
    out: str  # PROBE directory
    target: str = "force-magnitude"  # probe_data.TARGETS
    split: str = "train"  # dataset split
    steps: int = 10000  # fine-tuning steps (reference 10000)
    batch: int = 64  # sequences per step (reference 64)
    lr: float | None = None  # None: DEFAULT_LR of the target
    schedule: str = "constant"  # constant or cosine (orbitlaw.models.loop.SCHEDULES)
    weight_decay: float = 0.1  # AdamW, on matrices
    grad_clip: float = 1.0  # gradient-norm clip (0: none)
    train_sequences: int | None = None  # None: 90% of the split
    heldout_sequences: int | None = None  # None: the rest
    labels_per_heldout: int = 2  # revealed steps per held-out sequence
    labels_per_sequence: int | None = None  # L: every sequence held out with L labels
    windows_per_sequence: int | None = None  # a windowed run reads K labelled steps per step
    scaling: str | None = None  # log, linear or raw (None: the protocol's)
    protocol: str = "orbitlaw"  # orbitlaw or reference (PROTOCOLS)
    seed: int = 0  # batches and label draw
    checkpoint_every: int = 500  # steps between checkpoints
    eval_batch: int = 32  # sequences per prediction batch
    eval_train_sequences: int = 256  # training sequences also predicted
    near_train: int = 5000  # held-out steps marked near_train
    device: str = "auto"  # auto, cpu or cuda

    def validate(self) -> None:
        probe_data.resolve_device(self.device)
        if self.target not in probe_data.TARGETS:
            raise ValueError(f"unknown target {self.target!r}; choose {', '.join(probe_data.TARGETS)}")
        if self.protocol not in PROTOCOLS:
            raise ValueError(f"unknown protocol {self.protocol!r}; choose orbitlaw or reference")
        if self.scaling is not None and self.scaling not in SCALINGS:
            raise ValueError(f"unknown scaling {self.scaling!r}; choose log, linear or raw")
        fixed = PROTOCOLS["reference"]["scaling"]
        if self.protocol == "reference" and self.scaling not in (None, fixed):
            raise FieldError(message=f"`protocol` reference fixes the scaling to {fixed}; `scaling` {self.scaling} "
                             "contradicts it")
        at_least(self, 1, "steps", "batch", "checkpoint_every", "eval_batch", "windows_per_sequence")
        if self.schedule not in SCHEDULES:
            raise ValueError(f"unknown lr schedule {self.schedule!r}; choose {' or '.join(SCHEDULES)}")
        if self.lr is not None:
            positive(self, "lr")
        at_least(self, 0, "eval_train_sequences", "near_train")
        if self.windows_per_sequence is not None and (self.protocol != "orbitlaw"
                                                      or self.labels_per_sequence is not None):
            raise FieldError(message="`windows_per_sequence` subsamples the fully labelled training sequences of the "
                             "orbitlaw protocol; it cannot be combined with `protocol` reference or "
                             "`labels_per_sequence`")

    @property
    def resolved_scaling(self) -> str:
        """``scaling``, or the protocol's when not given."""
        return self.scaling if self.scaling is not None else PROTOCOLS[self.protocol]["scaling"]

    def settings(self) -> dict:
        """Everything that decides the result (what a resume must keep)."""
        s = asdict(self)
        for name in ("checkpoint_every", "out", "device"):
            s.pop(name)
        s["run"], s["data"] = str(Path(self.run).resolve()), str(Path(self.data).resolve())
        s["lr"] = self.lr if self.lr is not None else DEFAULT_LR[self.target]
        s["scaling"] = self.resolved_scaling
        s["kind"] = "finetune"
        if s["windows_per_sequence"] is None:  # as the settings were before the option (resumable)
            del s["windows_per_sequence"]
        return s


def resumable(out: Path) -> bool:
    """Whether ``out`` holds a fine-tune checkpoint a re-run of the probe resumes from."""
    return checkpoint.latest(out) is not None


# ----------------------------------------------------------------------------------------------------
# Target scaling


class ForceScaling:
    """Invertible map between forces (M_sun AU/yr^2; (n,) magnitudes or (n, 2) vectors) and the
    head's targets z ((n, 1) or (n, 2)); see the module docstring."""

    def __init__(self, target: str, mode: str, **params):
        self.target, self.mode, self.params = target, mode, {k: float(v) for k, v in params.items()}

    @classmethod
    def fit(cls, target: str, mode: str, forces: np.ndarray) -> ForceScaling:
        if mode == "raw":
            return cls(target, mode)
        mag = forces if target in probe_data.MAGNITUDE_TARGETS else np.hypot(forces[:, 0], forces[:, 1])
        if np.any(mag <= 0):
            raise ValueError(f"a labelled {target} is zero; cannot scale")
        if mode == "linear":
            return cls(target, mode, scale=np.sqrt(np.mean(mag**2)))
        log = np.log(mag)
        sigma = float(np.std(log)) or 1.0
        if target in probe_data.MAGNITUDE_TARGETS:
            return cls(target, mode, mu=float(np.mean(log)), sigma=sigma)
        return cls(target, mode, floor=float(np.min(log)) - sigma, sigma=sigma)

    def encode(self, forces: np.ndarray) -> np.ndarray:
        p = self.params
        if self.mode == "raw":
            z = np.array(forces, np.float64)
        elif self.mode == "linear":
            z = forces / p["scale"]
        elif self.target in probe_data.MAGNITUDE_TARGETS:
            z = (np.log(forces) - p["mu"]) / p["sigma"]
        else:
            mag = np.hypot(forces[:, 0], forces[:, 1])[:, None]
            z = forces / mag * (np.log(mag) - p["floor"]) / p["sigma"]
        return z.reshape(len(forces), -1)

    def decode(self, z: np.ndarray) -> np.ndarray:
        p = self.params
        z = np.asarray(z, np.float64)
        if self.mode == "raw":
            f = z.copy()
        elif self.mode == "linear":
            f = z * p["scale"]
        elif self.target in probe_data.MAGNITUDE_TARGETS:
            f = np.exp(z * p["sigma"] + p["mu"])
        else:
            length = np.linalg.norm(z, axis=1, keepdims=True)
            unit = np.divide(z, length, out=np.zeros_like(z), where=length > 0)
            f = unit * np.exp(length * p["sigma"] + p["floor"])
        return f[:, 0] if self.target in probe_data.MAGNITUDE_TARGETS else f

    def to_dict(self) -> dict:
        return {"target": self.target, "mode": self.mode, **self.params}


# ----------------------------------------------------------------------------------------------------
# The model


class ForceProbe(nn.Module):
    """A pretrained GPT without its token head, plus a fresh linear head on the final LayerNorm.

    forward(tokens (B, T, 2) int64, or positions in AU for a regression model) -> (B, T, out_dim) scaled
    force predictions at every position, or (B, P, out_dim) at just the positions ``at`` (P,) (sorted,
    unique; ``GPT.hidden_states``): the probe reads only the positions its rows are read at.
    """

    def __init__(self, gpt: GPT, out_dim: int):
        super().__init__()
        gpt.head = nn.Identity()  # the 2 x vocab logits are not used
        gpt.config.dropout = 0.0  # no dropout while probing: batches are a pure function of (seed, step)
        for module in gpt.modules():
            if isinstance(module, nn.Dropout):
                module.p = 0.0
        self.gpt = gpt
        self.head = nn.Linear(gpt.config.n_embd, out_dim)
        nn.init.normal_(self.head.weight, mean=0.0, std=0.02)
        nn.init.zeros_(self.head.bias)

    def forward(self, tokens: torch.Tensor, at: torch.Tensor | None = None) -> torch.Tensor:
        return self.head(self.gpt.ln_f(self.gpt.hidden_states(tokens, at)[-1]))


def masked_mse(pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Mean squared error over the finite entries of ``target`` (NaN marks an unlabelled position); pred
    and target (B, T, dim). Every labelled entry of the batch weighs the same (the orbitlaw loss). A batch
    without a label (a windowed step, ``windows_per_sequence``, may draw none of a held-out batch's few) has
    zero loss and gradient."""
    keep = torch.isfinite(target)
    if not keep.any():
        return pred.float().sum() * 0.0
    return torch.mean((pred.float()[keep] - target[keep]) ** 2)


def sequence_mse(pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """The reference loss: per sequence, the mean squared error over its finite ``target`` entries; then
    the mean over the sequences holding at least one (pred and target (B, T, dim); NaN marks an unlabelled
    position). A sequence with 2 labels weighs as much as one with 32."""
    keep = torch.isfinite(target)
    sq = torch.where(keep, pred.float() - torch.nan_to_num(target), torch.zeros((), device=pred.device)) ** 2
    count = keep.sum(dim=(1, 2))
    has = count > 0
    return torch.mean(sq.sum(dim=(1, 2))[has] / count[has])


def make_optimizer(model: nn.Module, cfg: ProbeConfig) -> torch.optim.AdamW:
    """The pretraining optimiser's groups (``orbitlaw.models.loop.adamw``) at the probe's learning rate."""
    return adamw(model, cfg.settings()["lr"], cfg.weight_decay)


def dense_targets(rows: dict, z: np.ndarray, sequences: np.ndarray, context: int, offset: int = 0) -> np.ndarray:
    """(len(sequences), context, dim) float32 targets by input position (token - ``offset``, see
    ``orbitlaw.models.train.token_offset``); NaN where not labelled. ``z`` holds the scaled labels of the labelled
    rows (in row order)."""
    lab = rows["labelled"]
    where = np.searchsorted(sequences, rows["sequence"][lab])
    out = np.full((len(sequences), context, z.shape[1]), np.nan, np.float32)
    out[where, rows["token"][lab] - offset] = z
    return out


@torch.no_grad()
def predict(model: ForceProbe, split, sequences: np.ndarray, context: int, batch: int, device,
            at: torch.Tensor | None = None) -> np.ndarray:
    """Scaled predictions (len(sequences), context, dim) float64 of ``model`` on those sequences (by input
    position; with ``at``, only at those positions and NaN elsewhere)."""
    model.eval()
    dim = model.head.out_features
    out = np.full((len(sequences), context, dim), np.nan)
    where = slice(None) if at is None else at.numpy()
    for i in range(0, len(sequences), batch):
        x = read_sequences(model.gpt.config, split, sequences[i:i + batch], context).to(device)
        with autocast(device):
            out[i:i + batch, where] = model(x, None if at is None else at.to(device)).float().cpu().numpy()
    model.train()
    return out


def window_columns(cfg: ProbeConfig, chunk: int | None, positions: int, step: int) -> np.ndarray:
    """Which of the ``positions`` read positions fine-tuning step ``step`` reads (sorted indices). A windowed
    model (``chunk`` tokens) reads each position of an input longer than its window through its own window, so
    a step's cost grows with the positions it reads; with ``cfg.windows_per_sequence`` = k it reads k of them,
    drawn without replacement by (seed, step) alone (so a resumed probe draws the same), the same k for every
    sequence of the batch. A whole-sequence model gets every position from one pass, and reads them all."""
    k = cfg.windows_per_sequence
    if chunk is None or k is None or k >= positions:
        return np.arange(positions)
    return np.sort(np.random.default_rng([cfg.seed, step, 0x57]).choice(positions, k, replace=False))


# ----------------------------------------------------------------------------------------------------
# The run


def open_run(run: str, data: str, split_name: str):
    """The pretrained ``run`` (its GPT on the CPU and its config) and the split of ``data`` it is probed on, checked
    against each other: ``(gpt, run_config, split, context, offset)``, ``context`` the positions the run reads and
    ``offset`` its first token's (``orbitlaw.models.batches.token_offset``)."""
    gpt, run_config = load_run(run, "cpu")
    split = probe_data.open_split(data, split_name)
    check_vocab(gpt.config, split)
    context = int(run_config["context"])
    offset = token_offset(gpt.config)
    if context + offset > split.tokens.shape[1]:
        raise ValueError(f"the run's context ({context} positions) is longer than the dataset's sequences")
    return gpt, run_config, split, context, offset


def finetune(cfg: ProbeConfig, progress: bool = True) -> dict:
    """Fine-tune (or resume) a force probe and write PROBE/predictions.csv and metrics.json.

    Raises ValueError for bad input before anything is written, TrainingStopped on a signal or a
    non-finite loss (the last checkpoint is kept).
    """
    cfg.validate()
    settings = cfg.settings()
    device = probe_data.resolve_device(cfg.device)
    gpt, run_config, split, context, offset = open_run(cfg.run, cfg.data, cfg.split)
    check_fits(gpt.config, cfg.batch, cfg.batch, cfg.batch, context, device, head=False, batch_flag="--batch",
               micro_flag=None)  # before any row is built: a batch that cannot fit is refused at once
    plan = probe_data.default_plan(len(split), cfg.train_sequences, cfg.heldout_sequences, cfg.labels_per_heldout,
                                   cfg.seed, cfg.labels_per_sequence)
    protocol = PROTOCOLS[cfg.protocol]
    rows = probe_data.build_rows(split, plan, context + offset, protocol["layout"], gpt.config.window_end)
    settings["plan"] = asdict(plan)
    settings["context"] = context
    lab = rows["labelled"]
    scaling = ForceScaling.fit(cfg.target, cfg.resolved_scaling, probe_data.true_values(rows, cfg.target)[lab])
    loss_fn = sequence_mse if protocol["loss"] == "sequence" else masked_mse
    z = scaling.encode(probe_data.true_values(rows, cfg.target)[lab]).astype(np.float32)
    labelled_seqs = np.unique(rows["sequence"][lab])
    at = torch.from_numpy(np.unique(rows["token"] - offset))  # the positions any row is read at
    targets = dense_targets(rows, z, labelled_seqs, context, offset)[:, at.numpy()]

    out = Path(cfg.out)
    ckpt = checkpoint.latest(out) if out.is_dir() else None
    torch.manual_seed(cfg.seed)
    model = ForceProbe(gpt, z.shape[1])
    step = 0
    if ckpt is not None:
        _, state = checkpoint.load(ckpt, model)
        if not probe_result.same_settings(state.get("settings") or {}, settings):
            raise ValueError(f"{out} holds a probe checkpoint with different settings; choose another --out "
                             "or use the same settings to resume it")
    probe_result.check_out(out, settings)
    model.to(device)
    optimizer = make_optimizer(model, cfg)
    if ckpt is not None:
        optimizer.load_state_dict(state["optimizer"])
        step = int(state["step"])

    def save(at):
        checkpoint.save(out, at, model, {"optimizer": optimizer.state_dict(), "step": at, "settings": settings,
                                         "scaling": scaling.to_dict(), "loss": loss_value})

    stop = StopOnSignal().install()
    from tqdm import tqdm

    bar = tqdm(total=cfg.steps, initial=step, unit="step", disable=not progress, desc=f"probe {cfg.target}")
    last_saved = step
    loss_value = float(state.get("loss", math.nan)) if ckpt is not None else math.nan
    try:
        model.train()
        while step < cfg.steps:
            idx = batch_indices(cfg.seed, step, cfg.batch, len(labelled_seqs))
            x = read_sequences(gpt.config, split, labelled_seqs[idx], context)
            cols = window_columns(cfg, gpt.config.chunk, len(at), step)
            y = torch.from_numpy(targets[idx][:, cols])
            with autocast(device):
                out_batch = model(x.to(device), at[cols].to(device))
            loss = loss_fn(out_batch, y.to(device))
            loss_value = loss.item()
            if not math.isfinite(loss_value):
                kept = (f"the last checkpoint (step {last_saved}) is kept in {out}" if checkpoint.latest(out)
                        else "no checkpoint had been written, so nothing is kept")
                raise TrainingStopped(f"probe loss became {loss_value} at step {step + 1}; {kept}; try a lower --lr "
                                      f"(it was {settings['lr']:g})", 3)
            loss.backward()
            if cfg.grad_clip > 0:
                torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
            for group in optimizer.param_groups:
                group["lr"] = scheduled_lr(settings["lr"], step, cfg.steps, cfg.schedule)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            step += 1
            bar.update(1)
            bar.set_postfix(loss=f"{loss_value:.4f}")
            if step % cfg.checkpoint_every == 0 or step == cfg.steps:
                save(step)
                last_saved = step
            stop.stop_here(step, last_saved == step, save, out, "run the same command again to resume")
    finally:
        bar.close()
        stop.restore()

    # Predict on the held-out sequences and on a sample of training sequences (for the fit metrics).
    held_seqs = np.unique(rows["sequence"][rows["heldout"]])
    train_seqs = np.unique(rows["sequence"][~rows["heldout"]])[:cfg.eval_train_sequences]
    seqs = np.concatenate([train_seqs, held_seqs])
    scaled = predict(model, split, seqs, context, cfg.eval_batch, device, at)
    dim = z.shape[1]
    pred = np.full((len(rows["sequence"]), dim), np.nan)
    have = np.isin(rows["sequence"], seqs)
    zrows = scaled[np.searchsorted(seqs, rows["sequence"][have]), rows["token"][have] - offset]  # seqs sorted
    pred[have] = scaling.decode(zrows).reshape(int(have.sum()), dim)
    pred = pred[:, 0] if cfg.target in probe_data.MAGNITUDE_TARGETS else pred
    extra = {"run": {"path": str(Path(cfg.run).resolve()), "model": run_config["model"],
                     "code_version": run_config.get("code_version")},
             "scaling": scaling.to_dict(), "protocol": {"name": cfg.protocol, **protocol}, "steps": step,
             "positions_per_step": len(window_columns(cfg, gpt.config.chunk, len(at), 0)),
             "final_loss": loss_value if math.isfinite(loss_value) else None,
             "alignment": "hidden state at the token planet j of step t is read at (probe_data.read_token) "
                          f"predicts the {cfg.target} of planet j at step t"}
    return probe_result.write_result(out, split, rows, pred, cfg.target, "finetune", settings, extra,
                                   near_k=cfg.near_train,
                                   eligible=probe_result.full_window(rows, gpt.config.chunk, offset))

