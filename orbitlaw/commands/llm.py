"""``orbitlaw llm``: LLM baselines (``run`` a provider's model on two-body prompts, ``score`` stored answers)."""

from __future__ import annotations

import json
import sys

from orbitlaw.commands._choices import LLM_PRESETS, LLM_PROVIDERS
from orbitlaw.validate import at_least


def add_parser(sub) -> None:
    p = sub.add_parser("llm", help="LLM baselines: prompt LLMs for the two-body force, score the answers",
                       description="Ask an LLM for the gravitational force of two-body systems (the prompt of "
                       "Vafa et al. 2025), score its answers and run the symbolic regression on them.")
    llm_sub = p.add_subparsers(dest="llm_command", required=True, metavar="{run,score}")

    r = llm_sub.add_parser("run", help="prompt a model with N two-body systems",
                           description="Prompt a model with N two-body systems; writes DIR/results.json, "
                           "DIR/answers.csv, DIR/forces.png. Keys come only from the environment: "
                           "OPENAI_API_KEY, ANTHROPIC_API_KEY, GEMINI_API_KEY or GOOGLE_API_KEY, and "
                           "ORBITLAW_LLM_API_KEY (or OPENAI_API_KEY) for openai-compatible.")
    r.add_argument("--provider", required=True, help=f"one of {', '.join(LLM_PROVIDERS)}")
    r.add_argument("--model", required=True, metavar="NAME", help="e.g. o3, claude-sonnet-4-20250514, gemini-2.5-pro")
    r.add_argument("--base-url", default=None, metavar="URL", help="endpoint (required for openai-compatible)")
    r.add_argument("--systems", required=True, type=int, metavar="N")
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--preset", default=LLM_PRESETS[0], choices=LLM_PRESETS,
                   help="where the systems come from: two-body-exoplanet (default; the reference's force-probe "
                   "set, exoplanet-prior masses) or two-body (both masses U(1e-4, 1.01e-2))")
    r.add_argument("--out", required=True, metavar="DIR")
    r.add_argument("--reference-prompt", action="store_true",
                   help="keep the reference's original (false) wording 'The sun is at the origin.'")
    r.add_argument("--temperature", type=float, default=None, help="sampling temperature (default: provider's)")
    r.add_argument("--max-tokens", type=int, default=None, help="output token budget (anthropic default 32000)")
    r.add_argument("--reasoning-effort", default=None, choices=["minimal", "low", "medium", "high"],
                   help="OpenAI reasoning effort")
    r.add_argument("--concurrency", type=int, default=4, help="requests in flight at once")
    r.add_argument("--timeout", type=float, default=900.0, help="seconds per request")
    r.add_argument("--max-retries", type=int, default=5, help="retries on 429, 5xx, timeouts")
    r.add_argument("--backoff", type=float, default=1.0, help="first retry wait in seconds (doubles)")
    r.add_argument("--discover", action="store_true", default=True, help="run symbolic regression (default)")
    r.add_argument("--no-discover", dest="discover", action="store_false")
    r.add_argument("--sr-seeds", type=int, default=5, help="symbolic-regression fits (seeds 0..N-1)")
    r.add_argument("--sr-restarts", type=int, default=3, help="searches per fit, best kept")
    r.add_argument("--sr-points", type=int, default=1000, help="points per symbolic-regression fit")
    r.add_argument("--no-progress", dest="progress", action="store_false")
    r.set_defaults(func=run)

    s = llm_sub.add_parser("score", help="score answers stored in the reference layout",
                           description="Score <predictions>/<model>/<i>.json against <prompts>/true_force_<i>.npy "
                           "and unmasked_inds_<i>.npy; symbolic regression when true_state_<i>.npy is there.")
    s.add_argument("--prompts", required=True, metavar="DIR")
    s.add_argument("--predictions", required=True, metavar="DIR")
    s.add_argument("--out", required=True, metavar="FILE.json")
    s.add_argument("--figure", default=None, metavar="FILE.png", help="also draw predicted vs true |F|")
    s.add_argument("--discover", action="store_true", default=True)
    s.add_argument("--no-discover", dest="discover", action="store_false")
    s.add_argument("--sr-seeds", type=int, default=5)
    s.add_argument("--sr-restarts", type=int, default=3, help="searches per fit, best kept")
    s.add_argument("--sr-points", type=int, default=1000)
    s.set_defaults(func=score)


def _print_summary(doc: dict) -> None:
    for model, summary in doc["summary"].items():
        law = doc.get("law", {}).get(model) or {}
        verdict = law.get("expression") or law.get("reason") or "-"
        print(f"{model}: {summary['parsed']}/{summary['systems']} parsed, median R^2 all "
              f"{summary['median_r2_all']}, held-out {summary['median_r2_heldout']}; law: {verdict}")


def run(args) -> int:
    from orbitlaw.discovery.llm.providers import Settings, check_provider
    from orbitlaw.discovery.llm.runner import run as run_llm

    check_provider(args.provider)
    at_least(args, 1, "systems")
    settings = Settings(temperature=args.temperature, max_tokens=args.max_tokens,
                        reasoning_effort=args.reasoning_effort)
    doc = run_llm(args.provider, args.model, args.systems, args.out, seed=args.seed, base_url=args.base_url,
                  reference_prompt=args.reference_prompt, settings=settings, concurrency=args.concurrency,
                  timeout=args.timeout, max_retries=args.max_retries, backoff=args.backoff,
                  run_discovery=args.discover, sr_seeds=args.sr_seeds, sr_points=args.sr_points,
                  sr_restarts=args.sr_restarts, preset=args.preset,
                  progress=args.progress)
    _print_summary(doc)
    failed = [r for r in doc["results"] if r["model"] == args.model and r.get("error")]
    if failed:
        print(f"orbitlaw llm: {len(failed)} request(s) failed ({failed[0]['error']}); re-run the same command "
              "to retry them", file=sys.stderr)
        return 1
    return 0


def score(args) -> int:
    from orbitlaw.discovery.llm.runner import score as score_llm

    doc = score_llm(args.prompts, args.predictions, args.out, run_discovery=args.discover,
                    sr_seeds=args.sr_seeds, sr_points=args.sr_points,
                    sr_restarts=args.sr_restarts, figure=args.figure)
    _print_summary(doc)
    print(json.dumps({"out": args.out, "systems": len(doc["results"])}))
    return 0
