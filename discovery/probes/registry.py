"""Every probe of orbitlaw, by name: the one table that ``orbitlaw probe`` and the study's stages read.

Adding a probe is its module (a config dataclass with ``validate()`` and a run function ``run(cfg, ...) -> dict``
that writes into ``cfg.out``) and one entry in ``PROBES``: its mode flag on the command line, a one-line
summary, its traits (whether it reads a pretrained run, whether a killed run resumes from what it left) and
how its result is summed up. ``orbitlaw probe`` builds the config from the flags whose ``dest`` is a field
(:meth:`Probe.dest`: a few fields take a flag of another name), and refuses a flag that belongs to other
probes only (:func:`clashes`); the study's stages build it from their spec (:meth:`Probe.build`).

The table imports nothing heavy, since ``orbitlaw probe --help`` reads it: each record names its module and
loads its config class and run function on first use (:attr:`Probe.config`, :attr:`Probe.run`).
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ORACLES = ("knn", "true-law", "knn-window", "mlp-window")
"""The oracles' kinds (``--oracle``, ``OracleConfig.oracle``): :mod:`orbitlaw.discovery.probes.oracle`."""

COMMON = ("data", "out", "split", "seed", "device", "quiet")
"""Flags every probe takes (or ignores: an oracle runs no model, so on no device)."""


def _metrics(result: dict, out: Path) -> dict:
    return {"metrics": result["metrics"], "out": str(out)}


def _heldout(result: dict) -> dict:
    return {"kind": result["kind"], "target": result["target"], "heldout_unlabelled":
            result["metrics"]["heldout_unlabelled"]}


def _scores(result: dict, out: Path | None = None) -> dict:
    return {"scores": result["scores"], "target_scores": result["target_scores"]}


@dataclass(frozen=True)
class Probe:
    """One probe.

    name: its key; title: how a message names it; summary: what it does, one line after its mode (``--linear
    fits ...``); module, config_name, run_name: where its config class and run function live; flag: the
    command line's mode flag (None: the default mode); choices: the values that flag takes (None: a switch);
    help: the flag's ``--help`` text;
    runs_model: it reads a pretrained run (``--run``); resumes: a killed run continues from what it left in its
    output (``module.resumable(out)`` says whether there is such a state); progress: the run function takes
    ``progress=``; dests: config field -> the flag's ``dest`` where they differ; extra_flags: flags of this
    probe that are no field (``module.from_flags(args, values)`` turns them into values); stage_result:
    ``(result, out) -> dict``, what a study stage keeps; printed: ``result -> dict``, the line the command
    prints.
    """

    name: str
    title: str
    summary: str
    module: str
    config_name: str
    run_name: str
    flag: str | None = None
    choices: tuple[str, ...] | None = None
    help: str = ""
    runs_model: bool = True
    resumes: bool = False
    progress: bool = True
    dests: dict[str, str] = field(default_factory=dict)
    extra_flags: tuple[str, ...] = ()
    stage_result: Callable[[dict, Path], dict] = _metrics
    printed: Callable[[dict], dict] = _heldout

    def _load(self, name: str):
        return getattr(importlib.import_module(f"orbitlaw.discovery.probes.{self.module}"), name)

    @property
    def config(self) -> type:
        """The config dataclass (imported on first use)."""
        return self._load(self.config_name)

    @property
    def run(self) -> Callable[..., dict]:
        """The run function ``(cfg[, progress]) -> dict`` (imported on first use)."""
        return self._load(self.run_name)

    @property
    def mode_dest(self) -> str | None:
        """The ``dest`` of the mode flag (None for the default mode)."""
        return self.flag.lstrip("-").replace("-", "_") if self.flag else None

    @property
    def mode(self) -> str:
        """How a message names the mode: its flag, or the title of the default one."""
        return self.flag or self.title

    def dest(self, name: str) -> str:
        """The ``dest`` of the flag that sets config field ``name``."""
        return self.dests.get(name, name)

    def flags(self) -> tuple[str, ...]:
        """The ``dest`` of every flag this probe reads."""
        return (*(self.dest(f.name) for f in dataclasses.fields(self.config)), *self.extra_flags)

    def build(self, **values):
        """The config of ``values`` (its fields); unknown fields are a TypeError, as for the dataclass."""
        return self.config(**values)

    def from_args(self, args):
        """The config of a command line: each field from the flag of its ``dest`` (None: not given, so the
        field's default), then this probe's extra flags (``module.from_flags(args, values) -> values``)."""
        values = {f.name: getattr(args, self.dest(f.name), None) for f in dataclasses.fields(self.config)}
        values = {name: value for name, value in values.items() if value is not None}
        return self.config(**(self._load("from_flags")(args, values) if self.extra_flags else values))

    def resumable(self, out: Path) -> bool:
        """Whether ``out`` holds a state a re-run of this probe continues from."""
        return self.resumes and out.is_dir() and self._load("resumable")(out)

    def execute(self, cfg, progress: bool = True) -> dict:
        """Run the probe of config ``cfg``; its result."""
        return self.run(cfg, progress=progress) if self.progress else self.run(cfg)


