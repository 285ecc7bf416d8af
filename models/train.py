"""Pretraining a GPT on an orbit dataset: next-token prediction, exact resume, DistributedDataParallel.

The reference optimiser by default (AdamW lr 6e-4, betas 0.9/0.95, weight decay 0.1 on matrices,
gradient clipping at 1.0, constant lr), with optional warmup and cosine decay. The data order is a pure
function of (seed, step): global sample g = step * batch_size + b is sequence ``perm_e[g mod n]`` with
``e = g // n`` and ``perm_e`` a permutation seeded by (seed, e). Each of W ranks takes every W-th sample
of the global batch, in micro-batches (gradient accumulation). Hence a resumed run sees exactly the data
an uninterrupted run would, and ``torchrun --nproc_per_node W`` matches one process with the same
global batch.

Files of a run directory: ``config.json`` (model and training settings, dataset, seed, code version),
``metrics.jsonl`` (one object per logged step: step, train_loss, val_loss when evaluated, lr,
tokens_per_s), ``loss.png``, and checkpoints (see ``orbitlaw.models.checkpoint``); with ``log_to``
(``--log-to tensorboard|wandb``) the same rows also go to that tracker (:mod:`orbitlaw.models.tracking`).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import random
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch

from orbitlaw import orbits
from orbitlaw.models import checkpoint
from orbitlaw.models.gpt import GPT, GPTConfig
from orbitlaw.models.loop import SCHEDULES, StopOnSignal, TrainingStopped, adamw, autocast, scheduled_lr
from orbitlaw.models.presets import model_config
from orbitlaw.models.tracking import Tracker, check_tracker, open_tracker
from orbitlaw.provenance import (
    OutputLock,
    atomic_path,
    code_version,
    dependency_versions,
    inside,
    naming,
    undo_on_failure,
    write_text_atomic,
)
from orbitlaw.orbits.tokenizer import check_ids

_TRAJECTORY_SETTINGS = ("batch_size", "micro_batch", "lr", "min_lr", "betas", "weight_decay", "grad_clip",
                        "schedule", "warmup_steps", "seed", "train_split", "precision", "input_noise")
"""Training settings a resumed run must keep to follow the same trajectory."""


PRECISIONS = ("bf16", "fp32")
"""Forward precision on CUDA: bf16 autocast (loss in fp32) or plain fp32 (the reference's). The CPU always
runs fp32."""


@dataclass
class TrainConfig:
    data: str
    out: str
    preset: str = "tiny"
    attention: str = "softmax"
    arch: str = "gpt"
    p: float = 15.0
    pos: str | None = None  # None: learned for the gpt arch, none for the recurrent and state-space ones
    window: int | None = None
    max_steps: int = 1000
    checkpoint_every: int = 100
    eval_every: int = 100
    eval_sequences: int = 32
    log_every: int = 10
    batch_size: int = 8
    micro_batch: int | None = None
    lr: float = 6e-4
    min_lr: float = 6e-5
    betas: tuple[float, float] = (0.9, 0.95)
    weight_decay: float = 0.1
    grad_clip: float = 1.0
    schedule: str = "constant"
    warmup_steps: int = 0
    seed: int = 0
    train_split: str = "train"
    val_split: str = "val"
    compile: bool = False
    precision: str = "bf16"
    chunk_steps: int | None = None
    input_noise: float = 0.0
    window_end: str = "planet"
    window_loss: str = "all"
    device: str = "auto"
    log_to: str = "none"
    model_overrides: dict = field(default_factory=dict)

    def validate(self) -> None:
        resolve_device(self.device)
        check_tracker(self.log_to)
        if self.arch != "gpt" and (self.attention != "softmax" or self.window is not None):
            raise ValueError(f"--attention and --window choose the gpt arch's attention; a {self.arch} model has none")
        if self.precision not in PRECISIONS:
            raise ValueError(f"unknown precision {self.precision!r}; choose {' or '.join(PRECISIONS)}")
        if self.schedule not in SCHEDULES:
            raise ValueError(f"unknown lr schedule {self.schedule!r}; choose {' or '.join(SCHEDULES)}")
        if self.seed < 0:
            raise ValueError(f"seed must be >= 0, got {self.seed}")
        for name in ("max_steps", "checkpoint_every", "eval_every", "log_every", "batch_size"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name.replace('_', '-')} must be >= 1, got {getattr(self, name)}")
        if self.warmup_steps < 0:
            raise ValueError(f"warmup-steps must be >= 0 (0: no warmup), got {self.warmup_steps}")
        if not self.p > 0:
            raise ValueError(f"--p must be > 0, got {self.p}")
        if self.chunk_steps is not None and self.chunk_steps < 1:
            raise ValueError(f"chunk-steps must be >= 1, got {self.chunk_steps}")
        if not (math.isfinite(self.input_noise) and self.input_noise >= 0):
            raise ValueError(f"input-noise must be a finite number >= 0 (AU), got {self.input_noise}")
        if self.micro_batch is not None and not 1 <= self.micro_batch <= self.batch_size:
            raise ValueError(f"micro-batch must be between 1 and the batch size, got {self.micro_batch}")


# ----------------------------------------------------------------------------------------------------
# Distributed setting


@dataclass
class Dist:
    rank: int = 0
    world: int = 1
    local_rank: int = 0

    @property
    def main(self) -> bool:
        return self.rank == 0


DEVICES = ("auto", "cpu", "cuda")


def resolve_device(device: str, local_rank: int = 0) -> torch.device:
    """``auto``: this process's GPU (``cuda:LOCAL_RANK``) when there is one, else the CPU. ``cuda`` without a
    GPU, or a local rank beyond the GPUs there are, is a one-line ValueError."""
    if device not in DEVICES:
        raise ValueError(f"unknown device {device!r}; choose {', '.join(DEVICES)}")
    if device == "cpu" or (device == "auto" and not torch.cuda.is_available()):
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise ValueError("--device cuda: no CUDA device is available")
    if local_rank >= torch.cuda.device_count():
        raise ValueError(f"process {local_rank} has no GPU of its own ({torch.cuda.device_count()} visible): "
                         "start at most one process per GPU, or train with --device cpu")
    return torch.device(f"cuda:{local_rank}")


def init_distributed(device: str = "auto") -> Dist:
    """Join the torchrun process group when WORLD_SIZE > 1 (gloo on the CPU, NCCL on GPUs)."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world == 1:
        return Dist()
    import torch.distributed as dist

    local = int(os.environ.get("LOCAL_RANK", "0"))
    where = resolve_device(device, local)
    dist.init_process_group("nccl" if where.type == "cuda" else "gloo")
    if where.type == "cuda":
        torch.cuda.set_device(where)
    return Dist(rank=dist.get_rank(), world=world, local_rank=local)


# ----------------------------------------------------------------------------------------------------
# Data


def sample_order(seed: int, epoch: int, n: int) -> np.ndarray:
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence([seed, 0x0DA7A, epoch]))).permutation(n)


