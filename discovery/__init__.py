"""discovery: has the model learned Newton's law? Three rooms that never import each other.

- :mod:`orbitlaw.discovery.probes` reads the force out of a pretrained model (a fine-tuned head, linear probes of
  each layer, the inductive-bias probe) and gives the oracles' baselines through the same rows and files;
- :mod:`orbitlaw.discovery.sr` runs symbolic regression on a table of predictions and grades the law it finds:
  is it C * m1^a * m2^b * r^c, and is it Newton's (1, 1, -2)?
- :mod:`orbitlaw.discovery.llm` asks LLMs the same question and scores their answers (through ``sr``).

Units: r in AU, masses in Msun, forces in Msun AU / yr^2 (G = 4 pi^2).
"""
