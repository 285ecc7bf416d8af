"""``orbitlaw llm run``: prompt an LLM with N two-body systems, cache, parse, score, and run the
symbolic regression on its answers.

Layout of ``DIR``::

    DIR/prompts/         the systems and prompts in the reference layout (i.txt, traj_i.npy, ...)
    DIR/cache/           every raw response, keyed by provider, model, endpoint, prompt and settings
    DIR/predictions/<model>/<i>.json   parsed answers (timestep -> |F|), the reference's layout
    DIR/answers.csv      every answered step of every model: r, m1, m2, F_true, F_pred, system, step, ...
    DIR/results.json     per-system scores, the symbolic-regression law per model, config, code version
    DIR/forces.png       predicted vs true |F| per system

Several models can share one ``DIR`` (same systems): each run replaces its own model's entries. A run
killed at any point resumes from the cache; failed requests are recorded and retried by the next run.
"""

from __future__ import annotations

import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from types import SimpleNamespace

from orbitlaw.discovery.llm.cache import ResponseCache, request_key
from orbitlaw.discovery.llm.parse import parse_answer
from orbitlaw.discovery.llm.prompt import build_prompt
from orbitlaw.discovery.llm.providers import ChatClient, Settings, check_provider
from orbitlaw.discovery.llm.score import answer_rows, answers_table, model_slug, score_system, write_answers_csv
from orbitlaw.discovery.llm.systems import DEFAULT_PRESET, generate_systems, read_layout, write_layout
from orbitlaw.provenance import OutputLock, undo_on_failure, write_text_atomic
from orbitlaw.validate import FieldError, at_least

SR_SEEDS = 5
SR_POINTS = 1000
SR_RESTARTS = 3


def discover(rows: list[dict], seeds: int = SR_SEEDS, points: int = SR_POINTS, restarts: int = SR_RESTARTS,
             resume_dir: Path | None = None, settings=None, target: str = "F_pred", rule: dict | None = None) -> dict:
    """Symbolic regression of ``target`` (F_pred; F_true for the control) on (r, m1, m2) over answer rows, through
    :func:`orbitlaw.discovery.sr.symbolic.discover_law` (operon backend; ``seeds`` fits of ``points`` rows, best of
    ``restarts``): its LAW dict (``expression``, ``newtonian``, ``power_law``, ``per_seed``, ``pareto``,
    ...), or ``{"status": "failed"|"unavailable", "reason": ...}`` when it cannot run (too few answers, a
    constant answer, no SR package). ``settings``: a :class:`orbitlaw.discovery.sr.backends.SearchSettings` (None:
    the defaults); ``rule``: the verdict's ``selection`` and ``tolerance`` (a study passes its own, so that the
    answers are judged as its models are; None: discover_law's defaults)."""
    try:
        from orbitlaw.discovery.sr.symbolic import DiscoverConfig, discover_law
    except ImportError as exc:
        return {"status": "unavailable", "reason": f"symbolic regression not available: {exc}"}
    try:
        config = DiscoverConfig(target, features=["r", "m1", "m2"], seeds=int(seeds), points=int(points),
                                restarts=int(restarts), backend="operon", settings=settings, **(rule or {}))
        return discover_law(answers_table(rows), config, resume_dir=resume_dir)
    except ValueError as exc:  # e.g. a constant answer: there is no law to find
        return {"status": "failed", "reason": str(exc)}


def control(rows: list[dict], **kwargs) -> dict:
    """The same symbolic regression on the true force at the same answered steps (each (system, step) once):
    what the search finds when the answers are perfect. A model's verdict means something only where
    this control comes out Newtonian (with few systems the masses can act as a lookup table)."""
    unique = list({(row["system"], row["step"]): row for row in rows}.values())
    return discover(unique, target="F_true", **kwargs)


def public_url(url: str | None) -> str | None:
    """The endpoint without user info, query or fragment (where some services put keys): what is stored."""
    if not url:
        return url
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.hostname + (f":{parts.port}" if parts.port else "") if parts.hostname
                       else parts.netloc, parts.path, "", ""))


def _results_path(out: Path) -> Path:
    return out / "results.json"


