"""The stages of ``orbitlaw run``, each cached in ``STUDY/stages/<name>.json`` keyed by its config.

A stage's key is its config, the digest of the toolkit's source (``orbitlaw.provenance.source_digest``: any
code change, committed or not) and the versions of the dependencies that change results
(``dependency_versions``). A stage whose marker holds the same key is skipped; one with another key has
its outputs removed and runs again (so after a code or dependency change the study re-runs rather than
mixing stale stages with a new code version); one that was killed half-way resumes through its tool's
own resume (simulate, train, probe and discover all resume). Layout of ``STUDY``::

    data/{pretrain,probe,solar}/      orbitlaw simulate outputs
    runs/<attention>/                 orbitlaw train runs (+ eval.json)
    probes/<attention>/               force-magnitude probes on the two-body probe set
    solar/<attention>/                force-vector probes on the Solar System (force_arrows.png)
    linear/<attention>/               per-layer linear probes
    laws/<attention>/LAW.json         symbolic regression of each probe's predictions (+ LAW.pareto.png)
    oracle/knn/, laws/oracle-knn/     the k-nearest-neighbour oracle and its law
    controls/                         the positive and negative controls (orbitlaw.study.controls)
    llm/                              scored LLM baselines (never a network call)
    figures/, report.md, results.json
"""

from __future__ import annotations

import hashlib
import json
import resource
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from orbitlaw.provenance import dependency_versions, source_digest, write_json_atomic


def _key(config: dict) -> str:
    return hashlib.sha256(json.dumps(config, sort_keys=True, default=str).encode()).hexdigest()[:16]


class Study:
    """A study directory whose stages run once per config: ``study.stage(name, config, outputs, fn)``."""

    def __init__(self, out: str | Path, progress: bool = True):
        self.out = Path(out)
        self.progress = progress
        self.source = source_digest()
        self.invocation = uuid.uuid4().hex  # this Study's own: a plan it did not start is another invocation's
        (self.out / "stages").mkdir(parents=True, exist_ok=True)

    def path(self, *parts: str) -> Path:
        return self.out.joinpath(*parts)

    def marker(self, name: str) -> Path:
        """The record of stage ``name`` (its key, config and, once done, result)."""
        return self.out / "stages" / f"{name.replace(':', '__')}.json"

    def stage(self, name: str, config: dict, outputs: list[Path], fn: Callable[[], dict]) -> dict:
        """Run ``fn`` unless stage ``name`` already finished with ``config``; returns its (JSON) result."""
        marker = self.marker(name)
        key = _key({"config": config, "source": self.source, "versions": dependency_versions()})
        if marker.exists():
            saved = json.loads(marker.read_text())
            if saved.get("key") == key and saved.get("done"):
                return saved["result"]
            if saved.get("key") != key:  # the config changed: what was there is not this stage's output
                for path in outputs:
                    if path.is_dir():
                        shutil.rmtree(path)
                    elif path.exists():
                        path.unlink()
        write_json_atomic(marker, {"key": key, "config": config, "source": self.source,
                                   "versions": dependency_versions(), "done": False})
        print(f"orbitlaw run: {self.progress_line(name)}", file=sys.stderr, flush=True)
        start = _clock()
        result = fn()
        timing = {k: round(v - start[k], 2) for k, v in _clock().items()}
        write_json_atomic(marker, {"key": key, "config": config, "source": self.source,
                                   "versions": dependency_versions(), "done": True, "result": result,
                                   "timing": timing})
        return result

    PLAN = "plan.json"

    def plan(self, names: list[str]) -> None:
        """Add ``names`` to the stages this invocation expects to pass through (``STUDY/stages/plan.json``, read by
        every process of the study, worker processes included), so that each stage announces itself as k of N with
        the time spent and left. A study whose later stages depend on earlier results (the path's replication)
        adds them when they are known; N is then what is known so far."""
        path = self.out / "stages" / self.PLAN
        saved = json.loads(path.read_text()) if path.exists() else {}
        if saved.get("invocation") != self.invocation:  # a new invocation: its clock and its count start now
            saved = {"invocation": self.invocation, "started": time.time(), "stages": [], "done_at_start": 0}
        new = [n for n in dict.fromkeys(names) if n not in saved["stages"]]
        saved["done_at_start"] += sum(self._done(n) for n in new)  # finished before: not this invocation's pace
        saved["stages"] += new
        write_json_atomic(path, saved)

    def _done(self, name: str) -> bool:
        """Whether stage ``name`` finished under this code (a marker of another code version, which the stage will
        run again, is not done)."""
        marker = self.marker(name)
        try:
            saved = json.loads(marker.read_text()) if marker.exists() else {}
        except ValueError:  # a marker being replaced as it is read
            return False
        return bool(saved.get("done")) and saved.get("source") == self.source

    def progress_line(self, name: str) -> str:
        """``name`` as the next stage to run: ``[k/N] name (M:SS in, about M:SS left)`` under a plan (the time left
        from this invocation's pace so far, once a stage has finished in it), else the name alone."""
        path = self.out / "stages" / self.PLAN
        try:
            plan = json.loads(path.read_text())
        except (OSError, ValueError):
            return name
        names = plan["stages"]
        done = sum(self._done(n) for n in names)
        k, total = done + 1, max(len(names), done + 1)
        spent = time.time() - plan["started"]
        line = f"[{k}/{total}] {name} ({_minutes(spent)} in"
        finished = done - plan["done_at_start"]
        if finished > 0:
            line += f", about {_minutes(spent / finished * (total - done))} left"
        return line + ")"

    def timings(self) -> dict[str, dict]:
        """Each finished stage's ``{"wall_seconds", "cpu_seconds"}`` as it last ran (``benchmarks/quickstart.py
        --profile`` reads them); a stage served from the cache keeps the time of the run that made it."""
        out = {}
        for marker in sorted((self.out / "stages").glob("*.json")):
            saved = json.loads(marker.read_text())
            if saved.get("done") and "timing" in saved:
                out[marker.stem.replace("__", ":")] = saved["timing"]
        return out


