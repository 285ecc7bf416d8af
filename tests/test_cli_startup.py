"""The command line answers at once: building the parser imports no torch and no numba, the
commands that need no torch never import it, and the names the parser copies from heavy modules
(``orbitlaw/commands/_choices.py``) stay equal to their owners. How long start-up takes is measured by
benchmarks/cli_startup.py, not asserted here."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from orbitlaw.cli import build_parser, commands
from orbitlaw.commands import _choices

HEAVY = ("torch", "numba")  # each costs 0.3-1 s of start-up; neither is an argument definition

# Runs the CLI on each argv given as JSON, then prints which of HEAVY it imported.
PROBE = """
import json, sys
from orbitlaw.cli import main
for argv in json.loads(sys.argv[1]):
    try:
        main(argv)
    except SystemExit:
        pass
print(json.dumps([m for m in sys.argv[2].split(",") if m in sys.modules]))
"""


def imported(argvs: list[list[str]], modules=HEAVY) -> list[str]:
    """Which of ``modules`` a fresh interpreter has imported after running ``orbitlaw`` on each of ``argvs``."""
    out = subprocess.run([sys.executable, "-c", PROBE, json.dumps(argvs), ",".join(modules)], capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("argv", [["--help"], ["--version"], *([c, "--help"] for c in commands()),
                                  ["llm", "run", "--help"], ["llm", "score", "--help"]], ids=" ".join)
def test_help_imports_neither_torch_nor_numba(argv):
    assert imported([argv]) == []


def test_commands_that_need_no_torch_never_import_it(tmp_path):
    data, missing = str(tmp_path / "data"), str(tmp_path / "missing")
    argvs = [["simulate", "--preset", "two-body", "--splits", "train=2", "--seed", "0", "--out", data, "--quiet"],
             ["verify", "--data", data],
             ["plot", "--data", data, "--out", str(tmp_path / "orbit.png")],
             # up to the missing input: past the import of every module these commands work with
             ["discover", "--input", f"{missing}.csv", "--target", "F", "--out", str(tmp_path / "law.json")],
             ["llm", "score", "--prompts", missing, "--predictions", missing, "--out", str(tmp_path / "s.json")]]
    assert imported(argvs, modules=("torch",)) == []
    assert (tmp_path / "orbit.png").is_file()  # the commands ran, not only their parsers


def test_the_parsers_copies_equal_their_owners():
    from orbitlaw import orbits
    from orbitlaw.discovery.llm.providers import PROVIDERS
    from orbitlaw.discovery.llm.systems import force_probe_presets
    from orbitlaw.kernels import registry
    from orbitlaw.models import architectures

    assert _choices.ORBIT_PRESETS == orbits.DATASET_PRESETS
    assert _choices.LLM_PRESETS == force_probe_presets()
    assert _choices.ARCHITECTURES == {n: (a.summary, a.baseline) for n, a in architectures.ARCHITECTURES.items()}
    assert _choices.LLM_PROVIDERS == PROVIDERS
    assert _choices.ATTENTIONS == {n: (a.summary, a.uses_p) for n, a in registry.ATTENTIONS.items()}
    assert _choices.describe_attentions() == registry.describe()
    assert build_parser().parse_args(["run", "--preset", "smoke"]).workers == min(2, os.cpu_count() or 1)


# Flags whose default differs from their config field's, each on purpose (anything else must agree):
DELIBERATE = {
    ("train", "preset"): "required on the command line unless --config gives every setting",
    ("discover", "metric"): "None lets --protocol reference choose its metric; the command passes it on as auto",
    ("discover", "workers"): "the command fits seeds side by side on two cores by default; the API on one",
}


def test_every_flag_defaults_to_its_config_fields_default():
    """A flag whose name is a config field (train: TrainConfig, probe: ProbeConfig, discover: DiscoverConfig) has
    the field's default, so the command and the Python API agree (list fields as comma-separated text)."""
    import dataclasses

    from orbitlaw.cli import build_parser
    from orbitlaw.discovery.probes.probe import ProbeConfig
    from orbitlaw.discovery.sr.symbolic import DiscoverConfig
    from orbitlaw.models.train_config import TrainConfig

    commands = next(a for a in build_parser()._actions if a.dest == "command").choices
    checked = 0
    for name, config in (("train", TrainConfig), ("probe", ProbeConfig), ("discover", DiscoverConfig)):
        fields = {f.name: f for f in dataclasses.fields(config)}
        for action in commands[name]._actions:
            field = fields.get(action.dest)
            if field is None or (field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING):
                continue  # not a field, or one the command requires
            default = field.default if field.default is not dataclasses.MISSING else field.default_factory()
            flag = action.default
            if isinstance(default, list) and isinstance(flag, str):
                flag = [x for x in flag.split(",") if x]
            if (name, action.dest) in DELIBERATE:
                assert flag != default, f"{name} --{action.dest} now agrees with its field: drop it from DELIBERATE"
                continue
            assert flag == default, f"orbitlaw {name} {action.option_strings[0]} defaults to {flag!r}, " \
                                    f"{config.__name__}.{action.dest} to {default!r}"
            checked += 1
    assert checked > 40
