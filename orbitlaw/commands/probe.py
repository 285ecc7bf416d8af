"""``orbitlaw probe``: force probes of a pretrained run (fine-tuned head, or linear probes per layer) and
the oracle baselines (kNN on the true state, Newton's law), all writing the same result layout."""

from __future__ import annotations

import json
import sys


def add_parser(sub) -> None:
    p = sub.add_parser(
        "probe", help="probe a pretrained run (or an oracle) for the gravitational force",
        description="Fine-tune a pretrained run with a fresh linear force head on a few labels and predict the "
        "force on held-out planet steps (PROBE/predictions.csv, PROBE/metrics.json; PROBE/force_arrows.png for "
        "force vectors on solar-system data). --oracle knn|true-law gives the baselines through the same path "
        "(no --run); --linear writes per-layer ridge probes of the frozen run (PROBE/linear_probes.json). "
        "--protocol reference fine-tunes as the reference code does (raw |F|, per-sequence loss, its label draw). "
        "A killed fine-tune resumes from its checkpoint when the same command is run again.")
    p.add_argument("--run", metavar="RUN", help="pretrained run directory (orbitlaw train)")
    p.add_argument("--data", required=True, metavar="DIR", help="dataset with forces (two-body, solar-system, nbody)")
    p.add_argument("--target", choices=("force-magnitude", "force-vector", "acceleration-magnitude"),
                   default="force-magnitude",
                   help="force-magnitude (default, |F| on the planet, M_sun AU/yr^2), force-vector, or "
                   "acceleration-magnitude (the planet's |a| = |F|/m1, AU/yr^2: CSV columns a_true, a_pred)")
    p.add_argument("--out", required=True, metavar="PROBE", help="output directory")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--oracle", choices=("knn", "true-law", "knn-window", "mlp-window"),
                      help="a baseline instead of a run: knn on the true state (the reference's), Newton's "
                           "law, or k-NN / an MLP on the raw positions a W-step chunked model reads")
    mode.add_argument("--linear", action="store_true", help="linear probes of every layer of the frozen run")
    mode.add_argument("--inductive-bias", action="store_true",
                      help="the reference's inductive-bias probe: fine-tune on many small random functions of the "
                           "true state and compare the extrapolations with oracles' on the state "
                           "(PROBE/inductive_bias.json and .png; see discovery.inductive_bias)")
    p.add_argument("--split", default="train", help="dataset split (default train)")
    p.add_argument("--steps", type=int, default=10000, help="fine-tuning steps (reference 10000)")
    p.add_argument("--batch", type=int, default=64, help="sequences per step (reference 64)")
    p.add_argument("--lr", type=float, default=None, help="learning rate (default 6e-4 magnitude, 2e-4 vector)")
    p.add_argument("--schedule", choices=("constant", "cosine"), default="constant",
                   help="fine-tune lr schedule: constant (default, the reference's) or a cosine decay to 0")
    p.add_argument("--protocol", choices=("orbitlaw", "reference"), default="orbitlaw",
                   help="fine-tune protocol: orbitlaw (default: log-scaled target, loss averaged over all "
                   "labels, PCG64 label draw) or reference (Vafa et al.: raw |F|, loss averaged per sequence, "
                   "numpy RandomState(seed) label draw; see discovery.probe)")
    p.add_argument("--scaling", choices=("log", "linear", "raw"), default=None,
                   help="target scaling of the force head (default log under --protocol orbitlaw; "
                   "--protocol reference fixes it to raw)")
    p.add_argument("--train-sequences", type=int, default=None,
                   help="first N sequences, labelled at every planet step (default 90%% of the split)")
    p.add_argument("--heldout-sequences", type=int, default=None, help="the next M sequences (default: the rest)")
    p.add_argument("--labels-per-heldout", type=int, default=2, help="revealed steps per held-out sequence")
    p.add_argument("--labels-per-sequence", type=int, default=None, metavar="L",
                   help="hold out every sequence with L revealed steps (Solar System protocol: 10)")
    p.add_argument("--windows-per-sequence", type=int, default=None, metavar="K",
                   help="a windowed run (--chunk-steps): each fine-tuning step reads K of a sequence's labelled "
                        "steps, drawn per step, each through its own window (default: all); a whole-sequence "
                        "run reads them all from one pass")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--checkpoint-every", type=int, default=500, metavar="K")
    p.add_argument("--eval-batch", type=int, default=32, help="sequences per prediction batch")
    p.add_argument("--eval-train-sequences", type=int, default=256,
                   help="training sequences also predicted, for the fit metrics")
    p.add_argument("--near-train", type=int, default=5000, metavar="K",
                   help="held-out steps marked near_train (nearest to training states; reference 5000)")
    p.add_argument("--context", type=int, default=None, help="oracles: tokens per sequence (default: all)")
    p.add_argument("--neighbors", type=int, default=2, help="kNN oracle: neighbours (reference 2)")
    p.add_argument("--window-steps", type=int, default=3, metavar="W",
                   help="knn-window / mlp-window: steps of raw positions the oracle reads (default 3)")
    p.add_argument("--window-end", choices=("planet", "step"), default="planet",
                   help="knn-window / mlp-window: the window ends at the planet's token (default) or at the "
                        "step's last token, as a model trained with --window-end step reads it")
    p.add_argument("--sequences", type=int, default=2000,
                   help="linear probes: at most this many training and held-out sequences")
    p.add_argument("--steps-per-sequence", type=int, default=10, help="linear probes: planet steps per sequence")
    ib = p.add_argument_group("inductive-bias probe (--inductive-bias)")
    ib.add_argument("--datasets", type=int, default=None, help="random-function datasets (default 10; "
                    "reference 100)")
    ib.add_argument("--dataset-sequences", type=int, default=None, help="sequences per dataset (default 32; "
                    "reference 100)")
    ib.add_argument("--iterations", type=int, default=None, help="full-batch fine-tuning steps per dataset "
                    "(default and reference 100)")
    ib.add_argument("--samples", type=int, default=None, help="sampled steps compared pairwise per dataset "
                    "(default 1000; reference 2000)")
    ib.add_argument("--reference-sizes", action="store_true",
                    help="the reference's sizes: 100 datasets of 100 sequences, 100 iterations, 2000 samples")
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto",
                   help="where the model runs (default: CUDA when available)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=run)


