"""Sub-commands of the ``orbitlaw`` CLI, one module each."""