def _load_previous(out: Path, config: dict) -> dict:
    path = _results_path(out)
    if not path.exists():
        return {"results": [], "law": {}, "config": {**config, "runs": {}}}
    try:
        previous = json.loads(path.read_text())
    except ValueError as exc:
        raise ValueError(f"{path} is not valid JSON ({exc}); move it away or use another --out") from None
    old = previous.get("config", {})
    for key in ("systems", "seed", "reference_prompt", "preset"):
        if old.get(key, "two-body" if key == "preset" else None) != config[key]:  # older runs: two-body
            raise ValueError(f"{out} holds a run with {key}={old.get(key)!r}, not {config[key]!r}; use another --out")
    return previous


def _request_all(client: ChatClient, cache: ResponseCache, todo: list[tuple[int, str, str]], concurrency: int,
                 progress: bool) -> dict[int, str]:
    """Send the uncached prompts (system, key, prompt) ``concurrency`` at a time; each answer is cached as
    soon as it arrives. Returns system -> one-line error for the requests that failed for good."""
    from tqdm import tqdm

    errors: dict[int, str] = {}
    lock = threading.Lock()

    def one(index: int, key: str, prompt: str) -> None:
        start = time.monotonic()
        completion = client.complete(prompt)
        cache.put(key, client.scrub({  # a reply that echoes the key is cached without it
            "provider": client.provider, "model": client.model, "base_url": public_url(client.base_url),
            "settings": client.settings.as_dict(), "system": index, "text": completion.text,
            "finish_reason": completion.finish_reason, "usage": completion.usage,
            "served_model": completion.served_model, "attempts": completion.attempts,
            "elapsed_s": round(time.monotonic() - start, 3)}))

    pool = ThreadPoolExecutor(max_workers=max(1, concurrency), thread_name_prefix="llm")
    try:
        futures = {pool.submit(one, *job): job[0] for job in todo}
        bar = tqdm(as_completed(futures), total=len(futures), desc=f"{client.model}", unit="req",
                   disable=not progress)
        for future in bar:
            try:
                future.result()
            except RuntimeError as exc:
                with lock:
                    errors[futures[future]] = str(exc)
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown(wait=True)
    return errors


