"""The whole study as one command (``orbitlaw run``): simulate, pretrain one GPT per attention, evaluate
with length extrapolation, probe the force, run symbolic regression (and the oracle), fold in the LLM
baselines, and write ``STUDY/report.md`` and ``STUDY/results.json``.

:mod:`orbitlaw.study.presets` holds the study sizes, :mod:`orbitlaw.study.stages` the cached stages,
:mod:`orbitlaw.study.figures` the figures and :mod:`orbitlaw.study.report` the report.
"""
