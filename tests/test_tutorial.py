"""docs/tutorial.md runs as written: its Python script prints the verdicts it quotes (Newton's law itself
`newtonian`, the briefly trained tiny GPT not), and its shell commands run. About 1.5 min of two cores, so marked
slow: ``python -m pytest -m slow tests/test_tutorial.py``."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

TUTORIAL = Path(__file__).resolve().parents[1] / "docs" / "tutorial.md"


@pytest.mark.slow
def test_the_tutorial_runs_as_written_and_prints_what_it_quotes(tmp_path):
    text = TUTORIAL.read_text()
    script, = re.findall(r"```python\n(.*?)```", text, re.S)
    shell, = re.findall(r"```bash\n(.*?)```", text, re.S)
    quoted, = re.findall(r"```\n(Newton's law itself.*?)```", text, re.S)
    run = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stderr[-2000:]
    printed = run.stdout.strip().splitlines()
    assert printed == quoted.strip().splitlines()  # the verdicts, laws and distances the page quotes
    assert printed[0].startswith("Newton's law itself: newtonian") and " newtonian " not in printed[2]
    (tmp_path / "shell").mkdir()
    done = subprocess.run(["bash", "-ec", shell], cwd=tmp_path / "shell", capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    assert (tmp_path / "shell" / "tutorial" / "newton" / "LAW.json").is_file()
