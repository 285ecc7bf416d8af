"""The settings of a training run (:class:`TrainConfig`), saved as the ``train`` object of ``RUN/config.json``."""

from __future__ import annotations

from dataclasses import dataclass, field

from orbitlaw.models import architectures
from orbitlaw.models.distributed import resolve_device
from orbitlaw.models.loop import SCHEDULES
from orbitlaw.models.tracking import check_tracker
from orbitlaw.validate import FieldError, at_least, finite_at_least, one_of, positive

PRECISIONS = ("bf16", "fp32")
"""Forward precision on CUDA: bf16 autocast (loss in fp32) or plain fp32 (the reference's). The CPU always
runs fp32."""

TRAJECTORY_SETTINGS = ("batch_size", "micro_batch", "lr", "min_lr", "betas", "weight_decay", "grad_clip",
                       "schedule", "warmup_steps", "seed", "train_split", "precision", "input_noise")
"""Training settings a resumed run must keep to follow the same trajectory."""


@dataclass
class TrainConfig:
    """What ``orbitlaw train`` trains, on what, and how; each field is the flag of the same name
    (``max_steps``: ``--max-steps``) except ``model_overrides`` (any GPTConfig field; the command line
    sets ``embed_init`` there with ``--embed-init``). The field names are config.json's keys: they stay.

    The model: ``preset`` (a model size of ``orbitlaw.models.presets.MODEL_SIZES``), ``arch`` (a core of
    ``orbitlaw.models.architectures``), ``attention`` and its power ``p``, ``pos`` (None: the core's default).
    Three settings bound what is read at once, each a different idea (``GPTConfig`` has the full story):

    - ``chunk_steps``: the *model window*, in steps: a regression model is trained on windows of W steps
      (W (N + 1) positions) and reads every sequence through them; ``window_end`` and ``window_loss`` say where
      a training window ends and which of its predictions the loss covers.
    - ``window``: the *attention window*, in tokens: sliding-window attention (the gpt core only).
    - the *memory chunk* (``GPTConfig.chunk_size``) is not a training setting: it only changes memory.

    The optimiser: AdamW (``lr``, ``betas``, ``weight_decay`` on matrices, gradient clipping at ``grad_clip``),
    the ``schedule`` (constant or cosine to ``min_lr``) after ``warmup_steps``; ``batch_size`` sequences a
    step over every process, ``micro_batch`` of them at once per process. The run: ``max_steps``, a checkpoint
    every ``checkpoint_every`` steps, a validation loss over ``eval_sequences`` every ``eval_every``, a
    metrics row every ``log_every``.
    """

    data: str
    out: str
    preset: str = "tiny"
    attention: str = "softmax"
    arch: str = "gpt"
    p: float = 15.0
    pos: str | None = None  # None: learned for the gpt arch, none for the recurrent and state-space ones
    window: int | None = None  # the attention window (tokens)
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
    warmup_steps: int = 0  # 0: no warmup
    seed: int = 0
    train_split: str = "train"
    val_split: str = "val"
    compile: bool = False  # torch.compile on CUDA
    precision: str = "bf16"
    chunk_steps: int | None = None  # the model window (steps); None: the whole context
    input_noise: float = 0.0  # AU, added to a regression model's inputs
    window_end: str = "planet"
    window_loss: str = "all"
    device: str = "auto"
    log_to: str = "none"
    model_overrides: dict = field(default_factory=dict)

    def validate(self) -> None:
        resolve_device(self.device)
        check_tracker(self.log_to)
        if not architectures.get(self.arch).has_attention and (self.attention != "softmax"
                                                                or self.window is not None):
            raise FieldError(message=f"`attention` and `window` choose the gpt arch's attention; a {self.arch} model "
                             "has none")
        one_of(self, "precision", PRECISIONS)
        one_of(self, "schedule", SCHEDULES)
        at_least(self, 0, "seed", "warmup_steps")
        at_least(self, 1, "max_steps", "checkpoint_every", "eval_every", "log_every", "batch_size", "chunk_steps")
        positive(self, "p")
        finite_at_least(self, 0, "input_noise", unit="AU")
        finite_at_least(self, 0, "lr", "min_lr", "weight_decay", "grad_clip")  # lr 0: the untrained controls
        if not (len(self.betas) == 2 and all(isinstance(b, (int, float)) and 0 <= b < 1 for b in self.betas)):
            raise FieldError("betas", f"must be two numbers in [0, 1), got {self.betas}")
        if self.micro_batch is not None and not 1 <= self.micro_batch <= self.batch_size:
            raise FieldError("micro_batch", f"must be between 1 and the batch size, got {self.micro_batch}")
