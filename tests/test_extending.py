"""docs/extending.md in practice: a new architecture, dataset preset, study preset and probe are each one record
in their table (plus their implementation), and the code that reads the table takes them with no other change."""

from __future__ import annotations

import dataclasses
import json
import sys
import types
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn as nn

from orbitlaw.cli import main


class CausalMeanBlock(nn.Module):
    """x + W mean(x[:t+1]): a core with no attention, (B, T, d) -> (B, T, d), causal."""

    def __init__(self, config):
        super().__init__()
        self.proj = nn.Linear(config.n_embd, config.n_embd)

    def forward(self, x, rope=None):
        steps = torch.arange(1, x.shape[1] + 1, device=x.device, dtype=x.dtype)[None, :, None]
        return x + self.proj(x.cumsum(1) / steps)


def test_a_new_architecture_is_one_record(monkeypatch):
    from orbitlaw.models import architectures
    from orbitlaw.models.gpt import GPT
    from orbitlaw.models.presets import model_config

    record = architectures.Architecture(CausalMeanBlock, "running mean of the past", recurrent_state=True)
    monkeypatch.setitem(architectures.ARCHITECTURES, "causal-mean", record)
    model = GPT(model_config("tiny", arch="causal-mean", n_layer=2))
    assert model.config.pos == "none"  # a recurrent-state core takes no position embedding (its trait)
    tokens = torch.randint(0, 1000, (2, 12, 2))  # (B, T, x and y ids)
    logits = model(tokens)[0]  # (B, T, 2, vocab)
    assert logits.shape[:3] == (2, 12, 2) and logits.isfinite().all()
    changed = tokens.clone()
    changed[:, -1] += 1
    assert torch.equal(model(changed)[0][:, :-1], logits[:, :-1])  # causal: the last token changes nothing before


def test_a_new_dataset_preset_is_one_record(monkeypatch, tmp_path):
    from orbitlaw import orbits
    from orbitlaw.orbits import presets

    two_body = presets.RECORDS["two-body"]
    circular = dataclasses.replace(two_body, defaults={**two_body.defaults, "e_max": 0.0})
    monkeypatch.setitem(presets.RECORDS, "two-body-circular", circular)
    orbits.simulate("two-body-circular", {"train": 4}, 0, tmp_path / "data", progress=False)
    split = orbits.load_dataset(tmp_path / "data", verify=True)["train"]
    assert split.manifest["preset"] == "two-body-circular" and split.manifest["params"]["e_max"] == 0.0
    positions = np.asarray(split.positions)  # (sequences, steps, bodies, 2) AU
    r = np.linalg.norm(positions[:, :, 1] - positions[:, :, 0], axis=-1)
    assert np.allclose(r, r[:, :1], rtol=1e-6)  # circular orbits: the separation never changes


def test_a_new_study_preset_is_one_record(monkeypatch):
    from orbitlaw.cli import build_parser
    from orbitlaw.study import presets

    smoke = presets.STUDY_PRESETS["smoke"]
    config = json.loads(json.dumps(smoke.config))
    config["train"]["max_steps"] = 80
    record = dataclasses.replace(smoke, name="smoke-longer", summary="smoke, twice the steps", config=config)
    monkeypatch.setitem(presets.STUDY_PRESETS, "smoke-longer", record)
    resolved = presets.study_config("smoke-longer")
    assert resolved["train"]["max_steps"] == 80
    assert {k: v for k, v in resolved.items() if k not in ("train", "preset")} == \
        {k: v for k, v in presets.study_config("smoke").items() if k not in ("train", "preset")}
    assert build_parser().parse_args(["run", "--preset", "smoke-longer", "--out", "x"]).preset == "smoke-longer"


@dataclass
class MeanForceConfig:
    """The mean |F| of the training rows as every prediction: the weakest baseline."""

    data: str
    out: str
    split: str = "train"
    seed: int = 0

    def validate(self) -> None:
        pass


