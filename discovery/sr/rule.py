"""The study's precision, in a module that imports nothing, so that the study's presets (read by ``--help``) and
the symbolic regression take it from one place."""

PRECISION = 0.02
"""RMS of ln (2%): the default ``tolerance`` of a symbolic regression under ``se`` selection
(:class:`~orbitlaw.discovery.sr.symbolic.DiscoverConfig`, ``orbitlaw discover``, :class:`~orbitlaw.LawRegressor`)
and the precision every study judges at (``orbitlaw.study.presets.VERDICT_RULE``), so that a law judged alone reads
as the study's report reads it. Chosen by the precision rule (docs/controls.md, "The study's precision")."""
