"""LSSA and LSSAR (LSSA with re-weighting), one op in the layout of flash-linear-attention's ``ops/<op>/``:

==============  ==========================================================================================
``naive.py``    the plain PyTorch references ``lssa_reference``, ``lssar_reference`` (and ``reweight``)
``fused.py``    the fused Triton op: ``lssa_triton``, ``lssar_triton``, their autograd Function, launchers
``forward.py``  the forward kernel (one kernel; REWEIGHT selects LSSAR's two passes)
``backward.py`` the backward kernels shared by both (coefficient pre-pass, dk / dv, dq), with the maths
``tiles.py``    Triton device helpers: softplus, powers, re-weighting of a tile, row-statistics layout
``launch.py``   tile sizes, autotuning candidates, the launcher, the inverse-norm kernel
==============  ==========================================================================================

tests/test_kernels.py checks the references against per-row loops and the fused op against the
references. Importing this package does not import triton (only ``fused.py`` and the kernel modules do).
"""