def mean_force(cfg: MeanForceConfig) -> dict:
    from orbitlaw import orbits
    from orbitlaw.provenance import write_json_atomic

    forces = np.asarray(orbits.load_dataset(cfg.data)[cfg.split].forces)  # (N, steps, bodies, 2) M_sun AU / yr^2
    result = {"kind": "mean-force", "metrics": {"mean_force": float(np.linalg.norm(forces, axis=-1).mean())}}
    Path(cfg.out).mkdir(parents=True, exist_ok=True)
    write_json_atomic(Path(cfg.out) / "metrics.json", result)
    return result


def test_a_new_probe_is_one_record(monkeypatch, tmp_path, capsys):
    from orbitlaw import orbits
    from orbitlaw.discovery.probes import registry

    module = types.ModuleType("orbitlaw.discovery.probes.mean_force")
    module.MeanForceConfig, module.mean_force = MeanForceConfig, mean_force
    monkeypatch.setitem(sys.modules, module.__name__, module)
    probe = registry.Probe("mean-force", "the mean-force baseline", "predicts the mean |F|", "mean_force",
                           "MeanForceConfig", "mean_force", flag="--mean-force", runs_model=False, progress=False,
                           help="the mean |F| as every prediction", printed=lambda result: result["metrics"])
    monkeypatch.setitem(registry.PROBES, "mean-force", probe)
    orbits.simulate("two-body", {"train": 3}, 0, tmp_path / "data", progress=False)
    assert main(["probe", "--mean-force", "--data", str(tmp_path / "data"), "--out", str(tmp_path / "p")]) == 0
    printed = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert printed == json.loads((tmp_path / "p" / "metrics.json").read_text())["metrics"] and printed["mean_force"] > 0
    # a flag that only another probe reads is refused, from the records alone
    assert main(["probe", "--mean-force", "--steps", "5", "--data", str(tmp_path / "data"),
                 "--out", str(tmp_path / "q")]) == 2
    assert "--steps" in capsys.readouterr().err


@pytest.mark.parametrize("table", ["architectures", "dataset presets", "study presets", "probes", "attentions"])
def test_docs_walk_through_each_table(table):
    text = (Path(__file__).parents[1] / "docs" / "extending.md").read_text()
    heading = {"architectures": "Adding an architecture", "dataset presets": "Adding a dataset preset",
               "study presets": "Adding a study preset", "probes": "Adding a probe",
               "attentions": "Adding an attention"}[table]
    assert f"### {heading}" in text


def test_a_field_error_names_fields_in_the_library_and_their_flags_on_the_command_line(tmp_path, capsys):
    from orbitlaw.discovery.llm.systems import read_layout
    from orbitlaw.validate import FieldError

    one = FieldError("max_steps", "must be >= 1, got 0")
    assert str(one) == "max_steps must be >= 1, got 0" and one.fields == ["max_steps"]
    assert one.render({"max_steps": "--max-steps"}) == "--max-steps must be >= 1, got 0"
    several = FieldError(message="`prompt_steps` 4 + `steps` 900 = 904 steps, but the sequence holds 60")
    assert str(several) == "`prompt_steps` 4 + `steps` 900 = 904 steps, but the sequence holds 60"
    assert several.field == "prompt_steps" and several.fields == ["prompt_steps", "steps"]
    # a field the command has no flag for keeps its name, without the backticks
    assert several.render({"steps": "--steps"}) == "prompt_steps 4 + --steps 900 = 904 steps, but the sequence holds 60"
    with pytest.raises(TypeError):
        FieldError(message="names no field")
    # a library error names the keyword argument; the command line the flag that set it
    missing = tmp_path / "none"
    with pytest.raises(FieldError, match="^`prompts` .*: no such directory$"):
        read_layout(missing)
    assert main(["llm", "score", "--prompts", str(missing), "--predictions", str(tmp_path),
                 "--out", str(tmp_path / "s.json"), "--no-discover"]) == 2
    assert capsys.readouterr().err.strip() == f"orbitlaw llm: error: --prompts {missing}: no such directory"
