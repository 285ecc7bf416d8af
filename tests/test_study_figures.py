"""Attention weights of the GPT (models.inspect) and the study's figures (orbitlaw.study.figures)."""

import math

import numpy as np
import pytest
import torch
from matplotlib.image import imread

from orbitlaw import orbits
from orbitlaw.models import ATTENTIONS, GPT, GPTConfig
from orbitlaw.models.evaluate import evaluate, load_run
from orbitlaw.models.inspect import attention_entropy, attention_qkv, attention_weights, max_weight
from orbitlaw.models.train import TrainConfig, train
from orbitlaw.study.figures import plot_attention, plot_extrapolation, plot_loss_curves

T = 24
CASES = {"causal": {}, "window": {"window": 5},
         "rope-window-chunked": {"pos": "rope", "window": 7, "chunk_size": 5}}


def _random_model(attention: str, **overrides) -> GPT:
    """A tiny GPT whose attention scores are O(1) (not the near-uniform scores of the 0.02 init)."""
    torch.manual_seed(0)
    config = GPTConfig(vocab_size=40, block_size=32, n_layer=2, n_head=2, n_embd=32, attention=attention,
                       pad_id=None, **{"p": 15.0, **overrides})
    model = GPT(config)
    for block in model.blocks:
        torch.nn.init.normal_(block.attn.c_attn.weight, std=0.3)
    return model.eval()


def _attention_outputs(model: GPT, tokens) -> list[torch.Tensor]:
    """What each layer's attention computes before its output projection, as (B, H, T, D)."""
    outs = []
    hooks = [b.attn.c_proj.register_forward_pre_hook(lambda m, args: outs.append(args[0])) for b in model.blocks]
    with torch.no_grad():
        model(tokens)
    for h in hooks:
        h.remove()
    H = model.config.n_head
    return [y.view(y.shape[0], y.shape[1], H, -1).transpose(1, 2) for y in outs]


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("attention", ATTENTIONS)
def test_weights_reproduce_the_attention_output(attention, case):
    overrides = CASES[case]
    model = _random_model(attention, **overrides)
    tokens = torch.randint(0, 40, (3, T, 2), generator=torch.Generator().manual_seed(1))
    weights = attention_weights(model, tokens)
    qkv = attention_qkv(model, tokens)
    expected = _attention_outputs(model, tokens)
    assert len(weights) == len(expected) == model.config.n_layer
    i, j = torch.arange(T)[:, None], torch.arange(T)[None, :]
    allowed = (j <= i) & (j > i - overrides.get("window", T + 1))
    for w, (_, _, v), y in zip(weights, qkv, expected, strict=True):
        assert w.shape == (3, 2, T, T) and w.dtype == torch.float32
        assert torch.all(w[..., ~allowed] == 0) and torch.all(w >= 0)
        if attention == "laser":
            m = v.amax(dim=-2, keepdim=True)
            out = torch.log(w @ torch.exp(v - m)) + m
        else:
            out = w @ v
        # float32: the error scales with the outputs' size (a fixed 1e-5 failed at 1.05e-5 on some machines
        # for outputs of size ~3); 1e-5 relative is ~80 ulps, far below any lost mask or scale
        scale = max(y.abs().max().item(), out.abs().max().item(), 1e-30)
        assert (out - y).abs().max().item() <= 1e-5 * scale, ((out - y).abs().max(), scale)
        if attention in ("softmax", "lssa", "lssar", "laser"):
            torch.testing.assert_close(w.sum(-1), torch.ones(3, 2, T))
    # the weights are not trivially uniform: the test would not notice a lost mask or scale otherwise
    assert attention_entropy(weights[0])[..., -1].nanmean() < math.log(min(T, overrides.get("window", T))) - 0.01


def test_lssar_with_large_power_is_sharper_than_lssa():
    tokens = torch.randint(0, 40, (2, T, 2), generator=torch.Generator().manual_seed(2))
    lssa = attention_weights(_random_model("lssa"), tokens)[0]
    lssar = attention_weights(_random_model("lssar", p=15.0), tokens)[0]
    assert (max_weight(lssar)[..., 4:] >= max_weight(lssa)[..., 4:] - 1e-6).all()
    assert attention_entropy(lssar)[..., 4:].mean() < attention_entropy(lssa)[..., 4:].mean()


