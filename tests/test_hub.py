"""Hugging Face round trips: a run's model as a pretrained folder and through a Hub (a loopback server speaking the
Hub's HTTP API to the real ``huggingface_hub`` client), and a dataset as Parquet and through ``datasets``."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from conftest import run_cli
from loopback_hub import LoopbackHub


def _same_weights(a, b) -> bool:
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


def test_a_run_saves_as_a_pretrained_folder_that_loads_and_reads_as_a_run(tiny_run, tmp_path):
    from orbitlaw.models.evaluate import evaluate, load_run
    from orbitlaw.models.gpt import GPT

    data, run = tiny_run
    model = GPT.from_pretrained(run)
    r = run_cli("export", "--run", run, "--out", tmp_path / "hf")
    assert r.returncode == 0, r.stderr
    folder = tmp_path / "hf"
    assert sorted(p.name for p in folder.iterdir()) == ["README.md", "checksums.json", "config.json",
                                                        "model.safetensors"]
    loaded = GPT.from_pretrained(folder)
    assert _same_weights(model, loaded) and not loaded.training
    config = json.loads((folder / "config.json").read_text())
    run_config = json.loads((run / "config.json").read_text())
    assert config["model"] == run_config["model"] and config["train"] == run_config["train"]
    assert config["model_type"] == "orbitlaw-gpt" and config["metrics"]["step"] == 2
    manifest = json.loads((data / "manifest.json").read_text())
    assert config["dataset"]["manifest_sha256"] == manifest["manifest_sha256"]
    card = (folder / "README.md").read_text()
    assert card.startswith("---\nlibrary_name: orbitlaw\n") and manifest["manifest_sha256"] in card
    # every command that reads a run reads the folder: the same evaluation as the run's
    assert evaluate(folder, data, n_seq=4)["loss"] == pytest.approx(evaluate(run, data, n_seq=4)["loss"])
    # a damaged weight file is refused before use, in one line
    blob = bytearray((folder / "model.safetensors").read_bytes())
    blob[-1] ^= 1
    (folder / "model.safetensors").write_bytes(bytes(blob))
    with pytest.raises(ValueError, match="checksum mismatch"):
        load_run(folder)
    # a directory that is not a pretrained folder of orbitlaw's is never replaced: a folder of notes, a training run
    # before its first checkpoint (config.json, no model_type), a pretrained folder with a file of the user's in it
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("mine")
    (tmp_path / "starting").mkdir()
    (tmp_path / "starting" / "config.json").write_text((run / "config.json").read_text())
    assert run_cli("export", "--run", run, "--out", tmp_path / "again").returncode == 0
    (tmp_path / "again" / "mine.txt").write_text("mine")
    for target in ("other", "starting", "again"):
        before = sorted(p.name for p in (tmp_path / target).iterdir())
        r = run_cli("export", "--run", run, "--out", tmp_path / target)
        assert r.returncode == 2 and "not a pretrained folder of orbitlaw's" in r.stderr, target
        assert sorted(p.name for p in (tmp_path / target).iterdir()) == before
    # a folder of its own is replaced whole; no staging directory is left beside it
    assert run_cli("export", "--run", run, "--out", tmp_path / "hf2").returncode == 0
    assert run_cli("export", "--run", run, "--out", tmp_path / "hf2").returncode == 0
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]
    # a model saved without its run is still a run to the commands (its whole block as the context)
    from orbitlaw.models.hub import save_pretrained

    bare = save_pretrained(model, tmp_path / "bare")
    assert json.loads((bare / "config.json").read_text())["context"] == model.config.block_size
    assert evaluate(bare, data, n_seq=2)["loss"] > 0


def test_push_to_hub_and_from_pretrained_go_through_the_hubs_http_api(tiny_run, tmp_path, monkeypatch):
    pytest.importorskip("huggingface_hub")
    from orbitlaw.models.gpt import GPT

    monkeypatch.setenv("HF_HUB_DISABLE_XET", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    _, run = tiny_run
    model = GPT.from_pretrained(run)
    with LoopbackHub() as hub:
        r = run_cli("export", "--run", run, "--push", "you/orbitlaw-tiny", "--endpoint", hub.url)
        assert r.returncode == 0, r.stderr
        assert sorted(hub.repos["you/orbitlaw-tiny"]) == ["README.md", "checksums.json", "config.json",
                                                          "model.safetensors"]
        assert hub.cards and hub.cards[-1]["library_name"] == "orbitlaw"  # the card's front matter validated
        pulled = GPT.from_pretrained("you/orbitlaw-tiny", endpoint=hub.url)
        assert _same_weights(model, pulled)
        assert (tmp_path / "cache" / "orbitlaw" / "you--orbitlaw-tiny@main" / "model.safetensors").is_file()
        with pytest.raises(ValueError, match="you/missing: no such local directory, and the Hub could not give"):
            GPT.from_pretrained("you/missing", endpoint=hub.url)
        closed = hub.url
    with pytest.raises(ValueError, match="the Hub could not give this model: .*[Cc]onnect"):
        GPT.from_pretrained("you/other", endpoint=closed)  # a network failure: one line, nothing half-loaded
    r = run_cli("export", "--run", run, "--push", "you/other", "--endpoint", closed)
    assert r.returncode == 2 and "you/other: the upload to the Hub failed" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_a_dataset_goes_to_parquet_and_datasets_and_back_byte_for_byte(tiny_run, tmp_path):
    pytest.importorskip("pyarrow")
    from orbitlaw.orbits import load_dataset

    data, _ = tiny_run
    r = run_cli("export", "--data", data, "--out", tmp_path / "pq")
    assert r.returncode == 0, r.stderr
    r = run_cli("import", "--parquet", tmp_path / "pq", "--out", tmp_path / "back")
    assert r.returncode == 0, r.stderr
    a, b = load_dataset(data, verify=True), load_dataset(tmp_path / "back", verify=True)
    assert json.loads((data / "manifest.json").read_text()) == json.loads((tmp_path / "back" / "manifest.json")
                                                                          .read_text())
    for split in a:
        for field in a[split].manifest["split_info"][split]["files"]:
            x, y = getattr(a[split], field), getattr(b[split], field)
            assert x.dtype == y.dtype and x.tobytes() == y.tobytes(), (split, field)
    datasets = pytest.importorskip("datasets")
    ds = datasets.load_dataset(str(tmp_path / "pq"), cache_dir=str(tmp_path / "hfds"))
    assert sorted(ds) == sorted(a)  # the dataset card keeps the splits as they are (val is not renamed)
    row = ds["train"][3]
    assert row["sequence"] == 3
    assert np.array_equal(np.array(row["positions"]), a["train"].positions[3], equal_nan=True)
    assert np.array_equal(np.array(row["tokens"]), a["train"].tokens[3])


def test_an_edited_parquet_column_is_refused_and_nothing_is_written(tiny_run, tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    data, _ = tiny_run
    assert run_cli("export", "--data", data, "--out", tmp_path / "pq").returncode == 0
    path = tmp_path / "pq" / "train.parquet"
    table = pq.read_table(path)
    masses = table.column("masses").combine_chunks()
    values = masses.flatten().to_numpy(zero_copy_only=False).copy()
    values[0] *= 1.01
    edited = pa.FixedSizeListArray.from_arrays(pa.array(values), masses.type.list_size)
    pq.write_table(table.set_column(table.column_names.index("masses"), "masses", edited), path)
    r = run_cli("import", "--parquet", tmp_path / "pq", "--out", tmp_path / "back")
    assert r.returncode == 2 and "column 'masses' does not match the manifest's checksum" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "back").exists() and not list(tmp_path.glob(".back*"))
