"""models: GPT sequence models over orbit tokens, with every attention of ``orbitlaw.kernels.registry``
(softmax, LSSA, LSSAR, LASER, sigmoid, ReLU and the LSSAR write-up's ablations), every core of
``orbitlaw.models.architectures`` (transformer, LSTM, RNN, Mamba), model sizes from a CPU-sized ``tiny`` to the
reference ``gpt-109m``, and their training. May use ``orbits`` and ``kernels``; nothing above
it."""

from orbitlaw.models.attention import ATTENTIONS, attend
from orbitlaw.models.gpt import GPT, GPTConfig
from orbitlaw.models.presets import MODEL_SIZES, build_model, model_config

__all__ = ["ATTENTIONS", "GPT", "GPTConfig", "MODEL_SIZES", "attend", "build_model", "model_config"]
