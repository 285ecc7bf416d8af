"""Hugging Face round trips: a trained model as a folder the Hub and its tools read, and back.

    from orbitlaw.models.gpt import GPT
    model = GPT.from_pretrained("runs/tiny")                 # a run directory, a pretrained folder or a Hub repo
    model.save_pretrained("hf/tiny", run="runs/tiny")        # the folder below, with the run's record and card
    model.push_to_hub("you/orbitlaw-tiny", run="runs/tiny")  # the same folder, uploaded (huggingface_hub)

A pretrained folder (what :func:`save_pretrained` writes and the Hub stores)::

    model.safetensors   the weights (float32, as trained)
    checksums.json      {"sha256": {"model.safetensors": hex digest}}: checked before any weight is used
    config.json         the run's config.json ("model": GPTConfig's fields, "train", "dataset", ...) with
                        "model_type": "orbitlaw-gpt", the code version that saved it and the run's last metrics
    README.md           the model card: YAML front matter (library, licence, tags) and the run's settings,
                        its dataset's checksum and its metrics

A pretrained folder is also a run directory to every command that reads a model (``orbitlaw evaluate``,
``probe``, ``rollout``: :func:`orbitlaw.models.evaluate.load_run`). ``huggingface_hub`` is needed only to reach
the Hub (``pip install 'orbitlaw[hub]'``) and is imported only then; a folder on disk needs nothing more.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path

from orbitlaw.errors import first_line
from orbitlaw.models import checkpoint
from orbitlaw.provenance import code_version, write_json_atomic, write_text_atomic

MODEL_TYPE = "orbitlaw-gpt"
FILES = ("model.safetensors", checkpoint.CHECKSUMS, "config.json", "README.md")
"""The files of a pretrained folder, all that :func:`from_pretrained` downloads from a Hub repo."""


def _hub():
    """huggingface_hub, imported only when the Hub is reached; a one-line error when it is not installed."""
    try:
        import huggingface_hub
        import huggingface_hub.constants
        import huggingface_hub.errors
    except ImportError:
        raise ValueError("reaching the Hugging Face Hub needs huggingface_hub: pip install 'orbitlaw[hub]' "
                         "(a pretrained folder on disk needs nothing more)") from None
    return huggingface_hub


def run_record(run: str | Path) -> dict:
    """What a run directory says about its model, for a pretrained folder's config.json and card: the run's
    config.json, its last logged metrics (``metrics.jsonl``) and, where its dataset can still be opened, the
    dataset's manifest checksum (``dataset.manifest_sha256``)."""
    from orbitlaw.models.metrics import read_metrics

    run = Path(run)
    record = json.loads((run / "config.json").read_text())
    rows = read_metrics(run)
    last = {}
    for row in rows:  # the last value of each metric (the validation loss is logged only every eval_every steps)
        last.update({k: v for k, v in row.items() if v is not None})
    if rows or "metrics" not in record:  # a pretrained folder has no metrics.jsonl: it keeps the metrics it holds
        record["metrics"] = last
    dataset = record.get("dataset") if isinstance(record.get("dataset"), dict) else {}
    manifest = Path(dataset["path"]) / "manifest.json" if dataset.get("path") else None
    if manifest is not None and manifest.is_file():
        try:
            found = json.loads(manifest.read_text())
        except ValueError:
            found = {}
        if isinstance(found, dict) and found.get("config_hash") == dataset.get("config_hash"):  # still that dataset
            dataset["manifest_sha256"] = found.get("manifest_sha256")
    return record


def _replaceable(directory: Path) -> bool:
    """Whether ``directory`` is a pretrained folder this module wrote (its config says so, and it holds nothing
    else), which :func:`save_pretrained` may replace; any other directory is never touched."""
    try:
        config = json.loads((directory / "config.json").read_text())
    except (OSError, ValueError):
        return False
    extra = {p.name for p in directory.iterdir()} - set(FILES) - {".cache"}
    return isinstance(config, dict) and config.get("model_type") == MODEL_TYPE and not extra


def save_pretrained(model, directory: str | Path, run: str | Path | None = None, *, record: dict | None = None) -> Path:
    """Write ``model`` (a :class:`~orbitlaw.models.gpt.GPT`) as a pretrained folder ``directory`` (module
    docstring), with the record of the run directory ``run`` (its config, metrics and dataset checksum) or an
    explicit ``record``; without either, the config holds the model's settings only. The folder is written
    under a temporary name and renamed: it is whole or absent, never half-written. Returns ``directory``."""
    from safetensors.torch import save_file

    directory = Path(directory)
    if record is None:
        record = run_record(run) if run is not None else {}
    config = {"context": model.config.block_size,  # a model saved without its run reads its whole block
              **record, "model": model.config.to_dict(), "model_type": MODEL_TYPE,
              "saved_by": {"library": "orbitlaw", "code_version": code_version()}}
    if directory.exists() and not _replaceable(directory):
        raise ValueError(f"{directory} exists and is not a pretrained folder of orbitlaw's; choose another directory")
    directory.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{directory.name}.", dir=directory.parent))
    os.chmod(tmp, 0o755)  # mkdtemp's 0700 would keep the folder from whoever it is shared with
    try:
        weights = {k: v.detach().cpu().contiguous() for k, v in model.state_dict().items()}
        save_file(weights, tmp / "model.safetensors", metadata={"format": "pt", "model_type": MODEL_TYPE})
        digest = hashlib.sha256((tmp / "model.safetensors").read_bytes()).hexdigest()
        write_json_atomic(tmp / checkpoint.CHECKSUMS, {"sha256": {"model.safetensors": digest}})
        write_json_atomic(tmp / "config.json", config)
        write_text_atomic(tmp / "README.md", model_card(config, model.num_parameters(), digest))
        if directory.exists():  # checked above: a pretrained folder of ours, swapped for the new one
            old = Path(tempfile.mkdtemp(prefix=f".{directory.name}.old.", dir=directory.parent))
            os.replace(directory, old / "folder")
            try:
                os.replace(tmp, directory)
            except BaseException:
                os.replace(old / "folder", directory)  # put the old folder back
                raise
            finally:
                shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, directory)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return directory


