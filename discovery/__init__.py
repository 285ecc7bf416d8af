"""discovery: has the model learned Newton's law? Probes, symbolic regression, a verdict, LLM baselines.

- :mod:`orbitlaw.discovery.probe` fine-tunes a pretrained run with a fresh linear force head (the reference
  protocol); :mod:`orbitlaw.discovery.oracle` gives the k-nearest-neighbour and true-law baselines through the same
  path; :mod:`orbitlaw.discovery.linear_probe` reads |F|, 1/r^2 and orbital elements linearly from each layer.
- :mod:`orbitlaw.discovery.symbolic` (``discover_law``) runs symbolic regression (:mod:`orbitlaw.discovery.backends`:
  Operon, or PySR when Julia is available) on a table of predictions; :mod:`orbitlaw.discovery.law` simplifies,
  refits and judges the expressions: is it C * m1^a * m2^b * r^c, and is it Newton's (1, 1, -2)?
- :mod:`orbitlaw.discovery.llm` asks LLMs the same question and scores their answers.

Units: r in AU, masses in Msun, forces in Msun AU / yr^2 (G = 4 pi^2).
"""
