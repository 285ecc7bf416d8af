"""models: GPT sequence models over orbit tokens, with six attentions (softmax, LSSA, LSSAR, LASER,
sigmoid, ReLU), presets from a CPU-sized ``tiny`` to the reference ``gpt-109m``, and their training.
May use ``orbits`` and ``kernels``; nothing above it."""

from models.attention import ATTENTIONS, attend
from models.gpt import GPT, GPTConfig
from models.presets import PRESETS, build_model, model_config

__all__ = ["ATTENTIONS", "GPT", "GPTConfig", "PRESETS", "attend", "build_model", "model_config"]
