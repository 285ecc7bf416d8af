"""Will a training step fit? A lower bound on the memory one micro-batch needs, checked before a run starts.

A batch far too large for the machine (``--batch-size 100000`` on a CPU) would otherwise fill the host's memory
until the kernel's out-of-memory killer ends the process, and perhaps others beside it. The bound counts only
what a forward and backward pass cannot avoid keeping at once:

- for a token model, the head's outputs and their gradient, ``2 * head`` floats a position (``head`` = 2 x
  vocab_size: one distribution per coordinate; a regression model's head may be taken at only some positions,
  so it is not counted);
- the activations each layer keeps for the backward pass, at least ``8 * n_embd`` numbers a position (a block
  keeps its normed input, q, k, v, the attention output, the MLP's 4x-wide hidden layer and more: about
  16 x n_embd in fp32, half that in bf16).

Weights, optimiser state, attention scores and the framework's own buffers come on top, so a run the bound
refuses certainly cannot fit; a run it lets through may still be too large.
"""

from __future__ import annotations

import torch

from orbitlaw.models.gpt import GPTConfig

BYTES_PER_NUMBER = 4  # fp32 (bf16 activations are counted at 8 x n_embd, half of fp32's 16)


def step_bytes_lower_bound(config: GPTConfig, micro: int, positions: int, head: bool = True) -> int:
    """Bytes that one forward and backward pass of ``micro`` sequences of ``positions`` positions needs at least
    (``head``: the model's own head runs, as in training; a probe reads the hidden states instead)."""
    head = 0 if config.regression or not head else 2 * config.vocab_size  # a regression head may read few positions
    per_position = config.n_layer * 8 * config.n_embd + 2 * head
    return BYTES_PER_NUMBER * micro * positions * per_position


def available_bytes(device: torch.device) -> int | None:
    """Memory free for a run on ``device``: the GPU's free memory, or the host's MemAvailable; None if unknown."""
    if device.type == "cuda":
        return int(torch.cuda.mem_get_info(device)[0])
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def check_fits(config: GPTConfig, batch: int, per_rank: int, micro: int, positions: int, device: torch.device,
               head: bool = True, batch_flag: str = "--batch-size", micro_flag: str | None = "--micro-batch") -> None:
    """One-line ValueError, naming the flags, when a micro-batch's lower bound exceeds the free memory: ``batch``
    sequences a step, ``per_rank`` of them on this process, ``micro`` at once, ``positions`` each; ``head`` as in
    :func:`step_bytes_lower_bound`; the flags that set the batch and the micro-batch (None: the command has none)."""
    free = available_bytes(device)
    need = step_bytes_lower_bound(config, micro, positions, head)
    if free is None or need <= free:
        return
    most = free // step_bytes_lower_bound(config, 1, positions, head)  # sequences at once that the bound lets fit
    divisors = {d for k in range(1, int(per_rank**0.5) + 1) if per_rank % k == 0 for d in (k, per_rank // k)}
    fits = max((d for d in divisors if d <= most), default=None)
    advice = (f"lower {batch_flag}, or set {micro_flag} {fits} (it divides the batch and fits)" if fits and micro_flag
              else f"lower {batch_flag} (to at most {most})" if most else f"lower {batch_flag} (one sequence alone "
              "does not fit)")
    raise ValueError(f"a step of {batch_flag} {batch} ({micro} sequences at once, {positions} positions each) needs "
                     f"at least {need / 2**30:.1f} GiB, and {device.type} has {free / 2**30:.1f} GiB free: {advice}")
