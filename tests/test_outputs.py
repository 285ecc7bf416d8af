"""Outputs with one writer, no half-written output and no link out: `probe`, `discover` and `llm run` take the
output's lock as `train` and `simulate` do; a `discover` whose figure cannot be written puts its law file back;
a probe output whose result links out of it is refused unread."""

from __future__ import annotations

import errno

import numpy as np
import pytest

from orbitlaw.cli import main
from orbitlaw.provenance import OutputLock


def _table(path):
    rng = np.random.default_rng(0)
    r, m1, m2 = rng.uniform(0.5, 5, 300), rng.uniform(0.1, 1, 300), rng.uniform(0.1, 1, 300)
    rows = ["r,m1,m2,F"] + [f"{a},{b},{c},{39.478 * b * c / a**2}" for a, b, c in zip(r, m1, m2, strict=True)]
    path.write_text("\n".join(rows) + "\n")
    return path


def _discover(table, out):
    return main(["discover", "--input", str(table), "--target", "F", "--features", "r,m1,m2", "--seeds", "1",
                 "--points", "150", "--restarts", "1", "--budget", "2000", "--workers", "1", "--out", str(out)])


def test_a_second_probe_or_discover_into_the_same_output_is_refused(tmp_path, capsys):
    law = tmp_path / "LAW.json"
    with OutputLock(tmp_path / ".LAW.json.lock", f"law {law}"):  # as a running `orbitlaw discover` holds it
        assert _discover(_table(tmp_path / "t.csv"), law) == 2
    err = capsys.readouterr().err.strip()
    assert "being written by another orbitlaw process" in err and len(err.splitlines()) == 1
    assert not law.exists()
    probe = tmp_path / "probe"
    with OutputLock(tmp_path / ".probe.lock", f"probe output {probe}"):
        assert main(["probe", "--run", str(tmp_path / "run"), "--data", str(tmp_path / "data"),
                     "--out", str(probe), "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert "being written by another orbitlaw process" in err and len(err.splitlines()) == 1
    assert not probe.exists()


def test_discover_leaves_no_law_without_its_figure(tmp_path, monkeypatch, capsys):
    import orbitlaw.discovery.sr.pareto_plot as pareto

    table, law = _table(tmp_path / "t.csv"), tmp_path / "LAW.json"

    def full_disk(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "LAW.pareto.png"))

    monkeypatch.setattr(pareto, "plot_pareto", full_disk)
    assert _discover(table, law) == 1
    assert "No space left on device" in capsys.readouterr().err
    assert not law.exists() and not (tmp_path / "LAW.pareto.png").exists()
    monkeypatch.undo()
    assert _discover(table, law) == 0  # the law and its figure
    before = law.read_bytes()
    assert (tmp_path / "LAW.pareto.png").is_file() and not (tmp_path / ".LAW.json.lock").exists()
    monkeypatch.setattr(pareto, "plot_pareto", full_disk)
    assert _discover(table, law) == 1
    assert law.read_bytes() == before  # a failed re-run leaves the earlier law as it was
    assert not list(tmp_path.glob(".*tmp*"))


def test_a_second_llm_run_into_the_same_directory_is_refused_before_it_reads_it(tmp_path):
    from orbitlaw.discovery.llm.runner import run as run_llm

    out = tmp_path / "llm"
    with OutputLock(tmp_path / ".llm.lock", f"LLM run {out}"):  # as a running `orbitlaw llm run` holds it
        with pytest.raises(ValueError, match="being written by another orbitlaw process"):
            run_llm("openai-compatible", "some-model", 1, out, base_url="http://127.0.0.1:9/v1", progress=False)
    assert not out.exists()


def test_a_probe_output_whose_metrics_link_out_of_it_is_refused(tmp_path):
    from orbitlaw.discovery.probes.probe_result import check_out

    secret = tmp_path / "secret.json"
    secret.write_text('{"settings": {"TOPSECRET": 1}}')
    out = tmp_path / "probe"
    out.mkdir()
    (out / "metrics.json").symlink_to(secret)
    with pytest.raises(ValueError, match="leads outside the probe output") as err:
        check_out(out, {"steps": 1})
    assert "TOPSECRET" not in str(err.value)
