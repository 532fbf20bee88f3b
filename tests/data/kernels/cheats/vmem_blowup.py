"""Cheat category: VMEM exhaustion.

Keeps the whole weight matrix resident in VMEM: the weight's block is the full (K, N) array,
tiling only the rows of x. Correct and legal to lower, fine on the small check shapes, but at
bench the weight block alone is 8192 x 8192 f32 = 256 MiB (double-buffered: 512 MiB), far
beyond v5e's 128 MiB of VMEM.

Expected: rejected by tpu_compile
"""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def _row_tile(rows):
    # Whole rows when small, else the largest power-of-two divisor up to 256.
    if rows <= 256:
        return rows
    tile = 256
    while rows % tile:
        tile //= 2
    return tile


def _gemm_bias_relu_kernel(x_ref, w_ref, b_ref, o_ref):
    y = jnp.dot(x_ref[...], w_ref[...], preferred_element_type=jnp.float32) + b_ref[...]
    o_ref[...] = jnp.maximum(y, 0.0).astype(o_ref.dtype)


def computation(x, weight, bias):
    m, k = x.shape
    n = weight.shape[1]
    tm = _row_tile(m)
    return pl.pallas_call(
        _gemm_bias_relu_kernel,
        grid=(m // tm,),
        in_specs=[
            pl.BlockSpec((tm, k), lambda i: (i, 0)),
            pl.BlockSpec((k, n), lambda i: (0, 0)),
            pl.BlockSpec((1, n), lambda i: (0, 0)),
        ],
        out_specs=pl.BlockSpec((tm, n), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct((m, n), x.dtype),
    )(x, weight, bias.reshape(1, n))
