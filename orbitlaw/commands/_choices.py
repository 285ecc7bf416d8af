"""Names the parser offers whose owners are heavy modules, copied here so that building the parser imports
neither torch nor numba: ``orbitlaw --help`` answers at once, and each command imports its working modules
only when it runs.

The owners stay the source of what runs. Each copy names its owner, and tests/test_cli_startup.py fails when a
copy differs from it, so a new attention, dataset preset or LLM provider is one entry there and one here.
"""

from __future__ import annotations

# orbitlaw.orbits.DATASET_PRESETS (orbitlaw.orbits imports numba and scipy)
ORBIT_PRESETS = ("vafa2025", "two-body-exoplanet", "two-body", "binary", "solar-system", "nbody")

# orbitlaw.discovery.llm.systems.force_probe_presets(): the dataset presets whose record is a force-probe set
LLM_PRESETS = ("two-body-exoplanet", "two-body")

# orbitlaw.models.architectures.ARCHITECTURES (torch): name -> (summary, baseline)
ARCHITECTURES: dict[str, tuple[str, bool]] = {
    "gpt": ("transformer blocks: causal self-attention and a GELU MLP", False),
    "lstm": ("LSTM blocks: x + W LSTM(LN(x)), then the transformer's MLP", True),
    "rnn": ("tanh RNN blocks: x + W RNN(LN(x)), then the transformer's MLP", True),
    "mamba": ("Mamba blocks: selective state-space scan (plain PyTorch, slow)", True),
}

# orbitlaw.kernels.registry.ATTENTIONS (torch): name -> (summary, uses_p)
ATTENTIONS: dict[str, tuple[str, bool]] = {
    "softmax": ("softmax(q.k / sqrt d) through PyTorch SDPA", False),
    "lssa": ("length-scaled softplus attention (fused Triton on CUDA)", False),
    "lssar": ("LSSA with re-weighting of power p (fused Triton on CUDA)", True),
    "laser": ("LASER: log(softmax(q.k / sqrt d) exp(V - m)) + m on SDPA", False),
    "sigmoid": ("sigmoid(q.k / sqrt d - log T), not normalised (Ramapuram et al.)", False),
    "relu": ("relu(q.k / sqrt d) / n_i, not normalised (Wortsman et al.)", False),
    "softmax-rw": ("ablation: re-weighting of power p on top of softmax", True),
    "sigmoid-l1-rw": ("ablation: sigmoid, L1 normalisation, re-weighting of power p", True),
    "relu-l1": ("ablation: LSSA with ReLU as the non-negative function", False),
    "lssa-noscale": ("ablation: LSSA without the log d log n scale", False),
    "lssar-adaptive": ("LSSAR with a length-adaptive power, p at 1,024 keys and p log n / log 1024 elsewhere", True),
}

# orbitlaw.discovery.llm.providers.PROVIDERS (its package imports orbitlaw.orbits)
LLM_PROVIDERS = ("openai", "anthropic", "gemini", "openai-compatible")


def describe_attentions() -> str:
    """As ``orbitlaw.kernels.registry.describe()``: ``name: summary`` per attention, for ``--help``."""
    return "; ".join(f"{name}: {summary}" for name, (summary, _) in ATTENTIONS.items())