def batch_indices(seed: int, step: int, batch_size: int, n: int) -> np.ndarray:
    """Sequence indices of global batch ``step`` (pure function of seed and step)."""
    g = np.arange(step * batch_size, (step + 1) * batch_size)
    epochs = g // n
    out = np.empty(batch_size, np.int64)
    for e in np.unique(epochs):
        sel = epochs == e
        out[sel] = sample_order(seed, int(e), n)[g[sel] % n]
    return out


def make_batch(tokens: np.ndarray, idx: np.ndarray, context: int, device, vocab: int | None = None
               ) -> tuple[torch.Tensor, torch.Tensor]:
    """Inputs (B, context, 2) and next-token targets (B, context, 2), int64, from token sequences; with
    ``vocab``, ids outside 0..vocab-1 (a corrupted token file) are a one-line ValueError."""
    arr = np.asarray(tokens[idx], dtype=np.int64)[:, :context + 1]
    if vocab is not None:
        check_ids(arr, vocab)
    seqs = torch.from_numpy(arr)
    return seqs[:, :context].to(device), seqs[:, 1:context + 1].to(device)


def read_sequences(config: GPTConfig, split, idx: np.ndarray, length: int) -> torch.Tensor:
    """The first ``length`` positions of sequences ``idx`` as ``config``'s model reads them: (B, length, 2)
    int64 token ids, or for a regression model float32 body positions in AU (``Split.continuous``, which
    drops the time-step token: continuous position i is token i + 1; NaN where a sequence pads)."""
    if not config.regression:
        arr = np.asarray(split.tokens[idx], dtype=np.int64)[:, :length]
        check_ids(arr, config.vocab_size)
        return torch.from_numpy(arr)
    return torch.from_numpy(np.asarray(split.continuous(np.asarray(idx))[:, :length], dtype=np.float32))


