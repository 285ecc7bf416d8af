"""probes: what a pretrained model knows about the force, read out on held-out planet steps.

One record per probe in :mod:`~orbitlaw.discovery.probes.registry` (the table ``orbitlaw probe`` and the study's
stages read), each a module with a config dataclass and a run function writing into its output:

- :mod:`~orbitlaw.discovery.probes.probe` fine-tunes a pretrained run with a fresh linear force head (the
  reference protocol); :mod:`~orbitlaw.discovery.probes.oracle` gives the k-nearest-neighbour, window and
  true-law baselines through the same rows and files; :mod:`~orbitlaw.discovery.probes.linear_probe` reads |F|,
  1/r^2 and orbital elements linearly from each layer of the frozen run;
  :mod:`~orbitlaw.discovery.probes.inductive_bias` compares the run's extrapolations with oracles' on the state.
- What they share: :mod:`~orbitlaw.discovery.probes.probe_data` (a split's planet steps as rows, their true
  state and force), :mod:`~orbitlaw.discovery.probes.labels` (which rows are labelled),
  :mod:`~orbitlaw.discovery.probes.probe_result` (``predictions.csv`` and ``metrics.json``) and
  :mod:`~orbitlaw.discovery.probes.forces_plot` (true vs predicted force arrows).

Units: r in AU, masses in Msun, forces in Msun AU / yr^2 (G = 4 pi^2).
"""
