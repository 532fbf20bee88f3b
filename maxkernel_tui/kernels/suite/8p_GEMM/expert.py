"""Expert baseline for 8p_GEMM: jax's own Pallas TPU matmul with JAXBench's tuned tiling.

jax.experimental.pallas.ops.tpu.matmul, block_shape (1024, 2048) and block_k 1024 (JAXBench's
8p optimized.py). A tuned block larger than a dimension (the small check shapes) is cut to the
largest multiple of 128 that divides it, or to the whole dimension.
"""
import jax.numpy as jnp
from jax.experimental.pallas.ops.tpu.matmul import matmul

BLOCK_M, BLOCK_N, BLOCK_K = 1024, 2048, 1024


def _block(dim, tuned):
    """The largest multiple of 128 up to `tuned` that divides `dim`; `dim` itself if none."""
    for size in range(min(tuned, dim) // 128 * 128, 0, -128):
        if dim % size == 0:
            return size
    return dim


def computation(a, b):
    m, k = a.shape
    n = b.shape[1]
    block_shape = (_block(m, BLOCK_M), _block(n, BLOCK_N))
    return matmul(a, b, block_shape=block_shape, block_k=_block(k, BLOCK_K), out_dtype=jnp.bfloat16)