def token_offset(config: GPTConfig) -> int:
    """Token index minus input position: 1 for a regression model (no time-step token), else 0."""
    return 1 if config.regression else 0


def regression_batch(split, idx: np.ndarray, length: int, chunk: int | None, noise: float, key: tuple,
                     device, window_end: str = "planet", window_loss: str = "all"
                     ) -> tuple[torch.Tensor, torch.Tensor]:
    """Inputs and next-position targets (B, T, 2) float32 (AU) for a regression model.

    Unchunked: the first ``length`` positions. Chunked: one window of ``chunk`` positions per sequence,
    ending at a uniformly drawn planet position (``window_end="planet"``) or star position (``"step"``, the
    last body of a step), never before the sequence start: a window always ends the way the probes read it
    (``orbitlaw.models.gpt`` reads each position through the window that ends there), so the model knows
    which body each position holds. ``window_loss="last"`` keeps only the window's last target (the others
    NaN). Gaussian noise of standard deviation ``noise`` (AU) is added to the inputs, never the targets.
    Windows and noise come from a PCG64 stream keyed by ``key`` (seed, step, rank, micro-batch): batches
    are a pure function of it. NaN pads read as 0 and stay NaN (ignored) in the targets."""
    seqs = np.asarray(split.continuous(np.asarray(idx)), dtype=np.float32)
    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence([*key, 0xC4A2])))
    if chunk is not None:
        bodies = int(np.asarray(split.n_planets)[idx[0]]) + 1
        ends = np.arange(chunk - 1, seqs.shape[1] - 1)
        star = ends % bodies == bodies - 1  # the star is the last body of each step
        ends = ends[star if window_end == "step" else ~star]
        start = ends[rng.integers(0, len(ends), size=len(seqs))] - chunk + 1
        seqs = seqs[np.arange(len(seqs))[:, None], start[:, None] + np.arange(chunk + 1)]
        length = chunk
    x, y = seqs[:, :length], seqs[:, 1:length + 1]
    if noise > 0:
        x = x + noise * rng.standard_normal(x.shape, dtype=np.float32)
    x = np.nan_to_num(x, nan=0.0)
    if chunk is not None and window_loss == "last":
        y = np.concatenate([np.full_like(y[:, :-1], np.nan), y[:, -1:]], axis=1)
    return torch.from_numpy(x).to(device), torch.from_numpy(np.ascontiguousarray(y)).to(device)


def check_vocab(model_cfg: GPTConfig, split) -> None:
    spec = split.tokenizer
    if model_cfg.regression:  # reads positions, not token ids; its bins, if any, must be the dataset's tokeniser's
        bins = (model_cfg.position_bins, model_cfg.bin_lo, model_cfg.bin_hi)
        if "bins" in (model_cfg.inputs, model_cfg.outputs) and bins != (spec.num_bins, spec.lo, spec.hi):
            raise ValueError(f"the model's bins ({bins[0]} over [{bins[1]}, {bins[2]}) AU) are not the dataset's "
                             f"tokeniser's ({spec.num_bins} over [{spec.lo}, {spec.hi}) AU)")
        return
    if spec.vocab_size != model_cfg.vocab_size or spec.pad_id != model_cfg.pad_id:
        raise ValueError(f"dataset vocabulary ({spec.vocab_size} ids, pad {spec.pad_id}) does not match the "
                         f"model's ({model_cfg.vocab_size} ids, pad {model_cfg.pad_id})")