def run(args) -> int:
    """One probe (or oracle, linear probes, inductive bias) into ``--out``, holding the output's lock: a second
    orbitlaw process writing the same output is refused (one line) instead of interleaving its files. A probe
    that fails (a full disk included) leaves ``--out`` as it was, unless it wrote a state the same command
    resumes from (a fine-tune checkpoint, finished inductive-bias datasets)."""
    from pathlib import Path

    from orbitlaw.provenance import OutputLock, undo_on_failure

    out = Path(args.out)
    with OutputLock.beside(out, f"probe output {out}"), \
            undo_on_failure(out, resumable=lambda: _resumable(out)):
        return _run(args)


def _resumable(out) -> bool:
    """Whether ``out`` holds what a re-run of the same probe continues from."""
    from orbitlaw.models import checkpoint

    return out.is_dir() and (checkpoint.latest(out) is not None or any((out / "datasets").glob("*.npz")))


def _run(args) -> int:
    if args.windows_per_sequence is not None and (args.oracle or args.linear or args.inductive_bias):
        raise ValueError("--windows-per-sequence is for the fine-tuned probe of a run")
    if args.inductive_bias:
        return _inductive_bias(args)
    if args.protocol != "orbitlaw" and args.linear:
        raise ValueError(f"--protocol {args.protocol} is for the fine-tuned probe and the oracles; --linear fits "
                         "ridge probes of the frozen run")
    if args.window_end != "planet" and not args.oracle:
        raise ValueError("--window-end is for the window oracles; a run's probes read where its training windows "
                         "ended (its config)")
    if args.oracle and args.scaling is not None:
        raise ValueError(f"--scaling is for the fine-tuned probe; --oracle {args.oracle} predicts forces directly")
    if args.oracle:
        if args.run:
            raise ValueError("--oracle needs no --run (it uses the true state, not a model)")
        from orbitlaw.discovery.oracle import OracleConfig, run_oracle

        result = run_oracle(OracleConfig(
            oracle=args.oracle, data=args.data, out=args.out, target=args.target, split=args.split,
            context=args.context, train_sequences=args.train_sequences, heldout_sequences=args.heldout_sequences,
            labels_per_heldout=args.labels_per_heldout, labels_per_sequence=args.labels_per_sequence,
            neighbors=args.neighbors, window_steps=args.window_steps, window_end=args.window_end, seed=args.seed,
            near_train=args.near_train,
            protocol=args.protocol))
        return _report(result)
    if not args.run:
        raise ValueError("--run RUN is required (or choose --oracle knn|true-law)")
    if args.context is not None:
        raise ValueError("--context is for oracles; a run's probe uses the run's context")
    if args.linear:
        from orbitlaw.discovery.linear_probe import LinearProbeConfig, linear_probes

        result = linear_probes(LinearProbeConfig(
            run=args.run, data=args.data, out=args.out, split=args.split, train_sequences=args.train_sequences,
            heldout_sequences=args.heldout_sequences, sequences=args.sequences,
            steps_per_sequence=args.steps_per_sequence, batch=args.eval_batch, seed=args.seed, device=args.device),
            progress=not args.quiet)
        print(json.dumps(result["best"]))
        return 0
    from orbitlaw.discovery.probe import ProbeConfig, finetune
    from orbitlaw.models.train import TrainingStopped

    cfg = ProbeConfig(run=args.run, data=args.data, out=args.out, target=args.target, split=args.split,
                      steps=args.steps, batch=args.batch, lr=args.lr, schedule=args.schedule,
                      train_sequences=args.train_sequences,
                      heldout_sequences=args.heldout_sequences, labels_per_heldout=args.labels_per_heldout,
                      labels_per_sequence=args.labels_per_sequence,
                      windows_per_sequence=args.windows_per_sequence, scaling=args.scaling,
                      protocol=args.protocol, seed=args.seed,
                      checkpoint_every=args.checkpoint_every, eval_batch=args.eval_batch,
                      eval_train_sequences=args.eval_train_sequences, near_train=args.near_train,
                      device=args.device)
    try:
        result = finetune(cfg, progress=not args.quiet)
    except TrainingStopped as exc:
        print(f"orbitlaw probe: {exc}", file=sys.stderr)
        return exc.exit_code
    return _report(result)


