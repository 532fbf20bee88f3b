"""Translating PyTorch modules in KernelBench's format into JAX references, from their source.

No jax and no torch at import time: `jax_ops` (the helpers copied into generated references) is
imported only by worker processes and tests; `torch_worker` only where torch is installed.
"""