# ----------------------------------------------------------------------------------------------------
# Optimisation


def make_optimizer(model: GPT, cfg: TrainConfig, device) -> torch.optim.AdamW:
    """AdamW with weight decay on matrices (>= 2-D parameters) only, as nanoGPT (``orbitlaw.models.loop.adamw``)."""
    return adamw(model, cfg.lr, cfg.weight_decay, cfg.betas, device)


def learning_rate(cfg: TrainConfig, step: int) -> float:
    return scheduled_lr(cfg.lr, step, cfg.max_steps, cfg.schedule, cfg.warmup_steps, cfg.min_lr)


def rng_state() -> dict:
    """Every RNG's state as tensors and numbers (what ``torch.load(weights_only=True)`` reads back)."""
    kind, keys, pos, has_gauss, cached = np.random.get_state()
    version, internal, gauss = random.getstate()
    state = {"torch": torch.get_rng_state(),
             "numpy": {"kind": kind, "keys": torch.from_numpy(keys.astype(np.int64)), "pos": int(pos),
                       "has_gauss": int(has_gauss), "cached_gaussian": float(cached)},
             "python": {"version": version, "internal": torch.tensor(internal, dtype=torch.int64), "gauss": gauss}}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict) -> None:
    torch.set_rng_state(state["torch"])
    n = state["numpy"]
    np.random.set_state((n["kind"], n["keys"].numpy().astype(np.uint32), n["pos"], n["has_gauss"],
                         n["cached_gaussian"]))
    p = state["python"]
    random.setstate((p["version"], tuple(int(v) for v in p["internal"].tolist()), p["gauss"]))
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


# ----------------------------------------------------------------------------------------------------
# Metrics


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


def _rewrite_metrics(run: Path, rows: list[dict]) -> None:
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


# ----------------------------------------------------------------------------------------------------
# The loop


@torch.no_grad()
def evaluate_loss(model: GPT, split, n_seq: int, batch: int, context: int, device, amp) -> float:
    """Mean next-token loss over the first ``n_seq`` sequences of a split (a chunked model: over one
    fixed window per sequence, drawn as in training, without noise)."""
    model.eval()
    total, count = 0.0, 0
    for start in range(0, min(n_seq, len(split)), batch):
        idx = np.arange(start, min(start + batch, n_seq, len(split)))
        if model.config.regression:  # a chunked model: its training objective on fixed windows
            x, y = regression_batch(split, idx, context, model.config.chunk, 0.0, (0, start), device,
                                    model.config.window_end, model.config.window_loss)
        else:
            x, y = make_batch(split.tokens, idx, context, device, model.config.vocab_size)
        with amp:
            _, loss = model(x, y)
        total += float(loss) * len(idx)
        count += len(idx)
    model.train()
    return total / max(count, 1)


def _chunk_tokens(cfg: TrainConfig, split) -> int | None:
    """Tokens per training chunk: W = ``chunk_steps`` steps of every body (W (N + 1) positions); None when
    unchunked. ValueError when the split mixes planet counts or its sequences are too short."""
    if cfg.chunk_steps is None:
        return None
    counts = np.unique(np.asarray(split.n_planets))
    if len(counts) != 1:
        raise ValueError("--chunk-steps needs one planet count per dataset (this one mixes "
                         f"{', '.join(map(str, counts))})")
    chunk = cfg.chunk_steps * (int(counts[0]) + 1)
    if chunk > split.tokens.shape[1] - 2:
        raise ValueError(f"--chunk-steps {cfg.chunk_steps} ({chunk} positions) does not fit the dataset's "
                         f"{split.tokens.shape[1] - 1}-position sequences")
    return chunk