def _inductive_bias(args) -> int:
    from orbitlaw.discovery.inductive_bias import REFERENCE_SIZES, InductiveBiasConfig, inductive_bias

    clashes = [flag for flag, given in (("--target", args.target != "force-magnitude"),
                                        ("--scaling", args.scaling is not None),
                                        ("--protocol", args.protocol != "orbitlaw"),
                                        ("--context", args.context is not None)) if given]
    if clashes:
        raise ValueError(f"{clashes[0]} is for the force probe; --inductive-bias fits random functions of the state")
    if not args.run:
        raise ValueError("--inductive-bias needs --run RUN")
    given = {"datasets": args.datasets, "sequences": args.dataset_sequences, "iterations": args.iterations,
             "samples": args.samples}
    given = {k: v for k, v in given.items() if v is not None}
    if args.reference_sizes and given:
        raise ValueError("--reference-sizes sets --datasets, --dataset-sequences, --iterations and --samples; "
                         "give either")
    sizes = dict(REFERENCE_SIZES) if args.reference_sizes else given
    extra = {k: v for k, v in (("labels_per_sequence", args.labels_per_sequence), ("lr", args.lr)) if v is not None}
    doc = inductive_bias(InductiveBiasConfig(
        run=args.run, data=args.data, out=args.out, split=args.split, seed=args.seed, batch=args.eval_batch,
        device=args.device, **sizes, **extra), progress=not args.quiet)
    print(json.dumps({"kind": "inductive-bias", "scores": doc["scores"], "target_scores": doc["target_scores"]}))
    return 0


def _report(result: dict) -> int:
    m = result["metrics"]["heldout_unlabelled"]
    print(json.dumps({"kind": result["kind"], "target": result["target"], "heldout_unlabelled": m}))
    return 0