def test_entropy_of_uniform_weights_is_log_of_prefix_length():
    n = 50
    causal = torch.tril(torch.ones(n, n))
    uniform = causal / causal.sum(-1, keepdim=True)
    log_prefix = torch.log(torch.arange(1, n + 1, dtype=torch.float32))
    torch.testing.assert_close(attention_entropy(uniform), log_prefix)
    torch.testing.assert_close(attention_entropy(3.0 * causal[None, None]), log_prefix[None, None])  # unnormalised
    torch.testing.assert_close(max_weight(uniform), 1 / torch.arange(1, n + 1, dtype=torch.float32))
    assert torch.all(attention_entropy(torch.eye(n)) == 0)
    assert torch.isnan(attention_entropy(torch.zeros(1, 3))).all()  # an all-zero relu row has no distribution


# ----------------------------------------------------------------------------------------------------
# Figures from tiny real runs

SMALL = {"n_layer": 2, "n_head": 2, "n_embd": 32, "block_size": 32}


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    root = tmp_path_factory.mktemp("study")
    data = orbits.simulate("two-body", {"train": 16, "val": 4}, 0, root / "data",
                           overrides={"seq_len": 65, "steps": 32}, progress=False)
    runs, evals = {}, {}
    for attention in ("softmax", "lssar"):
        run = root / attention
        train(TrainConfig(data=str(data), out=str(run), attention=attention, pos="rope", max_steps=6,
                          checkpoint_every=6, eval_every=3, log_every=1, batch_size=4, eval_sequences=4,
                          model_overrides=SMALL), progress=False)
        evals[attention] = evaluate(run, data, lengths=[1, 2], n_seq=4, extrapolation_sequences=2)
        runs[attention] = run
    evals["no-lengths"] = {k: v for k, v in evals["softmax"].items() if k != "extrapolation"}
    return {"data": data, "runs": runs, "evals": evals, "out": root / "figures"}


def _check_png(path, min_side=200):
    image = imread(path)
    assert image.shape[0] >= min_side and image.shape[1] >= min_side
    colours = np.unique(image.reshape(-1, image.shape[-1]), axis=0)
    assert len(colours) > 20  # lines, text and colour maps, not a blank canvas
    assert not list(path.parent.glob(f".{path.name}*"))  # no temporary file left behind


def test_loss_curves(study):
    out = plot_loss_curves(study["runs"], study["out"] / "loss.png")
    assert out == study["out"] / "loss.png"
    _check_png(out)


def test_extrapolation_skips_evals_without_it(study):
    out = plot_extrapolation(study["evals"], study["out"] / "extrapolation.png")
    _check_png(out)


def test_attention_maps_and_entropy(study):
    models = {name: load_run(run)[0] for name, run in study["runs"].items()}
    models["relu-untrained"] = GPT(GPTConfig(**SMALL, attention="relu", pos="learned"))  # sees its 32-token block
    tokens = np.asarray(orbits.load_dataset(study["data"])["val"].tokens[:2, :40])
    maps, entropy = plot_attention(models, tokens, study["out"] / "maps.png", study["out"] / "entropy.png")
    _check_png(maps, min_side=400)
    _check_png(entropy)


def test_empty_inputs_raise_one_line_errors(study, tmp_path):
    calls = [lambda: plot_loss_curves({}, tmp_path / "a.png"),
             lambda: plot_loss_curves({"none": tmp_path}, tmp_path / "a.png"),
             lambda: plot_extrapolation({}, tmp_path / "b.png"),
             lambda: plot_extrapolation({"softmax": study["evals"]["no-lengths"]}, tmp_path / "b.png"),
             lambda: plot_attention({}, np.zeros((1, 8, 2), np.int64), tmp_path / "c.png", tmp_path / "d.png")]
    for call in calls:
        with pytest.raises(ValueError) as info:
            call()
        assert "\n" not in str(info.value)
    assert not list(tmp_path.glob("*.png"))
