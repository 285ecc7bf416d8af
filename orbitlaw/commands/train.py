"""``orbitlaw train``: pretrain a GPT on an orbit dataset (single process or under torchrun)."""

from __future__ import annotations

import sys

from orbitlaw.commands._choices import ARCHITECTURES, ATTENTIONS, describe_attentions
from orbitlaw.commands._shared import config_fields


def add_parser(sub) -> None:
    p = sub.add_parser("train", help="pretrain a GPT on an orbit dataset",
                       description="Pretrain a GPT by next-token prediction. Under `torchrun "
                       "--nproc_per_node N` the same command trains with DistributedDataParallel.")
    p.add_argument("--data", required=True, metavar="DIR", help="dataset directory (orbitlaw simulate)")
    p.add_argument("--config", default=None, metavar="FILE.json",
                   help="every training setting from a JSON object of TrainConfig fields (as RUN/config.json's "
                        "'train' holds them; --data and --out still come from the command line, no other "
                        "training flag may be given); how `orbitlaw run` hands a whole configuration to torchrun")
    p.add_argument("--preset", default=None, choices=("tiny", "small", "gpt-109m", "control"),
                   help="model size (control: the positive control's 25k-parameter regression GPT, "
                        "continuous positions in AU, MSE)")
    p.add_argument("--attention", default="softmax", choices=tuple(ATTENTIONS), metavar="NAME",
                   help=f"attention variant (default softmax): {describe_attentions()}")
    p.add_argument("--p", type=float, default=15.0,
                   help="re-weighting power of " + ", ".join(n for n, (_, uses_p) in ATTENTIONS.items() if uses_p)
                        + " (default 15)")
    p.add_argument("--arch", choices=tuple(ARCHITECTURES), default="gpt",
                   help="sequence-model core: transformer (gpt, default), LSTM, RNN or Mamba blocks between the "
                        "same embeddings and head; every --preset applies to each")
    p.add_argument("--pos", choices=("learned", "rope", "none"), default=None,
                   help="position encoding (default: learned for gpt, none for lstm/rnn/mamba)")
    p.add_argument("--window", type=int, default=None, help="sliding attention window (tokens)")
    p.add_argument("--embed-init", choices=("normal", "fourier"), default=None,
                   help="bin embeddings and head rows: GPT-2 normal init, or Fourier features of the bin "
                        "centre (default: the preset's; tiny uses fourier, small and gpt-109m normal)")
    p.add_argument("--chunk-steps", type=int, default=None, metavar="W",
                   help="regression models: train on windows of W steps (W (N + 1) positions) and read every "
                        "sequence W steps at a time (default: the whole context)")
    p.add_argument("--input-noise", type=float, default=0.0, metavar="SIGMA",
                   help="regression models: Gaussian noise (AU) added to the input positions in training")
    p.add_argument("--window-end", choices=("planet", "step"), default="planet",
                   help="chunked models: training windows end at a planet's token (default) or at the step's "
                        "last token, the star's (the window's last prediction is then a planet's next "
                        "position); the probes read each planet step at that token")
    p.add_argument("--window-loss", choices=("all", "last"), default="all",
                   help="chunked models: the loss covers every window position (default) or only the window's "
                        "last prediction")
    p.add_argument("--out", required=True, metavar="RUN", help="run directory")
    p.add_argument("--max-steps", type=int, default=1000)
    p.add_argument("--checkpoint-every", type=int, default=100, metavar="K")
    p.add_argument("--eval-every", type=int, default=100)
    p.add_argument("--log-every", type=int, default=10)
    p.add_argument("--batch-size", type=int, default=8, help="global batch (sequences per step)")
    p.add_argument("--micro-batch", type=int, default=None, help="per-process micro-batch (accumulation)")
    p.add_argument("--lr", type=float, default=6e-4)
    p.add_argument("--schedule", choices=("constant", "cosine"), default="constant")
    p.add_argument("--warmup-steps", type=int, default=0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--compile", action="store_true", help="torch.compile the model (GPU)")
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto",
                   help="auto (default): each process's own GPU when there are GPUs, else the CPU")
    p.add_argument("--precision", choices=("bf16", "fp32"), default="bf16",
                   help="CUDA forward precision: bf16 autocast (default) or fp32 (the reference's); CPU: fp32")
    p.add_argument("--resume", action="store_true", help="continue the run in --out from its checkpoint")
    p.add_argument("--log-to", choices=("none", "tensorboard", "wandb"), default="none",
                   help="also send the metrics to TensorBoard (RUN/tensorboard/) or Weights & Biases "
                        "(WANDB_MODE=offline works without a network); metrics.jsonl stays the record")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=run)
    p.set_defaults(get_default=p.get_default)  # --config checks that no other setting was given


_NOT_SETTINGS = ("data", "out", "config", "resume", "quiet", "log_to", "func", "command", "get_default",
                 "allow_unchecked")


def _from_file(args):
    import dataclasses
    import json

    from orbitlaw.models.train import TrainConfig

    given = [k for k, v in vars(args).items() if k not in _NOT_SETTINGS and v != args.get_default(k)]
    if given:
        raise ValueError(f"--config holds every training setting; do not also give --{given[0].replace('_', '-')}")
    try:
        settings = json.loads(open(args.config).read())
    except (OSError, json.JSONDecodeError) as exc:
        raise ValueError(f"--config {args.config}: {exc}") from None
    known = {f.name for f in dataclasses.fields(TrainConfig)} - {"data", "out"}
    unknown = sorted(set(settings) - known) if isinstance(settings, dict) else ["(not a JSON object)"]
    if unknown:
        raise ValueError(f"--config {args.config}: unknown training setting {unknown[0]}")
    if "betas" in settings:
        settings["betas"] = tuple(settings["betas"])
    if args.log_to != "none":  # where the metrics also go, not a training setting: allowed beside --config
        settings["log_to"] = args.log_to
    return TrainConfig(data=args.data, out=args.out, **settings)


def _from_flags(args):
    """The TrainConfig of the flags: each flag sets the field its ``dest`` names (the fields without a flag keep
    their defaults); ``--embed-init`` goes to ``model_overrides``."""
    from orbitlaw.models.train import TrainConfig

    if not args.preset:
        raise ValueError("--preset is required (or --config FILE.json with every setting)")
    return TrainConfig(**config_fields(args, TrainConfig,
                                       model_overrides={"embed_init": args.embed_init} if args.embed_init else {}))


def run(args) -> int:
    from orbitlaw.models.train import TrainingStopped, train

    cfg = _from_file(args) if args.config else _from_flags(args)
    try:
        summary = train(cfg, resume=args.resume, progress=not args.quiet)
    except TrainingStopped as exc:
        print(f"orbitlaw train: {exc}", file=sys.stderr)
        return exc.exit_code
    print(f"step {summary['step']}: train loss {summary['train_loss']:.4f}; run in {summary['run']}",
          file=sys.stderr)
    return 0