def run(provider: str, model: str, systems: int, out: str | Path, seed: int = 0, base_url: str | None = None,
        reference_prompt: bool = False, settings: Settings | None = None, concurrency: int = 4,
        timeout: float = 900.0, max_retries: int = 5, backoff: float = 1.0, run_discovery: bool = True,
        sr_seeds: int = SR_SEEDS, sr_points: int = SR_POINTS,
        sr_restarts: int = SR_RESTARTS, sr_settings=None, progress: bool = True, sr_rule: dict | None = None,
        preset: str = DEFAULT_PRESET) -> dict:
    """Run one model on ``systems`` one-planet systems of ``preset`` into ``out`` (see the module docstring).

    Returns the results document. Raises ValueError for bad input (unknown provider, missing key, ...)
    before anything is written, and RuntimeError when every request failed.
    """
    from orbitlaw.provenance import code_version, dependency_versions, write_json_atomic

    at_least(SimpleNamespace(concurrency=concurrency), 1, "concurrency")
    settings = settings or Settings()
    check_provider(provider)
    out = Path(out)
    config = {"systems": int(systems), "seed": int(seed), "reference_prompt": bool(reference_prompt),
              "preset": preset}
    system_list = generate_systems(int(systems), int(seed), preset=preset)
    # one writer per DIR, taken before anything of an earlier run is read (a second `llm run` is refused)
    with OutputLock.beside(out, f"LLM run {out}"):
        previous = _load_previous(out, config)
        prompts = [build_prompt(s.coords, s.force, s.revealed, reference=reference_prompt) for s in system_list]
        cache = ResponseCache(out / "cache")
        keys = [request_key(provider, model, base_url, p, settings.as_dict()) for p in prompts]
        todo = [(s.index, k, p) for s, k, p in zip(system_list, keys, prompts, strict=True) if k not in cache]
        # the client (SDK, API key) is needed only for what the cache does not hold: a finished run re-scores offline
        client = ChatClient(provider, model, settings, base_url=base_url, timeout=timeout, max_retries=max_retries,
                            backoff=backoff) if todo else None
        # a run that fails (every request refused, a full disk) leaves DIR as it was, unless it cached answers a
        # re-run continues from (undo_on_failure)
        with undo_on_failure(out, resumable=lambda: any((out / "cache").glob("*/*.json"))):
            out.mkdir(parents=True, exist_ok=True)
            write_layout(out / "prompts", system_list, prompts)
            errors = _request_all(client, cache, todo, concurrency, progress) if todo else {}
            if errors and len(errors) == len(system_list):
                first = errors[min(errors)]
                raise RuntimeError(f"every request failed, e.g. system {min(errors)}: {first}")

            slug = model_slug(model)
            pred_dir = out / "predictions" / slug
            pred_dir.mkdir(parents=True, exist_ok=True)
            results, rows, answers = [], [], {}
            for s, key in zip(system_list, keys, strict=True):
                record = {"model": model, "provider": provider, "system": s.index, "cache_key": key,
                          "revealed": s.revealed.tolist()}
                cached = cache.get(key)
                if cached is None:
                    values, parse_error = {}, None
                    record.update(parsed=False, error=errors.get(s.index, "no response"), parse_error=None)
                else:
                    parsed = parse_answer(cached["text"])
                    values, parse_error = (parsed.values, None) if parsed.ok else ({}, parsed.error)
                    record.update(parsed=parsed.ok, error=None, parse_error=parse_error,
                                  finish_reason=cached.get("finish_reason"), attempts=cached.get("attempts"),
                                  response_file=str(cache.path(key).relative_to(out)))
                    if parsed.ok:
                        write_text_atomic(pred_dir / f"{s.index}.json",
                                          json.dumps({str(k): v for k, v in sorted(values.items())}) + "\n")
                        answers[s.index] = values
                        rows += answer_rows(model, s, values)
                record.update(score_system(s, values))
                results.append(record)

            # merge with the other models already in DIR
            kept = [r for r in previous.get("results", []) if r.get("model") != model]
            all_results = sorted(kept + results, key=lambda r: (str(r.get("model")), r.get("system", 0)))
            all_rows = _other_rows(out, model) + rows
            write_answers_csv(out / "answers.csv", all_rows)
            law = dict(previous.get("law", {}))
            law_control = previous.get("law_control")
            if run_discovery:
                law[model] = discover(rows, seeds=sr_seeds, points=sr_points, restarts=sr_restarts,
                                      resume_dir=out / "sr" / slug, settings=sr_settings, rule=sr_rule)
                if all_rows:
                    law_control = control(all_rows, seeds=sr_seeds, points=sr_points, restarts=sr_restarts,
                                          resume_dir=out / "sr" / "control", settings=sr_settings, rule=sr_rule)
            runs = dict(previous.get("config", {}).get("runs", {}))
            runs[model] = {"provider": provider, "base_url": public_url(base_url), "settings": settings.as_dict(),
                           "timeout_s": timeout, "max_retries": max_retries, "concurrency": concurrency,
                           "sr": {"seeds": int(sr_seeds), "points": int(sr_points), "restarts": int(sr_restarts)}
                           if run_discovery else None}
            doc = {"results": all_results, "law": law, "law_control": law_control, "config": {**config, "runs": runs},
                   "code_version": code_version(), "dependency_versions": dependency_versions(),
                   "summary": summarise(all_results)}
            write_json_atomic(_results_path(out), doc)
            _plot(out, system_list, all_rows)
            return doc