PROBES: dict[str, Probe] = {
    "finetune": Probe("finetune", "the fine-tuned probe", "fine-tunes the run with a fresh linear force head",
                      "probe", "ProbeConfig", "finetune", resumes=True),
    "oracle": Probe("oracle", "the oracles", "predicts from the true state or raw positions, with no model",
                    "oracle", "OracleConfig", "run_oracle", flag="--oracle", choices=ORACLES, runs_model=False,
                    progress=False, help="a baseline instead of a run: knn on the true state (the reference's), "
                    "Newton's law, or k-NN / an MLP on the raw positions a W-step chunked model reads"),
    "linear": Probe("linear", "the linear probes", "fits ridge probes of the frozen run", "linear_probe",
                    "LinearProbeConfig", "linear_probes", flag="--linear", dests={"batch": "eval_batch"},
                    help="linear probes of every layer of the frozen run",
                    stage_result=lambda result, out: {"best": result["best"]}, printed=lambda result: result["best"]),
    "inductive-bias": Probe("inductive-bias", "the inductive-bias probe", "fits random functions of the state",
                            "inductive_bias", "InductiveBiasConfig", "inductive_bias", flag="--inductive-bias",
                            help="the reference's inductive-bias probe: fine-tune on many small random functions of "
                            "the true state and compare the extrapolations with oracles' on the state "
                            "(PROBE/inductive_bias.json and .png; see discovery.probes.inductive_bias)",
                            resumes=True, dests={"batch": "eval_batch", "sequences": "dataset_sequences"},
                            extra_flags=("reference_sizes",), stage_result=_scores,
                            printed=lambda result: {"kind": "inductive-bias", **_scores(result)}),
}

NAMES = tuple(PROBES)


def get(name: str) -> Probe:
    """The entry of ``name``; a one-line ValueError naming the choices for an unknown name."""
    if name not in PROBES:
        raise ValueError(f"unknown probe {name!r}; choose one of {', '.join(NAMES)}")
    return PROBES[name]


def chosen(args) -> Probe:
    """The probe a command line's flags choose: the one whose mode flag is set, else the default (no flag)."""
    for probe in PROBES.values():
        if probe.mode_dest and getattr(args, probe.mode_dest, None):
            return probe
    return next(p for p in PROBES.values() if p.flag is None)


def clashes(probe: Probe, given: dict[str, object], flag_of: dict[str, str]) -> str | None:
    """The message for the first of the ``given`` flags (``dest`` -> value, those set away from their defaults,
    in the parser's order) that only other probes read; ``flag_of``: ``dest`` -> its flag. None when none is."""
    mine = set(probe.flags()) | set(COMMON) | {p.mode_dest for p in PROBES.values()}
    for dest, value in given.items():
        if dest == "run" or dest in mine:
            continue
        owners = [p.title for p in PROBES.values() if dest in p.flags()]
        shown = f" {value}" if isinstance(value, str) else ""
        return f"{flag_of.get(dest, dest)}{shown} is for {' and '.join(owners)}; {probe.mode} {probe.summary}"
    if probe.runs_model and "run" not in given:
        return f"--run RUN is required: {probe.mode} {probe.summary} (or choose --oracle {'|'.join(ORACLES)})"
    if not probe.runs_model and "run" in given:
        return f"{probe.mode} needs no --run: it {probe.summary}"
    return None


def describe() -> str:
    """One line per probe, for ``--help``: ``mode: summary``."""
    return "; ".join(f"{p.mode}: {p.summary}" for p in PROBES.values())
