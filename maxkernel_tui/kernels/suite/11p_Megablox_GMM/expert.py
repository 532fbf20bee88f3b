"""Expert baseline for 11p_Megablox_GMM: jax's own Pallas TPU grouped matmul (megablox gmm).

jax.experimental.pallas.ops.tpu.megablox.gmm with JAXBench's tiling (256, 1024, 1024): f32
accumulation, bf16 out. The window size max_expert_size only bounds the reference's work; gmm
takes the groups as they are. A tuned tile larger than a dimension is cut to the largest
multiple of 128 that divides it, or to the whole dimension.
"""
import jax.numpy as jnp
from jax.experimental.pallas.ops.tpu.megablox import gmm

TILE_M, TILE_K, TILE_N = 256, 1024, 1024


def _block(dim, tuned):
    """The largest multiple of 128 up to `tuned` that divides `dim`; `dim` itself if none."""
    for size in range(min(tuned, dim) // 128 * 128, 0, -128):
        if dim % size == 0:
            return size
    return dim


def computation(lhs, rhs, group_sizes, max_expert_size):
    m, k = lhs.shape
    n = rhs.shape[2]
    tiling = (_block(m, TILE_M), _block(k, TILE_K), _block(n, TILE_N))
    return gmm(lhs, rhs, group_sizes, preferred_element_type=jnp.bfloat16, tiling=tiling)
