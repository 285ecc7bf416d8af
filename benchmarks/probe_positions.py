"""The force probe's step on a chunked model: every window read (before) against only the windows its rows are
read at (``ForceProbe(x, at)``), and against 25 of those a sequence (``windows_per_sequence``, the controls
preset's probe now), timed in the same run on the controls preset's W = 3 model.

    python benchmarks/probe_positions.py [--steps 20] [--threads 1]

A chunked model reads an input of T tokens as T - L + 1 windows of L tokens; the probe reads a planet step
at the window ending at the step's last token, so only one window in every ``n_tokens`` (2 for a binary)
is ever read. Both paths train the same probe head on the same batches (16 sequences of the binary
preset's 100 steps, 200 tokens); the benchmark also checks that the first two's losses agree (the third reads
fewer labels: only its time compares). Writes ``benchmarks/results/probe_positions.json``.
"""

from __future__ import annotations

import argparse
import platform
import time

import torch

from orbitlaw.discovery.probes.probe import ForceProbe, ProbeConfig, masked_mse, window_columns
from orbitlaw.models.presets import build_model
from orbitlaw.provenance import code_version, write_json_atomic


def step_seconds(at: torch.Tensor | None, x: torch.Tensor, y: torch.Tensor, steps: int, seed: int
                 ) -> tuple[float, float]:
    """Mean seconds per fine-tuning step (forward, backward, AdamW) and the first step's loss."""
    torch.manual_seed(seed)
    gpt = build_model("control", chunk=6, block_size=6, n_head=4, n_embd=64, window_end="step", window_loss="last")
    model = ForceProbe(gpt, 1)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    first, times = None, []
    for step in range(steps + 2):
        start = time.perf_counter()
        out = model(x, at)
        loss = masked_mse(out, y if at is None else y[:, at])
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if step >= 2:  # the first two steps warm up allocators
            times.append(time.perf_counter() - start)
        first = loss.item() if first is None else first
    return sum(times) / len(times), first


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--result", default="benchmarks/results/probe_positions.json")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    g = torch.Generator().manual_seed(0)
    B, T = 16, 200
    x = torch.randn(B, T, 2, generator=g) * 2.5  # positions in AU
    y = torch.full((B, T, 1), float("nan"))
    read = torch.arange(5, T, 2)  # planet steps from the third on, read at the step's last token (the star's)
    y[:, read] = torch.randn(B, len(read), 1, generator=g)
    before, loss_before = step_seconds(None, x, y, args.steps, 0)
    now, loss_now = step_seconds(read, x, y, args.steps, 0)
    cols = window_columns(ProbeConfig(run="", data="", out="", windows_per_sequence=25), 6, len(read), 0)
    sub, _ = step_seconds(read[torch.from_numpy(cols)], x, y, args.steps, 0)
    doc = {"benchmark": "probe_positions", "model": "control W=3 (chunk 6 tokens), 4 heads, width 64",
           "batch": [B, T], "steps_timed": args.steps, "threads": args.threads,
           "seconds_per_step": {"every_window": round(before, 4), "read_windows_only": round(now, 4),
                                "windows_per_sequence_25": round(sub, 4)},
           "speedup": round(before / now, 2), "speedup_windows_per_sequence_25": round(now / sub, 2),
           "read_windows": {"read_windows_only": len(read), "windows_per_sequence_25": len(cols)},
           "first_loss": {"every_window": loss_before, "read_windows_only": loss_now},
           "machine": platform.processor() or platform.machine(), "torch": torch.__version__,
           "code_version": code_version()}
    write_json_atomic(args.result, doc)
    print(doc)


if __name__ == "__main__":
    main()
