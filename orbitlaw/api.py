"""The toolkit from Python: one function per step of the study, each a thin face over what its command calls.

    import orbitlaw
    data = orbitlaw.simulate("two-body", {"train": 2000, "val": 200}, "data/two-body", seed=0)
    orbitlaw.train(data, "runs/tiny", preset="tiny", max_steps=800)
    orbitlaw.probe("probes/force", run="runs/tiny", data=probe_data)
    law = orbitlaw.discover("probes/force/predictions.csv", "F_pred", subset=["near_train"])
    law.verdict, law.sympy(), law.latex()

Each takes the command's settings as keywords, with the same defaults, and gives the same result as the command on
the same inputs and seed (``tests/test_api.py``); each resumes after a kill as the command does. Units are the
toolkit's: AU, years, solar masses. :class:`~orbitlaw.discovery.sr.regressor.LawRegressor` is the symbolic
regression as a scikit-learn estimator.
"""

from __future__ import annotations

from pathlib import Path

from orbitlaw.discovery.sr.regressor import Law, search_settings


def simulate(preset: str, splits: dict[str, int] | str, out: str | Path, *, seed: int = 0, workers: int = 1,
             overrides: dict | None = None, progress: bool = True, repair: bool = False) -> Path:
    """Simulate the dataset preset ``preset`` (``orbitlaw simulate --preset``; e.g. ``"two-body"``) with ``splits``
    (``{"train": 2000}`` or ``"train=2000"``) sequences into ``out``; ``overrides`` replace the preset's fields.
    Returns the dataset's directory (:func:`orbitlaw.orbits.simulate`)."""
    from orbitlaw import orbits

    return orbits.simulate(preset, splits, seed, out, workers=workers, overrides=overrides, progress=progress,
                           repair=repair)


def load_dataset(path: str | Path) -> dict:
    """The splits of a dataset directory, checked against its checksums (:func:`orbitlaw.orbits.load_dataset`)."""
    from orbitlaw import orbits

    return orbits.load_dataset(path)


def train(data: str | Path, out: str | Path, *, resume: bool = False, progress: bool = True, **fields) -> dict:
    """Train a sequence model on the dataset ``data`` into the run directory ``out`` (``orbitlaw train``);
    ``fields`` are :class:`~orbitlaw.models.train.TrainConfig`'s (``preset="tiny"``, ``attention="lssar"``,
    ``max_steps=800``, ...). Returns the run's summary (its last step and losses)."""
    from orbitlaw.models.train import TrainConfig
    from orbitlaw.models.train import train as train_run

    return train_run(TrainConfig(data=str(data), out=str(out), **fields), resume=resume, progress=progress)


def load_model(run: str | Path, device: str = "cpu"):
    """(model, config) of a run directory: its latest checkpoint, weights checked against their checksum."""
    from orbitlaw.models.evaluate import load_run

    return load_run(run, device=device)


def probe(out: str | Path, *, kind: str = "finetune", progress: bool = True, **fields) -> dict:
    """Run the probe ``kind`` (``"finetune"``, the force probe; ``"oracle"``, ``"linear"``, ``"inductive-bias"``:
    :data:`orbitlaw.discovery.probes.registry.PROBES`) into ``out`` (``orbitlaw probe``); ``fields`` are its
    config's (``run=``, ``data=``, ``steps=``, ...). Returns its result (metrics; the fine-tune's
    ``predictions.csv`` is in ``out``)."""
    from orbitlaw.discovery.probes import registry

    chosen = registry.get(kind)
    return chosen.execute(chosen.build(out=str(out), **fields), progress=progress)


def discover(table, target: str, *, out: str | Path | None = None, progress: bool = False, budget: int | None = None,
             maxsize: int | None = None, **fields) -> Law:
    """Symbolic regression of ``target`` in ``table`` (a CSV path, a DataFrame or a mapping of columns) with its
    verdict (``orbitlaw discover``); ``fields`` are :class:`~orbitlaw.discovery.sr.symbolic.DiscoverConfig`'s
    (``features``, ``seeds``, ``quantity``, ...), and ``budget`` and ``maxsize`` each search's, as the command's
    flags. With ``out`` (a LAW.json path), written there and resumed from there after a kill, as the command does."""
    from orbitlaw.discovery.sr.symbolic import discover_law, discover_to_file

    if budget is not None or maxsize is not None:
        if "settings" in fields:
            raise TypeError("give budget and maxsize, or settings, not both")
        fields["settings"] = search_settings(budget, maxsize)
    if out is None:
        return Law(discover_law(table, target, progress=progress, **fields))
    return Law(discover_to_file(out, table, target, progress=progress, **fields))
