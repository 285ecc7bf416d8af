"""``orbitlaw probe``: force probes of a pretrained run (fine-tuned head, or linear probes per layer) and
the oracle baselines (kNN on the true state, Newton's law), all writing the same result layout."""

from __future__ import annotations

import json
import sys

from orbitlaw.commands._shared import add_quiet, command
from orbitlaw.discovery.probes import registry

DESCRIPTION = (
    "Fine-tune a pretrained run with a fresh linear force head on a few labels and predict the "
    "force on held-out planet steps (PROBE/predictions.csv, PROBE/metrics.json; PROBE/force_arrows.png for "
    "force vectors on solar-system data). --oracle knn|true-law gives the baselines through the same path "
    "(no --run); --linear writes per-layer ridge probes of the frozen run (PROBE/linear_probes.json). "
    "--protocol reference fine-tunes as the reference code does (raw |F|, per-sequence loss, its label draw). "
    "A killed fine-tune resumes from its checkpoint when the same command is run again.")


def add_parser(sub) -> None:
    p = command(sub, "probe", run, help="probe a pretrained run (or an oracle) for the gravitational force",
                description=DESCRIPTION)
    p.add_argument("--run", metavar="RUN", help="pretrained run directory (orbitlaw train)")
    p.add_argument("--data", required=True, metavar="DIR", help="dataset with forces (two-body, solar-system, nbody)")
    p.add_argument("--target", choices=("force-magnitude", "force-vector", "acceleration-magnitude"),
                   default="force-magnitude",
                   help="force-magnitude (default, |F| on the planet, M_sun AU/yr^2), force-vector, or "
                   "acceleration-magnitude (the planet's |a| = |F|/m1, AU/yr^2: CSV columns a_true, a_pred)")
    p.add_argument("--out", required=True, metavar="PROBE", help="output directory")
    mode = p.add_mutually_exclusive_group()
    for probe in registry.PROBES.values():
        if probe.choices:
            mode.add_argument(probe.flag, choices=probe.choices, help=probe.help)
        elif probe.flag:
            mode.add_argument(probe.flag, action="store_true", help=probe.help)
    p.add_argument("--split", default="train", help="dataset split (default train)")
    p.add_argument("--steps", type=int, default=10000, help="fine-tuning steps (reference 10000)")
    p.add_argument("--batch", type=int, default=64, help="sequences per step (reference 64)")
    p.add_argument("--lr", type=float, default=None, help="learning rate (default 6e-4 magnitude, 2e-4 vector)")
    p.add_argument("--schedule", choices=("constant", "cosine"), default="constant",
                   help="fine-tune lr schedule: constant (default, the reference's) or a cosine decay to 0")
    p.add_argument("--protocol", choices=("orbitlaw", "reference"), default="orbitlaw",
                   help="fine-tune protocol: orbitlaw (default: log-scaled target, loss averaged over all "
                   "labels, PCG64 label draw) or reference (Vafa et al.: raw |F|, loss averaged per sequence, "
                   "numpy RandomState(seed) label draw; see discovery.probes.probe)")
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
    p.add_argument("--window-inputs", choices=("positions", "bins"), default="positions",
                   help="knn-window / mlp-window: the window's positions as they are (default) or snapped to the "
                        "centres of the dataset's tokeniser bins")
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
    add_quiet(p)
    p.set_defaults(get_default=p.get_default)  # which flags were given: the clash check of the chosen probe


def run(args) -> int:
    """The probe the flags choose (:func:`orbitlaw.discovery.probes.registry.chosen`) into ``--out``, holding the
    output's lock: a second orbitlaw process writing the same output is refused (one line) instead of
    interleaving its files. A flag that only other probes read is refused. A probe that fails (a full disk
    included) leaves ``--out`` as it was, unless it wrote a state the same command resumes from (a fine-tune
    checkpoint, finished inductive-bias datasets)."""
    from pathlib import Path

    from orbitlaw.models.train import TrainingStopped
    from orbitlaw.provenance import OutputLock, undo_on_failure

    probe = registry.chosen(args)
    out = Path(args.out)
    with OutputLock.beside(out, f"probe output {out}"), \
            undo_on_failure(out, resumable=lambda: probe.resumable(out)):
        given = {dest: getattr(args, dest) for dest in args.flags
                 if hasattr(args, dest) and getattr(args, dest) != args.get_default(dest)}
        clash = registry.clashes(probe, given, args.flags)
        if clash:
            raise ValueError(clash)
        args.flags = {**args.flags, **{name: args.flags[dest] for name, dest in probe.dests.items()}}
        try:
            result = probe.execute(probe.from_args(args), progress=not args.quiet)
        except TrainingStopped as exc:
            print(f"orbitlaw probe: {exc}", file=sys.stderr)
            return exc.exit_code
    print(json.dumps(probe.printed(result)))
    return 0
