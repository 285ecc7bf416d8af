"""A GPT over pair tokens, in the spirit of nanoGPT's model.py.

Input: tokens (B, T, 2) int64, one (x, y) pair of bin ids per token (see ``orbitlaw.orbits.tokenizer``). Two
embedding tables (one per coordinate, vocab x d) are concatenated and projected 2d -> d; learned
absolute positions are added (or rotary embeddings applied to q and k); pre-LayerNorm blocks with a
pluggable causal attention and a GELU MLP; one untied head of 2 x vocab logits. Output: logits
(B, T, 2, vocab) and, given targets, the mean cross-entropy over both coordinates (pad targets ignored).

``arch`` swaps the transformer blocks (``orbitlaw.models.transformer``) for another core of
``orbitlaw.models.architectures`` (LSTM, RNN or Mamba blocks, the reference's baselines); embeddings, head and
everything around them stay the same, so the class is the sequence model of every core.

The regression variant takes continuous coordinates (B, T, 2) in AU and predicts the next ones with MSE. Its
``inputs`` and ``outputs`` can each be the tokeniser's bins instead (``"bins"``: ``num_bins`` uniform bins over
[``bin_lo``, ``bin_hi``) AU, 7000 over [-50, 50] as ``orbitlaw.orbits.tokenizer``): the positions are read as
bin ids through the token embeddings (or, ``inputs="centres"``, snapped to their bins' centres and still read in
AU, so that the bins' values and their embedding can change one at a time), or the next position is predicted
as a distribution over its bins with cross-entropy. The data stay continuous, so each of these changes alone
turns the control GPT, one step at a time, into a GPT over the toolkit's tokens (``orbitlaw.study.path``).

A model with a model window (``chunk`` = L tokens; see :class:`GPTConfig` for the three kinds of window
and chunk) is trained on windows of at most L tokens (Liu et al. 2026: orbits cut
into chunks of W steps) and reads a longer input the same way: the state at position e is the model's state
at the last position of the window of tokens e - L + 1 .. e (the first L - 1 positions read the prefix
0 .. e), so every position sees exactly what a training window showed it, no more. Its training windows
end at a planet's token (``window_end="planet"``) or at the last token of a step, the star's
(``"step"``: the window's last prediction is then a planet's next position); every probe reads a planet
step at the token the windows end at (``orbitlaw.discovery.probes.probe_data.read_token``). ``window_loss``:
the training loss covers every position of a window (``"all"``) or only its last prediction (``"last"``,
the one made with the whole window in view).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from orbitlaw.models import architectures
from orbitlaw.models.attention import ATTENTIONS
from orbitlaw.models.transformer import rope_tables
from orbitlaw.orbits.tokenizer import TokenizerSpec
from orbitlaw.validate import FieldError, at_least, positive

TOKENS = TokenizerSpec()
"""The toolkit's tokeniser, the one place its numbers live: the defaults below are its vocabulary (7003 ids per
coordinate: 7000 bins, 2 time steps, the pad), and training reads the vocabulary of the dataset it trains on
(:func:`vocabulary`), as nanoGPT reads its vocabulary from its data."""
_SPECIAL_IDS = len(TOKENS.time_steps) + 1  # the ids after the bins: one per time step, then the pad


def vocabulary(spec: TokenizerSpec) -> dict:
    """The :class:`GPTConfig` fields a dataset's tokeniser ``spec`` fixes: its ids, pad and bins (AU)."""
    out = {"vocab_size": spec.vocab_size, "pad_id": spec.pad_id, "bin_lo": spec.lo, "bin_hi": spec.hi}
    if spec.num_bins != spec.vocab_size - _SPECIAL_IDS:  # another count of time steps: name the bins
        out["num_bins"] = spec.num_bins
    return out

WINDOW_ENDS = ("planet", "step")
WINDOW_LOSSES = ("all", "last")
READOUTS = ("positions", "bins")  # a regression model's inputs and outputs: AU, or the tokeniser's bins
INPUTS = ("positions", "centres", "bins")  # its inputs may also be the bins' centres, in AU


