"""The notebooks in notebooks/: each runs top to bottom without an error (executed with nbclient, kernel
``python3``, cwd notebooks/), shows its figures, and is stored without outputs.

The kernel inherits this process's environment, so ``TRITON_INTERPRET=1`` from conftest.py reaches it.
"""

import shutil
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

NOTEBOOK_DIR = Path(__file__).resolve().parent.parent / "notebooks"
NOTEBOOKS = ["01_orbits", "02_attention", "03_train_and_probe", "04_discover_the_law", "05_llm_baselines"]
CELL_TIMEOUT_S = 300


def _read(name: str):
    return nbformat.read(NOTEBOOK_DIR / f"{name}.ipynb", as_version=4)


def _execute(nb, cwd: Path):
    """Run every cell in a fresh python3 kernel with working directory ``cwd``; raises on a cell error."""
    client = nbclient.NotebookClient(nb, timeout=CELL_TIMEOUT_S, kernel_name="python3",
                                     resources={"metadata": {"path": str(cwd)}})
    client.execute()
    return nb


def _images(nb) -> int:
    return sum("image/png" in out.get("data", {}) for cell in nb.cells if cell.cell_type == "code"
               for out in cell.outputs)


def test_every_notebook_is_listed():
    assert sorted(p.stem for p in NOTEBOOK_DIR.glob("*.ipynb")) == NOTEBOOKS


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_stored_without_outputs(name):
    nb = _read(name)
    nbformat.validate(nb)
    assert nb.metadata["kernelspec"]["name"] == "python3"
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [], f"{name}: a code cell is stored with outputs"
            assert cell.execution_count is None, f"{name}: a code cell is stored with an execution count"


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_runs(name):
    before = sorted(NOTEBOOK_DIR.rglob("*"))
    nb = _execute(_read(name), NOTEBOOK_DIR)
    assert _images(nb) >= 1, f"{name} displayed no figure"
    assert sorted(NOTEBOOK_DIR.rglob("*")) == before, f"{name} wrote files into notebooks/"


def test_llm_notebook_without_the_reference_data(tmp_path):
    """Run from outside the repository, 05 finds no reference directory and scores a local stand-in run."""
    shutil.copy(NOTEBOOK_DIR / "05_llm_baselines.ipynb", tmp_path)
    nb = _execute(nbformat.read(tmp_path / "05_llm_baselines.ipynb", as_version=4), tmp_path)
    text = "".join(out.get("text", "") for cell in nb.cells if cell.cell_type == "code" for out in cell.outputs)
    assert "scoring a tiny local stand-in run instead" in text
    assert "constant-mean" in text
    assert sorted(p.name for p in tmp_path.iterdir()) == ["05_llm_baselines.ipynb"]  # nothing written beside it
