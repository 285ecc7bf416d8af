"""What every optimisation loop of the toolkit shares (pretraining in ``orbitlaw.models.train``, the force probe's
fine-tune in ``orbitlaw.discovery.probes.probe``): the forward precision, the AdamW parameter groups, the learning-rate
schedule, and stopping on a signal with a checkpoint saved."""

from __future__ import annotations

import math
import signal

import torch


class TrainingStopped(Exception):
    """Training ended early (signal or NaN); the message says why and where the last checkpoint is."""

    def __init__(self, message: str, exit_code: int):
        super().__init__(message)
        self.exit_code = exit_code

    def __reduce__(self):  # raised in a worker process, it reaches the parent whole
        return type(self), (str(self), self.exit_code)


def autocast(device: torch.device, precision: str = "bf16"):
    """bf16 autocast on CUDA when ``precision`` is bf16 (losses are taken in fp32); plain fp32 otherwise
    and always on the CPU."""
    if precision == "bf16" and device.type == "cuda" and torch.cuda.is_bf16_supported():
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return torch.autocast("cpu", enabled=False)


def adamw(model: torch.nn.Module, lr: float, weight_decay: float, betas=(0.9, 0.95),
          device: torch.device | None = None) -> torch.optim.AdamW:
    """AdamW with weight decay on matrices (>= 2-D parameters) only, as nanoGPT, except parameters marked
    ``_no_weight_decay`` (Mamba's A); fused on CUDA."""
    params = [p for p in model.parameters() if p.requires_grad]
    decayed = [p.dim() >= 2 and not getattr(p, "_no_weight_decay", False) for p in params]
    groups = [{"params": [p for p, d in zip(params, decayed, strict=True) if d], "weight_decay": weight_decay},
              {"params": [p for p, d in zip(params, decayed, strict=True) if not d], "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=lr, betas=tuple(betas), fused=device is not None and device.type == "cuda")


SCHEDULES = ("constant", "cosine")


def scheduled_lr(lr: float, step: int, total_steps: int, schedule: str = "constant", warmup_steps: int = 0,
                 min_lr: float = 0.0) -> float:
    """The learning rate of optimiser step ``step`` (0-based) of ``total_steps``: a linear warmup over the
    first ``warmup_steps``, then ``lr`` (``"constant"``) or a cosine from ``lr`` that would reach ``min_lr`` at
    step ``total_steps`` (``"cosine"``; the last step taken, ``total_steps - 1``, is one short of it). Shared by
    pretraining and the fine-tuned force probe."""
    if step < warmup_steps:
        return lr * (step + 1) / warmup_steps
    if schedule == "constant":
        return lr
    progress = min(1.0, (step - warmup_steps) / max(1, total_steps - warmup_steps))
    return min_lr + 0.5 * (1 + math.cos(math.pi * progress)) * (lr - min_lr)


class StopOnSignal:
    """Between :meth:`install` and :meth:`restore` (or within ``with StopOnSignal() as stop:``), SIGTERM and
    SIGINT are recorded (``stop.signal``) instead of killing the process; :meth:`stop_here` then saves and
    raises :class:`TrainingStopped` (exit code 128 + signal) at a step boundary."""

    SIGNALS = (signal.SIGTERM, signal.SIGINT)

    def __init__(self):
        self.signal: int | None = None
        self._previous: dict = {}

    def install(self) -> StopOnSignal:
        self._previous = {s: signal.signal(s, self._record) for s in self.SIGNALS}
        return self

    def restore(self) -> None:
        for s, handler in self._previous.items():
            signal.signal(s, handler)
        self._previous = {}

    __enter__ = install

    def __exit__(self, *exc) -> None:
        self.restore()

    def _record(self, signum, frame) -> None:
        self.signal = signum

    def stop_here(self, step: int, saved: bool, save, where: str, resume_hint: str) -> None:
        """If a signal came: ``save(step)`` unless ``saved`` (the checkpoint of ``step`` is written), then raise
        TrainingStopped naming the signal, the step, ``where`` the checkpoint is and how to resume."""
        if self.signal is None:
            return
        if not saved:
            save(step)
        name = signal.Signals(self.signal).name
        raise TrainingStopped(f"stopped by {name} at step {step}; checkpoint saved in {where}; {resume_hint}",
                              128 + self.signal)
