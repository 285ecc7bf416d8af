"""``orbitlaw run``: the whole study in one command, ending in STUDY/report.md and STUDY/results.json."""

from __future__ import annotations

import json

from orbitlaw.commands._shared import add_quiet, command, default_workers


def add_parser(sub) -> None:
    from orbitlaw.study.presets import STUDY_PRESETS, describe  # sizes only: no torch

    p = command(
        sub, "run", run, help="the whole study: simulate, train, evaluate, probe, discover, report",
        description="Simulate the pretraining and probe sets, pretrain one GPT per attention, evaluate it "
        "(with length extrapolation), fine-tune force probes, run symbolic regression on their predictions "
        "and on a k-nearest-neighbour oracle, fold in the LLM baselines (scored from the reference answers or "
        "earlier `orbitlaw llm run` directories; never a network call) and write STUDY/report.md and "
        "STUDY/results.json. Every stage is cached by its config: a killed study resumes where it was.")
    p.add_argument("--preset", required=True, choices=list(STUDY_PRESETS), help=describe())
    p.add_argument("--protocol", default="orbitlaw", choices=["orbitlaw", "reference"],
                   help="orbitlaw (default): the toolkit's probe and symbolic regression; reference: Vafa et "
                   "al.'s protocol in every stage (docs/departures.md)")
    p.add_argument("--precision", default=None, choices=["bf16", "fp32"],
                   help="CUDA training precision (default: fp32 under --protocol reference, bf16 otherwise)")
    p.add_argument("--show-config", action="store_true",
                   help="print the fully resolved configuration as JSON and exit (no stage runs)")
    p.add_argument("--attention", default=None, metavar="A,B,...",
                   help="attention variants to compare (default: the preset's, softmax,lssar; for path: the "
                   "attentions of its rungs)")
    p.add_argument("--arch", default=None, metavar="A,B,...",
                   help="baseline architectures trained, probed and reported beside the GPTs: lstm, rnn, mamba "
                        "(default: the preset's; smoke has lstm, the others none)")
    p.add_argument("--out", default=None, metavar="STUDY", help="the study directory (required unless --show-config)")
    p.add_argument("--seed", type=int, default=0, help="added to every seed of the preset")
    p.add_argument("--llm-reference", default="auto", metavar="DIR",
                   help="a directory holding the reference study's llm-prompts/ and llm-predictions/ (from its "
                   "public repository: docs/commands/llm.md), whose recorded LLM answers are scored into the report; "
                   "'auto' (the default) uses one only where a source checkout has it beside it "
                   "(../shared/reference/vafa2025) and otherwise skips, 'none' always skips")
    p.add_argument("--llm-results", default="", metavar="DIR,...",
                   help="`orbitlaw llm run` output directories to include (their cached answers)")
    p.add_argument("--workers", type=int, default=default_workers(),
                   help="processes for simulation, symbolic regression and the controls' models (side by side)")
    p.add_argument("--nproc-per-node", type=int, default=1,
                   help="train each model with torchrun on this many processes (GPUs)")
    p.add_argument("--log-to", choices=("none", "tensorboard", "wandb"), default="none",
                   help="the training stages also send their metrics to TensorBoard or Weights & Biases")
    add_quiet(p, "bars")


def run(args) -> int:
    from orbitlaw.study.pipeline import run_study

    if args.workers < 1 or args.nproc_per_node < 1:
        raise ValueError("--workers and --nproc-per-node must be >= 1")
    attentions = [a.strip() for a in args.attention.split(",")] if args.attention else None
    archs = [a.strip() for a in args.arch.split(",") if a.strip()] if args.arch is not None else None
    if args.show_config:
        from orbitlaw.study.presets import study_config

        print(json.dumps(study_config(args.preset, attentions, args.seed, args.protocol, args.precision, archs),
                         indent=1))
        return 0
    if args.out is None:
        raise ValueError("--out STUDY is required (only --show-config runs without it)")
    reference = None if args.llm_reference == "none" else args.llm_reference
    extra = [d.strip() for d in args.llm_results.split(",") if d.strip()]
    results = run_study(args.preset, args.out, attentions=attentions, seed=args.seed, llm_reference=reference,
                        llm_results=extra, workers=args.workers, nproc=args.nproc_per_node,
                        progress=not args.quiet, protocol=args.protocol, precision=args.precision,
                        log_to=args.log_to, archs=archs)
    print(json.dumps({m["attention"]: {"val_loss": m["val_loss"], "probe_r2": m["probe_r2"],
                                       "verdict": (m["law"] or {}).get("verdict"),
                                       "newtonian": (m["law"] or {}).get("newtonian")} for m in results["models"]}))
    print(f"report: {args.out}/report.md")
    return 0