@dataclass
class GPTConfig:
    """The model's settings, saved as the ``model`` object of a run's config.json (the field names are that
    file's keys, so they stay as they are).

    Three ideas share the words "window" and "chunk" in the field names; each has one name in the code:

    - the *model window* (``chunk``, in tokens; with it ``window_end`` and ``window_loss``): how many past
      tokens a position may read at all. A model with one is trained on windows of that many tokens and reads
      any longer input window by window (module docstring). ``TrainConfig.chunk_steps`` sets it in steps.
    - the *attention window* (``window``, in tokens): sliding-window attention, each query attends to the
      last ``window`` keys only; the blocks still pass information further along, layer by layer.
    - the *memory chunk* (``chunk_size``, in queries): the attention is evaluated that many queries at a time
      so that at most chunk_size x T scores exist at once; the output is the same, only memory changes.
    """

    vocab_size: int = TOKENS.vocab_size
    block_size: int = 999
    n_layer: int = 12
    n_head: int = 12
    n_embd: int = 768
    bias: bool = True
    dropout: float = 0.0
    attention: str = "softmax"
    p: float = 15.0
    window: int | None = None  # the attention window (tokens); None: every earlier key
    pos: str = "learned"
    rope_base: float = 10000.0
    regression: bool = False
    pad_id: int | None = TOKENS.pad_id
    chunk_size: int | None = None  # the memory chunk (queries evaluated at once); None: all of them
    embed_init: str = "normal"
    num_bins: int | None = None  # position ids 0..num_bins-1; None: all but the time steps and the pad
    chunk: int | None = None  # the model window (tokens a position may read); None: the whole input
    arch: str = "gpt"  # the core, one of orbitlaw.models.architectures.ARCHITECTURES
    window_end: str = "planet"  # model windows end at a planet's token or at the step's last
    window_loss: str = "all"  # a model window's loss: every position, or the last prediction only
    inputs: str = "positions"  # a regression model reads positions in AU, their bins' centres in AU, or bin ids
    outputs: str = "positions"  # ... predicts the next position in AU (MSE), or its bins (cross-entropy)
    bin_lo: float = TOKENS.lo  # the bins' range in AU (num_bins of them: position_bins)
    bin_hi: float = TOKENS.hi

    def validate(self) -> None:
        at_least(self, 1, "vocab_size", "block_size", "n_layer", "n_head", "n_embd", "window")
        if self.attention not in ATTENTIONS:
            raise ValueError(f"unknown attention {self.attention!r}; choose one of {', '.join(ATTENTIONS)}")
        positive(self, "p")
        if self.embed_init not in ("normal", "fourier"):
            raise ValueError(f"unknown embedding init {self.embed_init!r}; choose normal or fourier")
        if not 1 <= self.position_bins <= self.vocab_size:
            raise ValueError(f"num_bins must be in 1..vocab_size ({self.vocab_size}), got {self.position_bins}")
        core = architectures.get(self.arch)
        if self.pos not in ("learned", "rope", "none"):
            raise ValueError(f"unknown position encoding {self.pos!r}; choose learned, rope or none")
        if self.pos == "rope" and not core.has_attention:
            raise ValueError(f"rope rotates attention queries and keys; a {self.arch} model has none (use none)")
        if self.n_embd % self.n_head:
            raise ValueError(f"n_embd {self.n_embd} is not divisible by n_head {self.n_head}")
        if self.pos == "rope" and (self.n_embd // self.n_head) % 2:
            raise ValueError("rope needs an even head dimension")
        if self.window_end not in WINDOW_ENDS:
            raise ValueError(f"unknown window end {self.window_end!r}; choose {' or '.join(WINDOW_ENDS)}")
        if self.window_loss not in WINDOW_LOSSES:
            raise ValueError(f"unknown window loss {self.window_loss!r}; choose {' or '.join(WINDOW_LOSSES)}")
        if (self.window_end, self.window_loss) != ("planet", "all") and not (self.regression and self.chunk):
            raise FieldError(message="`window_end` and `window_loss` choose how a chunked regression model is "
                             "trained (`chunk_steps`)")
        for name, allowed in (("inputs", INPUTS), ("outputs", READOUTS)):
            if getattr(self, name) not in allowed:
                raise ValueError(f"unknown {name} {getattr(self, name)!r}; choose {', '.join(allowed)}")
            if getattr(self, name) != "positions" and not self.regression:
                raise ValueError(f"{name}={getattr(self, name)!r} is for a regression model (a token model reads "
                                 "and predicts bins)")
        if not self.bin_hi > self.bin_lo:
            raise ValueError(f"bin range must have bin_hi > bin_lo, got [{self.bin_lo}, {self.bin_hi})")
        if self.chunk is not None and not 1 <= self.chunk <= self.block_size:
            raise FieldError("chunk", f"must be between 1 and block_size ({self.block_size}), got {self.chunk}")

    @property
    def position_bins(self) -> int:
        """How many ids (0..position_bins-1) are position bins: num_bins, or all but the time steps and the pad."""
        return self.num_bins if self.num_bins is not None else self.vocab_size - _SPECIAL_IDS

    def bin_ids(self, positions: torch.Tensor) -> torch.Tensor:
        """Bin ids (int64, same shape) of positions in AU, as ``orbitlaw.orbits.tokenizer`` bins them:
        floor((x - bin_lo) / width) clipped to 0..position_bins - 1. A non-finite position (a padded step) reads
        as 0 AU, as the training batches read it."""
        width = (self.bin_hi - self.bin_lo) / self.position_bins
        ids = torch.floor((torch.nan_to_num(positions.double(), nan=0.0) - self.bin_lo) / width)
        return ids.clamp(0, self.position_bins - 1).long()

    def bin_centres(self, ids: torch.Tensor) -> torch.Tensor:
        """Positions in AU (float32) of the centres of bin ``ids``."""
        width = (self.bin_hi - self.bin_lo) / self.position_bins
        return (self.bin_lo + (ids.double() + 0.5) * width).float()

    def to_dict(self) -> dict:
        return asdict(self)


FOURIER_HEAD_RMS = 0.8  # RMS of the head's bin rows under embed_init="fourier" (the normal init: 0.02)


def fourier_features(num_bins: int, d: int) -> torch.Tensor:
    """(num_bins, d) float32 sin/cos features of the bin centres u = (k + 1/2) / num_bins in (0, 1), at d / 2
    frequencies spaced geometrically from 1/2 to num_bins / 4 cycles over the tokeniser's range (periods from
    200 AU down to 4 bins for the reference 7000 bins over 100 AU); each column has RMS 1/sqrt(2)."""
    u = (torch.arange(num_bins, dtype=torch.float64) + 0.5) / num_bins
    freqs = torch.logspace(math.log10(0.5), math.log10(num_bins / 4), d // 2, dtype=torch.float64)
    angles = 2 * math.pi * u[:, None] * freqs[None, :]
    out = torch.zeros(num_bins, d, dtype=torch.float64)
    out[:, 0:2 * (d // 2):2], out[:, 1:2 * (d // 2):2] = angles.sin(), angles.cos()
    return out.float()


class GPT(nn.Module):
    """The sequence model over (x, y) pair tokens; ``forward(tokens, targets=None) -> (logits, loss)``. Named
    after its default core: ``config.arch`` picks any core of ``orbitlaw.models.architectures``."""

    def __init__(self, config: GPTConfig):
        super().__init__()
        config.validate()
        self.config = config
        d = config.n_embd
        if config.regression and config.inputs in ("positions", "centres"):
            self.wte = nn.Linear(2, d, bias=config.bias)
        else:  # token ids, or a regression model's bin ids (position bins only)
            rows = config.position_bins if config.regression else config.vocab_size
            self.wte_x = nn.Embedding(rows, d)
            self.wte_y = nn.Embedding(rows, d)
            self.in_proj = nn.Linear(2 * d, d, bias=config.bias)
        if config.pos == "learned":
            self.wpe = nn.Embedding(config.block_size, d)
        self.drop = nn.Dropout(config.dropout)
        core = architectures.get(config.arch)
        self.blocks = nn.ModuleList(core.block(config) for _ in range(config.n_layer))
        self.ln_f = nn.LayerNorm(d, bias=config.bias)
        out = (2 * config.vocab_size if not config.regression else
               2 * config.position_bins if config.outputs == "bins" else 2)
        self.head = nn.Linear(d, out, bias=config.bias)
        self.apply(self._init_weights)
        for name, param in self.named_parameters():  # GPT-2 scaled init of residual projections
            if name.endswith("c_proj.weight"):
                nn.init.normal_(param, mean=0.0, std=0.02 / math.sqrt(2 * config.n_layer))
        for module in self.modules():  # initialisations the generic one above overwrote (models.recurrent)
            if hasattr(module, "post_init"):
                module.post_init()
        if config.embed_init == "fourier" and "bins" in self._bin_parts():
            self._fourier_init()

    def _bin_parts(self) -> tuple[str, ...]:
        """Which ends of the model are bins: ("bins", "bins") for a token model, else the regression model's
        (inputs, outputs)."""
        c = self.config
        return ("bins", "bins") if not c.regression else (c.inputs, c.outputs)

    @torch.no_grad()
    def _fourier_init(self, head_rms: float = FOURIER_HEAD_RMS):
        """Start the model as a readable map of positions: the x coordinate in the first half of the residual
        stream, y in the second.

        Bin rows of ``wte_x`` are [F(bin), 0] and of ``wte_y`` [0, F(bin)], with F the (n_embd / 2)-wide
        Fourier features of the bin centre (RMS 0.02, as the normal init); ``in_proj`` starts as the block
        identity taking x's half from wte_x and y's half from wte_y; the head's x rows read [F(bin), 0] and
        its y rows [0, F(bin)], scaled to RMS ``head_rms`` so that a residual carrying F(x) gives logits
        peaked at x. Nearby bins start with nearby vectors, so the model does not have to discover the order
        of 7000 bins one by one. Time-step and pad rows keep the normal init. A regression model with bins at
        one end only starts that end this way.
        """
        c = self.config
        half = c.n_embd // 2
        bins = c.position_bins
        feats = fourier_features(bins, half)
        inputs, outputs = self._bin_parts()
        stride = self.head.out_features // 2  # head rows per coordinate
        for coord in (0, 1):
            if inputs == "bins":
                table = (self.wte_x, self.wte_y)[coord]
                table.weight[:bins] = 0.0
                table.weight[:bins, coord * half:(coord + 1) * half] = feats * (0.02 * math.sqrt(2))
            if outputs == "bins":
                rows = slice(coord * stride, coord * stride + bins)
                self.head.weight[rows] = 0.0
                self.head.weight[rows, coord * half:(coord + 1) * half] = feats * (head_rms * math.sqrt(2))
        if inputs == "bins":
            eye = torch.eye(half)
            self.in_proj.weight[:half, :half] = eye  # x's half of wte_x -> residual[:half]
            self.in_proj.weight[half:2 * half, c.n_embd + half:c.n_embd + 2 * half] = eye  # y's half of wte_y

    @staticmethod
    def _init_weights(module):
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())

    @classmethod
    def from_pretrained(cls, path_or_repo, **hub_options) -> GPT:
        """The model of a run directory, a pretrained folder or a Hugging Face Hub repo id, its weights checked
        against their checksum, in eval mode (:func:`orbitlaw.models.hub.from_pretrained`)."""
        from orbitlaw.models import hub

        return hub.from_pretrained(path_or_repo, **hub_options)[0]

    def save_pretrained(self, directory, run=None):
        """Write this model as a pretrained folder (weights, checksums, config, model card), with the record of
        the run directory ``run`` if given (:func:`orbitlaw.models.hub.save_pretrained`)."""
        from orbitlaw.models import hub

        return hub.save_pretrained(self, directory, run)

    def push_to_hub(self, repo_id: str, run=None, **hub_options) -> str:
        """Upload this model's pretrained folder to the Hub repo ``repo_id``; returns the commit's URL
        (:func:`orbitlaw.models.hub.push_to_hub`)."""
        from orbitlaw.models import hub

        return hub.push_to_hub(self, repo_id, run, **hub_options)

    def hidden_states(self, tokens: torch.Tensor, at: torch.Tensor | None = None) -> list[torch.Tensor]:
        """Residual stream after the embedding and after each block: n_layer + 1 tensors (B, T, d), or
        (B, P, d) at just the P positions ``at`` (sorted, unique int64): a model with a model window then reads
        only the windows ending there. It reads an input longer than its model window window by window (module
        docstring)."""
        L = self.config.chunk
        if L is not None and tokens.shape[1] > L:
            return self._model_window_states(tokens, L, at)
        states = self._states(tokens)
        return states if at is None else [s[:, at] for s in states]

    def _model_window_states(self, tokens: torch.Tensor, L: int, at: torch.Tensor | None) -> list[torch.Tensor]:
        """The states of a model with a model window of L tokens: each position read through the window that
        ends there (module docstring)."""
        B, T = tokens.shape[:2]
        ends = torch.arange(T, device=tokens.device) if at is None else at.to(tokens.device)
        prefix, tail_ends = ends[ends < L - 1], ends[ends >= L - 1]  # positions 0 .. L - 2 read a prefix
        head = self._states(tokens[:, :L - 1]) if len(prefix) else None
        P = len(tail_ends)
        if P == 0:
            return [h[:, prefix] for h in head]
        windows = tokens.unfold(1, L, 1).movedim(-1, 2)[:, tail_ends - (L - 1)]  # (B, P, L, 2): ending at e
        tails = self._states(windows.reshape(B * P, L, *tokens.shape[2:]))
        out = []
        for layer, tail in enumerate(tails):
            last = tail[:, -1].reshape(B, P, -1)
            out.append(last if head is None else torch.cat([head[layer][:, prefix], last], dim=1))
        return out

    def _states(self, tokens: torch.Tensor) -> list[torch.Tensor]:
        c = self.config
        T = tokens.shape[1]
        if c.pos == "learned" and T > c.block_size:
            raise ValueError(f"context of {T} tokens is longer than the learned-position block "
                             f"{c.block_size}; use --pos rope for longer contexts")
        if c.regression and c.inputs == "centres":  # positions in AU, snapped to their bins' centres
            x = self.wte(c.bin_centres(c.bin_ids(tokens)).to(self.wte.weight.dtype))
        elif c.regression and c.inputs == "positions":
            x = self.wte(tokens.to(self.wte.weight.dtype))
        else:
            if c.regression:  # positions in AU, read as their bins
                tokens = c.bin_ids(tokens)
            elif tokens.dtype not in (torch.int64, torch.int32):
                raise ValueError(f"tokens must be integer ids, got {tokens.dtype}")
            x = self.in_proj(torch.cat([self.wte_x(tokens[..., 0]), self.wte_y(tokens[..., 1])], dim=-1))
        rope = None
        if c.pos == "learned":
            x = x + self.wpe(torch.arange(T, device=tokens.device))
        elif c.pos == "rope":
            rope = rope_tables(T, c.n_embd // c.n_head, c.rope_base, tokens.device, x.dtype)
        x = self.drop(x)
        states = [x]
        for block in self.blocks:
            x = block(x, rope)
            states.append(x)
        return states

    def forward(self, tokens: torch.Tensor, targets: torch.Tensor | None = None):
        """tokens (B, T, 2) -> logits (B, T, 2, vocab) (regression: positions (B, T, 2) in AU, or with
        ``outputs="bins"`` logits (B, T, 2, position_bins)), loss or None.

        A regression model with bin outputs given ``targets`` computes the logits only where a target is
        finite (e.g. a window's last prediction) and returns None for them: the head over 2 x 7000 bins is most
        of such a model's cost."""
        x = self.ln_f(self.hidden_states(tokens)[-1])
        c = self.config
        if c.regression and c.outputs == "bins" and targets is not None:
            keep = torch.isfinite(targets).all(dim=-1)
            return None, self.loss(self._logits(x[keep]), targets[keep])
        out = self._logits(x)
        loss = None if targets is None else self.loss(out, targets)
        return out, loss

    def _logits(self, x: torch.Tensor) -> torch.Tensor:
        out = self.head(x)
        c = self.config
        if not c.regression or c.outputs == "bins":
            out = out.view(*out.shape[:-1], 2, self.head.out_features // 2)
        return out

    def positions(self, out: torch.Tensor) -> torch.Tensor:
        """A regression model's predicted positions (..., 2) in AU from its output: the output itself, or with
        bin outputs the centre of each coordinate's most likely bin."""
        if self.config.outputs == "bins":
            return self.config.bin_centres(out.argmax(dim=-1))
        return out

    def loss(self, out: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """Mean cross-entropy over both coordinates of non-pad targets (regression: MSE (AU^2) over finite
        ones, or with bin outputs the cross-entropy of their bins)."""
        c = self.config
        if c.regression and c.outputs == "bins":
            keep = torch.isfinite(targets).all(dim=-1)
            return F.cross_entropy(out[keep].float().reshape(-1, out.shape[-1]), c.bin_ids(targets[keep]).reshape(-1))
        if c.regression:
            keep = torch.isfinite(targets)
            return F.mse_loss(out.float()[keep], targets[keep].float())
        ignore = -100 if c.pad_id is None else c.pad_id
        return F.cross_entropy(out.float().reshape(-1, c.vocab_size), targets.reshape(-1), ignore_index=ignore)