def from_pretrained(path_or_repo: str | Path, *, device: str = "cpu", revision: str | None = None,
                    token: str | None = None, endpoint: str | None = None, cache_dir: str | Path | None = None):
    """(model, config) from a run directory, a pretrained folder, or a Hub repo id (``"you/orbitlaw-tiny"``,
    downloaded with ``huggingface_hub`` at ``revision`` into ``HF_HUB_CACHE/orbitlaw/<owner>--<name>@<revision>``;
    ``endpoint``: another Hub, such as a mirror). The weights are checked against ``checksums.json`` before use;
    the model is in eval mode."""
    from orbitlaw.models.evaluate import load_run

    local = Path(path_or_repo).expanduser()
    if not local.exists():
        text = str(path_or_repo)
        if isinstance(path_or_repo, Path) or text.startswith((".", "/", "~")) or text.count("/") != 1:
            raise ValueError(f"{path_or_repo}: no such run directory or pretrained folder")
        hub = _hub()
        # real files in a folder of their own, not the cache's links into its blob store (which load_run refuses)
        folder = (Path(cache_dir or hub.constants.HF_HUB_CACHE) / "orbitlaw"
                  / f"{str(path_or_repo).replace('/', '--')}@{revision or 'main'}")
        try:
            local = Path(hub.snapshot_download(str(path_or_repo), revision=revision, token=token, endpoint=endpoint,
                                               local_dir=folder, allow_patterns=list(FILES)))
        except Exception as exc:  # the client's HTTP and connection errors, whichever library raises them
            raise ValueError(f"{path_or_repo}: no such local directory, and the Hub could not give this model: "
                             f"{first_line(exc)}") from None
    return load_run(local, device=device)


def push_to_hub(model, repo_id: str, run: str | Path | None = None, *, record: dict | None = None,
                token: str | None = None, private: bool = False, revision: str | None = None,
                endpoint: str | None = None, commit_message: str = "Upload an orbitlaw model") -> str:
    """Upload ``model`` as a pretrained folder (with the record of ``run``, or ``record``, as
    :func:`save_pretrained`) to the Hub repo ``repo_id``, creating it if needed (``private``). Returns the
    commit's URL."""
    hub = _hub()
    api = hub.HfApi(endpoint=endpoint, token=token)
    with tempfile.TemporaryDirectory() as tmp:
        folder = save_pretrained(model, Path(tmp) / "model", run, record=record)
        try:
            api.create_repo(repo_id, private=private, exist_ok=True)
            info = api.upload_folder(folder_path=str(folder), repo_id=repo_id, revision=revision,
                                     commit_message=commit_message)
        except Exception as exc:  # the client's HTTP and connection errors, whichever library raises them
            raise ValueError(f"{repo_id}: the upload to the Hub failed: {first_line(exc)}") from None
    return str(getattr(info, "commit_url", info))


def _table(rows: list[tuple[str, object]]) -> list[str]:
    return ["| setting | value |", "|---|---|", *(f"| {k} | {v} |" for k, v in rows)]


def model_card(config: dict, n_params: int, weights_sha256: str) -> str:
    """The model card (README.md) of a pretrained folder with ``config`` (its config.json): YAML front matter the
    Hub reads, then the model, its training, its data (with checksums) and its last metrics."""
    m, t, d = config["model"], config.get("train", {}), config.get("dataset", {})
    metrics = config.get("metrics", {})
    front = ["---", "library_name: orbitlaw", "license: mit", "tags:", "- orbitlaw", "- physics",
             "- orbital-mechanics", "- sequence-model", f"- attention-{m.get('attention', 'softmax')}", "---", ""]
    lines = [f"# orbitlaw GPT: {m.get('attention')} attention, {n_params:,} parameters", "",
             "A sequence model over tokenised planetary orbits (positions in AU, time steps in years), trained by "
             "orbitlaw to predict each next position.", "",
             "```python", "from orbitlaw.models.gpt import GPT", "model = GPT.from_pretrained(\"THIS_REPO\")", "```",
             "", "## Model", "", *_table([(k, m[k]) for k in ("arch", "attention", "n_layer", "n_head", "n_embd",
                                                                "block_size", "vocab_size", "pos", "window")
                                          if k in m]), ""]
    if t:
        lines += ["## Training", "", *_table([(k, t[k]) for k in ("preset", "seed", "max_steps", "batch_size", "lr",
                                                                  "schedule", "warmup_steps") if k in t]), ""]
    lines += ["## Data", "", *_table([("preset", d.get("preset")), ("seed", d.get("seed")),
                                      ("config_hash (sha256)", d.get("config_hash")),
                                      ("manifest_sha256", d.get("manifest_sha256"))] if d else
                                     [("dataset", "not recorded (saved without its run)")]),
              "", f"Weights: `model.safetensors`, sha256 `{weights_sha256}`.", ""]
    if metrics:
        lines += ["## Metrics (last logged)", "", *_table(sorted(metrics.items())), ""]
    lines += [f"Saved by orbitlaw {config['saved_by']['code_version']}.", ""]
    return "\n".join(front + lines)