def _minutes(seconds: float) -> str:
    seconds = int(round(seconds))
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}" if seconds >= 3600 else \
        f"{seconds // 60}:{seconds % 60:02d}"


def _clock() -> dict[str, float]:
    """Wall seconds, and CPU seconds of this process and of its finished children (worker pools, torchrun)."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return {"wall_seconds": time.perf_counter(),
            "cpu_seconds": time.process_time() + children.ru_utime + children.ru_stime}


# ------------------------------------------------------------------------------------------------------
# Stage bodies: thin calls into the packages, returning small JSON summaries


def simulate(spec: dict, out: Path, workers: int, progress: bool) -> dict:
    from orbitlaw import orbits

    orbits.simulate(spec["preset"], spec["splits"], spec["seed"], out, workers=workers, progress=progress,
                    overrides=spec.get("overrides"))
    return {"path": str(out)}


def train(data: Path, run: Path, attention: str, spec: dict, progress: bool, nproc: int = 1,
          log_to: str = "none") -> dict:
    """Pretrain (or resume) one model; with ``nproc`` > 1 through ``torchrun`` (real DDP processes).
    ``log_to``: also send the metrics to ``tensorboard`` or ``wandb`` (not part of the stage's key)."""
    from orbitlaw.models import checkpoint

    resume = run.exists() and checkpoint.latest(run) is not None
    if nproc > 1:  # the whole training configuration goes to torchrun as one file: no setting is dropped
        settings = run.parent / f".{run.name}.train.json"
        settings.parent.mkdir(parents=True, exist_ok=True)
        write_json_atomic(settings, {"attention": attention, **spec})
        args = (["--data", str(data), "--out", str(run), "--config", str(settings), "--log-to", log_to]
                + (["--resume"] if resume else []))
        cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", str(nproc), "-m", "orbitlaw",
               "train", *args]
        if subprocess.run(cmd).returncode != 0:
            raise RuntimeError(f"torchrun training of {attention} failed; re-run the same command to resume")
    else:
        from orbitlaw.models.train import TrainConfig
        from orbitlaw.models.train import train as train_model

        train_model(TrainConfig(data=str(data), out=str(run), attention=attention, log_to=log_to, **spec),
                    resume=resume, progress=progress)
    from orbitlaw.models.metrics import read_metrics

    rows = read_metrics(run)
    val = [r for r in rows if r.get("val_loss") is not None]
    return {"run": str(run), "steps": rows[-1]["step"] if rows else 0,
            "train_loss": rows[-1]["train_loss"] if rows else None, "val_loss": val[-1]["val_loss"] if val else None}


def evaluate(run: Path, data: Path, spec: dict) -> dict:
    from orbitlaw.models.evaluate import evaluate as evaluate_run

    result = evaluate_run(run, data, lengths=spec["lengths"], split="val", n_seq=spec["sequences"],
                          extrapolation_sequences=spec["extrapolation_sequences"])
    return {k: result[k] for k in ("loss", "accuracy", "position_error_au", "r2_positions", "extrapolation")
            if k in result}


def run_probe(name: str, out: Path, spec: dict, progress: bool = False, **inputs: Path) -> dict:
    """Probe ``name`` of :data:`orbitlaw.discovery.probes.registry.PROBES` with config ``spec`` plus its ``inputs``
    (``run``, ``data``) into ``out``; what the stage keeps of its result (the record's ``stage_result``)."""
    from orbitlaw.discovery.probes import registry

    probe = registry.get(name)
    cfg = probe.build(out=str(out), **{k: str(v) for k, v in inputs.items()}, **spec)
    return probe.stage_result(probe.execute(cfg, progress=progress), out)


def probe(run: Path, data: Path, out: Path, spec: dict, target: str, progress: bool) -> dict:
    """The fine-tuned force probe of ``run`` for ``target``."""
    return run_probe("finetune", out, {**spec, "target": target}, progress, run=run, data=data)


def oracle(data: Path, out: Path, spec: dict) -> dict:
    """An oracle (``spec["oracle"]``, default knn) on ``data``."""
    return run_probe("oracle", out, {"oracle": "knn", **spec}, data=data)


def linear(run: Path, data: Path, out: Path, spec: dict) -> dict:
    """The per-layer linear probes of ``run``."""
    return run_probe("linear", out, spec, run=run, data=data)


def law(predictions: Path, out: Path, spec: dict, workers: int, progress: bool,
        target: str = "force-magnitude") -> dict:
    """Symbolic regression of a probe's predictions of ``target`` (its column, and Newton's form for it), by the
    rule in ``spec`` (``selection``, ``tolerance``: the study's ``VERDICT_RULE``). A force probe is judged twice:
    as the force (``LAW.json``) and as the acceleration it implies, F_pred / m1 (``LAW_acceleration.json``, the
    summary's ``acceleration``), the quantity the controls' probes are judged on."""
    from orbitlaw.discovery.probes import probe_data
    from orbitlaw.discovery.sr.backends import SearchSettings
    from orbitlaw.discovery.sr.pareto_plot import plot_pareto
    from orbitlaw.discovery.sr.symbolic import DiscoverConfig, discover_to_file

    config = DiscoverConfig(target=probe_data.columns(target)[1], quantity=probe_data.QUANTITY[target],
                            features=["r", "m1", "m2"], subset=["near_train"], seeds=spec["seeds"],
                            first_seed=spec.get("seed", 0), points=spec["points"], restarts=spec["restarts"],
                            settings=SearchSettings(budget=spec["budget"]), workers=workers,
                            protocol=spec.get("protocol", "orbitlaw"), tolerance=spec.get("tolerance", 0.0),
                            selection=spec.get("selection"))
    result = discover_to_file(out, predictions, config, progress=progress)
    plot_pareto(result, out.with_suffix(".pareto.png"))
    summary = summarise_law(result)
    if config.quantity == "force":
        import pandas as pd

        table = pd.read_csv(predictions)
        table["a_pred"] = table["F_pred"] / table["m1"]
        accel = discover_to_file(out.with_name("LAW_acceleration.json"), table, config, progress=progress,
                                 target="a_pred", quantity="acceleration")
        summary["acceleration"] = summarise_law(accel)
    return summary


def inductive_bias(run: Path, data: Path, out: Path, spec: dict, progress: bool) -> dict:
    """The inductive-bias probe of ``run``."""
    return run_probe("inductive-bias", out, spec, progress, run=run, data=data)


def rollout(run: Path, data: Path, out: Path, spec: dict) -> dict:
    """One greedy rollout of sequence ``spec["index"]``: ``out/rollout.png`` and ``out/rollout.json``."""
    from orbitlaw.models.rollout import write_rollout

    out.mkdir(parents=True, exist_ok=True)
    doc = write_rollout(run, data, out / "rollout.png", split="train", index=spec["index"],
                        prompt_steps=spec["prompt_steps"], steps=spec["steps"])
    return {k: doc[k] for k in ("prompt_steps", "steps", "mean_position_error_au", "mean_repeat_last_error_au")}


LAW_ROW_KEYS = ("expression", "verdict", "unresolved_reasons", "seeds_agreeing", "seeds", "power_law",
                "newton_departure", "fitted_exponents", "fitted_exponents_ci95", "newton_departure_exact",
                "newton_departure_exact_ci95", "resolution", "power", "rule", "newton_test", "exact")
"""The law fields a committed result row keeps (the controls', the variants' and the wrong-law worlds' JSONs)."""


def summarise_law(law_doc: dict | None) -> dict | None:
    """The verdict fields of a LAW.json (None, or a failure record, passes through)."""
    if not law_doc or "expression" not in law_doc:
        return law_doc
    keys = ("expression", "expression_latex", "verdict", "inconclusive_reasons", "unresolved_reasons", "newtonian",
            "power_law",
            "seeds_agreeing", "seeds", "newtonian_seeds", "error", "error_metric", "newton_departure",
            "newton_departure_exact", "newton_departure_exact_ci95", "fitted_exponents", "fitted_exponents_ci95",
            "resolution", "power", "rule")
    out = {k: law_doc[k] for k in keys if k in law_doc}
    if law_doc.get("newton_test"):
        out["newton_test"] = {k: law_doc["newton_test"].get(k) for k in ("consistent", "disagrees", "within",
                                                                         "short_of", "departure", "constant",
                                                                         "constant_ci95")}
    if law_doc.get("exact"):
        out["exact"] = {k: law_doc["exact"][k] for k in ("expression", "form", "seeds_agreeing")}
    return out


def llm(reference: Path | None, extra: list[Path], out: Path, spec: dict) -> dict:
    """LLM baselines without any network call: the reference's recorded answers (scored here) and the
    results.json of earlier ``orbitlaw llm run`` directories (their cached answers)."""
    from orbitlaw.discovery.llm.runner import score
    from orbitlaw.discovery.sr.backends import SearchSettings

    out.mkdir(parents=True, exist_ok=True)
    models: dict[str, dict] = {}
    control = None
    if reference is not None:
        doc = score(reference / "llm-prompts", reference / "llm-predictions", out / "reference.json",
                    sr_seeds=spec["seeds"], sr_points=spec["points"], sr_restarts=spec["restarts"],
                    sr_settings=SearchSettings(budget=spec["budget"]), figure=out / "reference_forces.png",
                    sr_rule={"tolerance": spec.get("tolerance", 0.0), "selection": spec.get("selection")})
        control = summarise_law(doc.get("law_control"))
        for model, summary in doc["summary"].items():
            models[model] = {"source": "reference answers (Vafa et al. 2025)", **summary,
                             "law": summarise_law(doc["law"].get(model))}
    for directory in extra:
        doc = json.loads((directory / "results.json").read_text())  # run_study checked it exists
        for model, summary in doc.get("summary", {}).items():
            models[model] = {"source": str(directory), **summary, "law": summarise_law(doc.get("law", {}).get(model))}
    return {"models": models, "control": control}


def content_hashes(paths: list[Path]) -> dict[str, str]:
    """sha256 of each file (of every file below a directory), so that a stage reading them re-runs when
    they change (e.g. a later ``orbitlaw llm run`` added a model to a results.json)."""
    out = {}
    for path in paths:
        files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
        digest = hashlib.sha256()
        for f in files:
            digest.update(str(f.relative_to(path) if path.is_dir() else f.name).encode())
            digest.update(hashlib.sha256(f.read_bytes()).digest())
        out[str(path)] = digest.hexdigest()
    return out


def find_reference() -> Path | None:
    """The reference study's data (``shared/reference/vafa2025``) beside the source checkout, if present."""
    root = Path(__file__).resolve().parents[2]
    candidate = root.parent / "shared" / "reference" / "vafa2025"
    return candidate if (candidate / "llm-prompts").is_dir() and (candidate / "llm-predictions").is_dir() else None
