"""The reference's baseline cores (--arch lstm|rnn|mamba): the Mamba scan against its closed form, causality,
every preset for every arch, training and resume through the same trainer, probes, one-line errors; the
registry of cores (orbitlaw.models.architectures) is what the model, the parser and the study read."""

import json

import pytest
import torch
from conftest import run_cli

from orbitlaw import orbits
from orbitlaw.models import architectures
from orbitlaw.models.architectures import ARCHITECTURES
from orbitlaw.models.metrics import read_metrics
from orbitlaw.models.presets import build_model, model_config
from orbitlaw.models.recurrent import selective_scan
from orbitlaw.models.train import TrainConfig, train

SMALL = {"n_layer": 2, "n_head": 2, "n_embd": 16, "block_size": 64}


def test_the_selective_scan_matches_its_closed_form():
    """h_t = sum_{s<=t} exp(A sum_{r=s+1..t} dt_r) dt_s B_s u_s, y_t = C_t h_t + D u_t, in float64."""
    g = torch.Generator().manual_seed(0)
    b, T, c, n = 2, 9, 3, 4
    u, dt = torch.randn(b, T, c, generator=g, dtype=torch.float64), torch.rand(b, T, c, generator=g,
                                                                                 dtype=torch.float64)
    A = -torch.rand(c, n, generator=g, dtype=torch.float64) * 3
    B, C = torch.randn(b, T, n, generator=g, dtype=torch.float64), torch.randn(b, T, n, generator=g,
                                                                                 dtype=torch.float64)
    D = torch.randn(c, generator=g, dtype=torch.float64)
    expected = torch.zeros(b, T, c, dtype=torch.float64)
    for t in range(T):
        h = torch.zeros(b, c, n, dtype=torch.float64)
        for s in range(t + 1):
            decay = torch.exp(A * dt[:, s + 1:t + 1].sum(dim=1).unsqueeze(-1))  # (b, c, n)
            h += decay * (dt[:, s] * u[:, s]).unsqueeze(-1) * B[:, s].unsqueeze(1)
        expected[:, t] = torch.einsum("bcn,bn->bc", h, C[:, t]) + D * u[:, t]
    torch.testing.assert_close(selective_scan(u, dt, A, B, C, D), expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_every_core_is_causal(arch):
    torch.manual_seed(0)
    model = build_model("tiny", arch=arch, **SMALL).eval()
    x = torch.randint(0, 7000, (2, 20, 2))
    y = x.clone()
    y[:, 12:] = torch.randint(0, 7000, (2, 8, 2))
    with torch.no_grad():
        a, b = model(x)[0], model(y)[0]
    torch.testing.assert_close(a[:, :12], b[:, :12])
    assert not torch.allclose(a[:, 12:], b[:, 12:])


def test_mamba_state_decay_is_not_weight_decayed():
    from orbitlaw.models.loop import adamw

    model = build_model("tiny", arch="mamba", **SMALL)
    decayed = {id(p) for p in adamw(model, 1e-3, 0.1).param_groups[0]["params"]}
    names = {n for n, p in model.named_parameters() if id(p) in decayed}
    assert not any(n.endswith("A_log") for n in names) and any(n.endswith("in_proj.weight") for n in names)


def test_every_preset_applies_to_every_arch_at_a_comparable_size():
    sizes = {}
    for arch, core in ARCHITECTURES.items():
        for preset in ("tiny", "control"):
            config = model_config(preset, arch=arch)
            assert config.arch == arch and config.pos == ("none" if core.recurrent_state else config.pos)
        sizes[arch] = build_model("tiny", arch=arch).num_parameters()
    assert max(sizes.values()) / min(sizes.values()) < 1.1, sizes  # same embeddings and head; cores differ
    with pytest.raises(ValueError, match="rope rotates attention queries"):
        model_config("tiny", arch="lstm", pos="rope")
    with pytest.raises(ValueError, match="unknown architecture 'gru'"):
        model_config("tiny", arch="gru")


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return orbits.simulate("two-body", {"train": 16, "val": 4}, 0, tmp_path_factory.mktemp("d") / "data",
                           progress=False)


@pytest.mark.parametrize("arch", architectures.BASELINES)
def test_each_core_trains_resumes_exactly_and_is_probed(arch, data, tmp_path):
    def cfg(out, steps):
        return TrainConfig(data=str(data), out=str(out), preset="tiny", arch=arch, max_steps=steps,
                           checkpoint_every=2, eval_every=2, log_every=1, batch_size=2, seed=3, device="cpu",
                           model_overrides={**SMALL, "block_size": 32})

    train(cfg(tmp_path / "whole", 4), progress=False)
    train(cfg(tmp_path / "split", 2), progress=False)
    train(cfg(tmp_path / "split", 4), resume=True, progress=False)
    def losses(run):
        return [{k: v for k, v in r.items() if k != "tokens_per_s"} for r in read_metrics(run)]

    assert losses(tmp_path / "whole") == losses(tmp_path / "split")
    saved = json.loads((tmp_path / "whole" / "config.json").read_text())
    assert saved["model"]["arch"] == arch and saved["model"]["pos"] == "none"

    probe = run_cli("probe", "--linear", "--run", tmp_path / "whole", "--data", data, "--out", tmp_path / "linear",
                    "--sequences", "8", "--quiet")
    assert probe.returncode == 0, probe.stderr
    assert json.loads((tmp_path / "linear" / "linear_probes.json").read_text())["best"]

    other = "rnn" if arch != "rnn" else "lstm"
    bad = run_cli("train", "--data", data, "--preset", "tiny", "--arch", other, "--out", tmp_path / "whole", "--resume",
                  "--max-steps", "6", "--quiet")
    assert bad.returncode != 0 and bad.stderr.strip() == (f"orbitlaw train: error: --resume with --arch {other}, "
                                                           f"but the run in {tmp_path / 'whole'} is a {arch} model")
    lssar = run_cli("train", "--data", data, "--preset", "tiny", "--arch", arch, "--attention", "lssar", "--out",
                    tmp_path / "x", "--quiet")
    assert lssar.returncode != 0 and "a " + arch + " model has none" in lssar.stderr
    assert not (tmp_path / "x").exists()


def test_the_registry_is_what_the_model_and_the_parser_read():
    from orbitlaw.cli import build_parser

    train = next(a for a in build_parser()._subparsers._group_actions[0].choices["train"]._actions if a.dest == "arch")
    assert tuple(train.choices) == architectures.NAMES  # the parser's torch-free copy equals the registry
    assert architectures.BASELINES == ("lstm", "rnn", "mamba")  # the study's --arch choices
    for name, core in ARCHITECTURES.items():
        model = build_model("tiny", arch=name, **SMALL)
        assert all(type(block) is type(core.block(model.config)) for block in model.blocks)
        assert core.has_attention == hasattr(model.blocks[0], "attn")
        assert name in architectures.describe() and core.summary in architectures.describe()
    with pytest.raises(ValueError, match="unknown architecture 'gru'; choose one of gpt, lstm, rnn, mamba"):
        architectures.get("gru")
