"""sr: symbolic regression of a law from a table, and a graded verdict on it (is it Newton's?).

- :mod:`~orbitlaw.discovery.sr.symbolic` (``discover_law`` and its config,
  :class:`~orbitlaw.discovery.sr.symbolic.DiscoverConfig`) runs the seeds (:mod:`~orbitlaw.discovery.sr.seed_fit`)
  on a table (:mod:`~orbitlaw.discovery.sr.table`) and lets them vote (:mod:`~orbitlaw.discovery.sr.cross_seed`);
- :mod:`~orbitlaw.discovery.sr.backends` searches (Operon, or PySR when Julia is available), leaving out gross
  errors (:mod:`~orbitlaw.discovery.sr.outliers`) and beside a log-space power-law screen
  (:mod:`~orbitlaw.discovery.sr.powerlaw`);
- :mod:`~orbitlaw.discovery.sr.law` simplifies, scores and refits the expressions,
  :mod:`~orbitlaw.discovery.sr.snapping` sets the constants the data cannot tell from simple numbers to them,
  :mod:`~orbitlaw.discovery.sr.choice` keeps the Pareto front, chooses from it and reads a law's form, and
  :mod:`~orbitlaw.discovery.sr.verdict` grades the chosen one: is it C * m1^a * m2^b * r^c, and is it Newton's
  (1, 1, -2)? Expressions are read back from text by :mod:`~orbitlaw.discovery.sr.expression_text`, never
  evaluated; :mod:`~orbitlaw.discovery.sr.pareto_plot` draws the seeds' fronts.

Units: r in AU, masses in Msun, forces in Msun AU / yr^2 (G = 4 pi^2).
"""
