"""orbitlaw: discover physical laws with sequence models.

The importable rooms are top-level packages: ``orbits`` (simulation and datasets), ``models`` (GPTs),
``kernels`` (Triton attention kernels) and ``discovery`` (probes, symbolic regression, verdicts).
This package holds only the command-line interface that sits on top of them.
"""

__version__ = "0.1.0"