def _check_inputs(mcfg: GPTConfig, *splits) -> None:
    """Read one sequence of each split the way training reads them: opening a dataset file checks it
    against its checksum (``orbits.load_dataset``), so a damaged file the run would read (tokens, or a
    regression model's positions) is a one-line ValueError now, before the run directory is written."""
    for split in splits:
        if split is not None:
            read_sequences(mcfg, split, np.arange(1), 1)


def _check_same_model(run: Path, mcfg: GPTConfig) -> None:
    """One-line ValueError when the run's config.json describes another model than ``mcfg`` (a setting
    missing from an older run's file had its default), or is a link out of the run."""
    config_file = inside(run, run / "config.json", "run")
    try:
        saved = {**GPTConfig().to_dict(), **json.loads(config_file.read_text())["model"]}
    except (OSError, ValueError, KeyError, TypeError):
        return  # no readable record: the checkpoint's own run_config is compared after loading
    new = mcfg.to_dict()
    if saved.get("arch") != new["arch"]:
        raise ValueError(f"--resume with --arch {new['arch']}, but the run in {run} is a {saved.get('arch')} model")
    changed = sorted(k for k in new if saved.get(k) != new[k])
    if changed:
        raise ValueError(f"--resume with different model settings ({', '.join(changed)}) than the run in {run}")


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
    data = orbits.load_dataset(cfg.data)
    if cfg.train_split not in data:
        raise ValueError(f"dataset {cfg.data} has no split {cfg.train_split!r}; it has {', '.join(data)}")
    train_split = data[cfg.train_split]
    val_split = data.get(cfg.val_split)
    chunk = _chunk_tokens(cfg, train_split)
    overrides = {**cfg.model_overrides, **({"chunk": chunk, "block_size": chunk} if chunk else {})}
    overrides.update(window_end=cfg.window_end, window_loss=cfg.window_loss)  # GPTConfig.validate checks them
    if cfg.pos is not None:
        overrides["pos"] = cfg.pos
    mcfg = model_config(cfg.preset, cfg.attention, arch=cfg.arch, p=cfg.p, window=cfg.window, **overrides)
    if (chunk or cfg.input_noise) and not mcfg.regression:
        raise ValueError("--chunk-steps and --input-noise train a regression model (e.g. --preset control)")
    check_vocab(mcfg, train_split)
    _check_inputs(mcfg, train_split, val_split)
    seq_len = train_split.tokens.shape[1]
    # positions read per sequence: a chunked model reads the whole sequence, window by window
    # (a regression model's inputs drop the time-step token: seq_len - 1 positions, seq_len - 2 with a target)
    readable = seq_len - 1 - token_offset(mcfg)
    context = readable if chunk else min(mcfg.block_size, readable)
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
    # The run's lock comes before anything of the run is read (a resume beside a running train is refused in one
    # line, never sees a checkpoint being written); a failure leaves the run as it was (undo_on_failure).
    fresh = not os.path.lexists(run)
    lock = OutputLock(run / ".lock", f"run {run}").acquire() if dist.main else None  # one writer per run directory
    failed = True
    try:
        if dist.world > 1:  # the other ranks read the checkpoint once rank 0 holds the lock
            import torch.distributed as tdist

            tdist.barrier()
        undo = contextlib.nullcontext()
        if dist.main:  # a failure undoes what it wrote, unless it wrote a checkpoint to resume from
            start = checkpoint.latest(run)
            undo = undo_on_failure(run, resumable=lambda: checkpoint.latest(run) != start,
                                   restore=("config.json", "metrics.jsonl"))
        with undo:
            summary = _train_locked(cfg, resume, progress, dist, device, run, train_split, val_split, mcfg, chunk,
                                    context, per_rank, micro, run_config)
        failed = False
    finally:
        if lock is not None:
            lock.release()
        if failed and fresh and dist.main:  # created by this command and emptied by undo_on_failure
            with contextlib.suppress(OSError):
                run.rmdir()
    return summary


