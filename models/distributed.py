"""Where training runs: each process's device and, under ``torchrun``, the process group.

One process (``WORLD_SIZE`` unset or 1) trains alone; under ``torchrun --nproc_per_node W`` each of the W
ranks joins a process group (gloo on the CPU, NCCL on GPUs), wraps the model in DistributedDataParallel and
averages its loss with the others'. Every collective the training loop makes is here, each a no-op for
one process.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch

from orbitlaw.validate import FieldError

DEVICES = ("auto", "cpu", "cuda")


@dataclass
class Dist:
    """This process's place in the run: ``rank`` of ``world`` processes, ``local_rank`` on its machine."""

    rank: int = 0
    world: int = 1
    local_rank: int = 0

    @property
    def main(self) -> bool:
        """Rank 0: the process that writes the run directory."""
        return self.rank == 0


def resolve_device(device: str, local_rank: int = 0) -> torch.device:
    """``auto``: this process's GPU (``cuda:LOCAL_RANK``) when there is one, else the CPU. ``cuda`` without a
    GPU, or a local rank beyond the GPUs there are, is a one-line ValueError."""
    if device not in DEVICES:
        raise ValueError(f"unknown device {device!r}; choose {', '.join(DEVICES)}")
    if device == "cpu" or (device == "auto" and not torch.cuda.is_available()):
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise FieldError(message="`device` cuda: no CUDA device is available")
    if local_rank >= torch.cuda.device_count():
        raise ValueError(f"process {local_rank} has no GPU of its own ({torch.cuda.device_count()} visible): "
                         "start at most one process per GPU, or train with --device cpu")
    return torch.device(f"cuda:{local_rank}")


def init_distributed(device: str = "auto") -> Dist:
    """Join the torchrun process group when WORLD_SIZE > 1 (gloo on the CPU, NCCL on GPUs)."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world == 1:
        return Dist()
    import torch.distributed as tdist

    local = int(os.environ.get("LOCAL_RANK", "0"))
    where = resolve_device(device, local)
    tdist.init_process_group("nccl" if where.type == "cuda" else "gloo")
    if where.type == "cuda":
        torch.cuda.set_device(where)
    return Dist(rank=tdist.get_rank(), world=world, local_rank=local)


def wrap(model: torch.nn.Module, dist: Dist, device: torch.device) -> torch.nn.Module:
    """The model as the ranks train it together: DistributedDataParallel over ``world`` > 1 processes."""
    if dist.world == 1:
        return model
    from torch.nn.parallel import DistributedDataParallel

    return DistributedDataParallel(model, device_ids=[dist.local_rank] if device.type == "cuda" else None)


def barrier(dist: Dist) -> None:
    """Wait until every rank gets here."""
    if dist.world > 1:
        import torch.distributed as tdist

        tdist.barrier()


def mean_over_ranks(value: float, dist: Dist, device: torch.device) -> float:
    """The mean of ``value`` over every rank."""
    if dist.world == 1:
        return value
    import torch.distributed as tdist

    t = torch.tensor([value], device=device)
    tdist.all_reduce(t)
    return float(t) / dist.world


def agree_on_signal(signal: int | None, dist: Dist, device: torch.device) -> int | None:
    """The signal any rank received (the largest number), so that every rank stops at the same step."""
    if dist.world == 1:
        return signal
    import torch.distributed as tdist

    flag = torch.tensor([signal or 0], device=device)
    tdist.all_reduce(flag, op=tdist.ReduceOp.MAX)
    return int(flag) or None


def leave(dist: Dist) -> None:
    """Tear the process group down (this rank's last collective is done; :func:`orbitlaw.models.train.train` calls
    it once the DistributedDataParallel model is gone). Anything left in a reference cycle is collected first, so
    that no object holding the group outlives it into the interpreter's shutdown."""
    if dist.world > 1:
        import gc

        import torch.distributed as tdist

        gc.collect()
        if tdist.is_initialized():
            tdist.destroy_process_group()