def _other_rows(out: Path, model: str) -> list[dict]:
    """Answer rows of the other models already in ``DIR/answers.csv``."""
    import csv

    path = out / "answers.csv"
    if not path.exists():
        return []
    rows = []
    with open(path, newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            if row["model"] == model:
                continue
            rows.append({**row, "system": int(row["system"]), "step": int(row["step"]),
                         **{c: float(row[c]) for c in ("r", "m1", "m2", "F_true", "F_pred")},
                         "revealed": row["revealed"] == "True"})
    return rows


def _plot(out: Path, systems, rows: list[dict]) -> None:
    from orbitlaw.discovery.llm.plot import plot_forces

    answers: dict[str, dict[int, dict[int, float]]] = {}
    for row in rows:
        answers.setdefault(row["model"], {}).setdefault(row["system"], {})[row["step"]] = row["F_pred"]
    plot_forces(out / "forces.png", systems, answers)


def summarise(results: list[dict]) -> dict:
    """Per model: systems, parsed, failed requests, median r2_all and r2_heldout over parsed systems."""
    import numpy as np

    out = {}
    for model in sorted({r["model"] for r in results}):
        mine = [r for r in results if r["model"] == model]
        def median(key, mine=mine):
            v = [r[key] for r in mine if r.get(key) is not None]
            return float(np.median(v)) if v else None
        out[model] = {"systems": len(mine), "parsed": sum(bool(r["parsed"]) for r in mine),
                      "failed_requests": sum(bool(r.get("error")) for r in mine),
                      "median_r2_all": median("r2_all"), "median_r2_heldout": median("r2_heldout")}
    return out


def score(prompts: str | Path, predictions: str | Path, out: str | Path, run_discovery: bool = True,
          sr_seeds: int = SR_SEEDS, sr_points: int = SR_POINTS, sr_restarts: int = SR_RESTARTS,
          sr_settings=None, figure: str | Path | None = None, sr_rule: dict | None = None) -> dict:
    """``orbitlaw llm score``: score answers stored in the reference layout; write ``out`` (JSON). ``sr_rule``: the
    verdict's selection and tolerance (:func:`discover`)."""
    from orbitlaw.discovery.llm.score import score_reference
    from orbitlaw.provenance import code_version, dependency_versions, write_json_atomic

    out = Path(out)
    if out.suffix != ".json":
        raise FieldError("out", f"must name a .json file, got {out}")
    if not out.parent.is_dir():
        raise FieldError(message=f"`out` {out}: directory {out.parent} does not exist")
    if figure:
        _check_writable(Path(figure), "--figure")
    results, rows = score_reference(Path(prompts), Path(predictions))
    law = {}
    if run_discovery:
        for model in sorted({r["model"] for r in results}):
            mine = [row for row in rows if row["model"] == model]
            law[model] = discover(mine, seeds=sr_seeds, points=sr_points, restarts=sr_restarts,
                                  settings=sr_settings, rule=sr_rule) if mine else {
                "status": "skipped", "reason": "no states (true_state_<i>.npy) for r, m1, m2"}
    law_control = control(rows, seeds=sr_seeds, points=sr_points, restarts=sr_restarts,
                          settings=sr_settings, rule=sr_rule) if run_discovery and rows else None
    doc = {"results": results, "law": law, "law_control": law_control, "summary": summarise(results),
           "config": {"prompts": str(prompts), "predictions": str(predictions),
                      "sr": {"seeds": int(sr_seeds), "points": int(sr_points), "restarts": int(sr_restarts)}
                   if run_discovery else None},
           "code_version": code_version(), "dependency_versions": dependency_versions()}
    if figure:  # the figure first: a failure then leaves no JSON claiming a finished score
        answers: dict[str, dict[int, dict[int, float]]] = {}
        for row in rows:
            answers.setdefault(row["model"], {}).setdefault(row["system"], {})[row["step"]] = row["F_pred"]
        from orbitlaw.discovery.llm.plot import plot_forces

        plot_forces(Path(figure), read_layout(Path(prompts)), answers)
    write_json_atomic(out, doc)
    return doc


def _check_writable(path: Path, flag: str) -> None:
    """ValueError (one line) unless ``path``'s directory exists and a file can be created in it."""
    import os

    if path.suffix.lower() not in (".png", ".pdf", ".svg"):
        raise ValueError(f"{flag} must name a .png, .pdf or .svg file, got {path}")
    if not path.parent.is_dir():
        raise ValueError(f"{flag} {path}: directory {path.parent} does not exist")
    if not os.access(path.parent, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise ValueError(f"{flag} {path}: not writable")