def _train_locked(cfg: TrainConfig, resume: bool, progress: bool, dist: Dist, device, run: Path, train_split,
                  val_split, mcfg: GPTConfig, chunk: int | None, context: int, per_rank: int, micro: int,
                  run_config: dict) -> dict:
    """The body of :func:`train` once rank 0 holds the run's lock: resume or start, then the loop."""
    ckpt = checkpoint.latest(run) if run.exists() else None
    if ckpt is not None and not resume:
        raise ValueError(f"{run} already holds a training run; pass --resume to continue it or choose "
                         "another --out")
    if ckpt is None and resume:
        raise ValueError(f"--resume: {run} has no checkpoint to resume from (nothing to resume); train without "
                         "--resume to start a new run there")

    torch.manual_seed(cfg.seed)
    model = GPT(mcfg).to(device)
    optimizer = make_optimizer(model, cfg, device)
    step = 0
    if ckpt is not None:
        _check_same_model(run, mcfg)  # before loading: another model's weights do not fit this one
        _, state = checkpoint.load(ckpt, model)
        saved = state["run_config"]
        if {**GPTConfig().to_dict(), **saved["model"]} != run_config["model"]:  # older runs lack newer settings
            raise ValueError(f"--resume with different model settings than the run in {run}")
        # runs saved before a setting existed ran with its default (precision: bf16)
        changed = [k for k in _TRAJECTORY_SETTINGS
                   if saved["train"].get(k, getattr(TrainConfig, k, None)) != run_config["train"].get(k)]
        if cfg.schedule == "cosine" and saved["train"]["max_steps"] != cfg.max_steps:
            changed.append("max_steps (it sets the cosine schedule)")
        if changed:
            raise ValueError(f"--resume with different {', '.join(changed)} than the run in {run}: the run would "
                             "not continue the same trajectory")
        if saved["dataset"]["config_hash"] != run_config["dataset"]["config_hash"]:
            raise ValueError(f"--resume with a different dataset than the run in {run} was trained on")
        optimizer.load_state_dict(state["optimizer"])
        set_rng_state(state["rng"])
        step = int(state["step"])
    if dist.main:
        run_config["code_version"] = code_version()
        run_config["dependency_versions"] = dependency_versions()
        tracker = open_tracker(cfg.log_to, run, run_config, step)  # one that cannot start leaves no run behind
        write_text_atomic(run / "config.json", json.dumps(run_config, indent=2) + "\n")
        _rewrite_metrics(run, [r for r in read_metrics(run) if r["step"] <= step])
    else:
        tracker = Tracker()

    net = model
    if dist.world > 1:
        from torch.nn.parallel import DistributedDataParallel

        net = DistributedDataParallel(model, device_ids=[dist.local_rank] if device.type == "cuda" else None)
    if cfg.compile and device.type == "cuda":
        net = torch.compile(net)
    amp = autocast(device, cfg.precision)
    stop = StopOnSignal().install()

    def save(at_step: int):
        if dist.main:
            state = {"optimizer": optimizer.state_dict(), "rng": rng_state(), "step": at_step,
                     "data_position": {"samples_seen": at_step * cfg.batch_size,
                                       "epoch": at_step * cfg.batch_size // len(train_split)},
                     "run_config": run_config}
            checkpoint.save(run, at_step, model, state)

    from tqdm import tqdm

    bar = tqdm(total=cfg.max_steps, initial=step, unit="step", disable=not (progress and dist.main),
               desc=f"train {cfg.preset}/{cfg.attention}")
    last_saved = first_step = step
    tokens_per_step = cfg.batch_size * (chunk or context)
    t0 = time.perf_counter()
    try:
        while step < cfg.max_steps:
            lr = learning_rate(cfg, step)
            for group in optimizer.param_groups:
                group["lr"] = lr
            idx = batch_indices(cfg.seed, step, cfg.batch_size, len(train_split))[dist.rank::dist.world]
            total = 0.0
            for m in range(0, per_rank, micro):
                if mcfg.regression:
                    x, y = regression_batch(train_split, idx[m:m + micro], context, chunk, cfg.input_noise,
                                            (cfg.seed, step, dist.rank, m), device, mcfg.window_end,
                                            mcfg.window_loss)
                else:
                    x, y = make_batch(train_split.tokens, idx[m:m + micro], context, device, mcfg.vocab_size)
                sync = m + micro >= per_rank
                if dist.world > 1 and not sync:
                    with net.no_sync(), amp:
                        _, loss = net(x, y)
                else:
                    with amp:
                        _, loss = net(x, y)
                (loss * (micro / per_rank)).backward()
                total += loss.item() * micro / per_rank
            if dist.world > 1:
                import torch.distributed as tdist

                t = torch.tensor([total], device=device)
                tdist.all_reduce(t)
                total = float(t) / dist.world
            grad_norm = float(torch.nn.utils.clip_grad_norm_(
                model.parameters(), cfg.grad_clip if cfg.grad_clip > 0 else math.inf))
            if not (math.isfinite(total) and math.isfinite(grad_norm)):
                what = f"loss became {total}" if not math.isfinite(total) else f"gradient norm became {grad_norm}"
                last = (f"The last good checkpoint is step {last_saved} in {run}" if checkpoint.latest(run)
                        else "No checkpoint had been written yet")
                raise TrainingStopped(f"{what} at step {step + 1}; stopped without taking that step. {last}", 3)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            step += 1
            bar.update(1)
            elapsed = time.perf_counter() - t0
            row = None
            if step % cfg.log_every == 0 or step == cfg.max_steps:
                row = {"step": step, "train_loss": total, "lr": lr,
                       "tokens_per_s": tokens_per_step * (step - first_step) / max(elapsed, 1e-9)}
            if val_split is not None and (step % cfg.eval_every == 0 or step == cfg.max_steps):
                row = row or {"step": step, "train_loss": total, "lr": lr}
                row["val_loss"] = evaluate_loss(model, val_split, cfg.eval_sequences, micro, context, device, amp)
            if row is not None and dist.main:
                with naming(run / "metrics.jsonl"), open(run / "metrics.jsonl", "a") as f:
                    f.write(json.dumps(row) + "\n")
                tracker.log(row)
                rate = tokens_per_step * (step - first_step) / max(elapsed, 1e-9)
                bar.set_postfix(loss=f"{total:.3f}", tok_s=f"{rate:.0f}")
            if step % cfg.checkpoint_every == 0 or step == cfg.max_steps:
                save(step)
                last_saved = step
            if dist.world > 1:  # every rank stops at the same step, whichever one got the signal
                import torch.distributed as tdist

                flag = torch.tensor([stop.signal or 0], device=device)
                tdist.all_reduce(flag, op=tdist.ReduceOp.MAX)
                stop.signal = int(flag) or None
            stop.stop_here(step, last_saved == step, save, run, "continue with --resume")
        if dist.world > 1:  # let every rank finish its last collective before the group is torn down
            import torch.distributed as tdist

            tdist.barrier()
    finally:
        bar.close()
        stop.restore()
        if dist.world > 1:
            import torch.distributed as tdist

            tdist.destroy_process_group()
        try:
            tracker.close()
        except Exception as exc:  # the run is saved; a tracker that cannot finish does not undo it
            print(f"orbitlaw train: warning: --log-to {cfg.log_to} did not close cleanly: {exc}", file=sys.stderr)
    if dist.main:
        plot_losses(run)
    final = read_metrics(run)
    return {"run": str(run), "step": step, "train_loss": final[-1]["train_loss"] if final else None}
