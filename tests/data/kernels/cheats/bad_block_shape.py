"""Cheat category: illegal TPU tiling.

A GEMM + bias + ReLU kernel with (100, 100) blocks over a cdiv grid: the last two block dims
are neither multiples of (8, 128) nor the full array dims, which Mosaic cannot tile. Interpret
mode does not enforce TPU tiling rules, so only lowering for TPU exposes it.

Expected: rejected by tpu_lower
"""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

_BLOCK = 100


def _gemm_bias_relu_kernel(x_ref, w_ref, b_ref, o_ref):
    y = jnp.dot(x_ref[...], w_ref[...], preferred_element_type=jnp.float32) + b_ref[...]
    o_ref[...] = jnp.maximum(y, 0.0).astype(o_ref.dtype)


def computation(x, weight, bias):
    m, k = x.shape
    n = weight.shape[1]
    return pl.pallas_call(
        _gemm_bias_relu_kernel,
        grid=(pl.cdiv(m, _BLOCK), pl.cdiv(n, _BLOCK)),
        in_specs=[
            pl.BlockSpec((_BLOCK, k), lambda i, j: (i, 0)),
            pl.BlockSpec((k, _BLOCK), lambda i, j: (0, j)),
            pl.BlockSpec((1, _BLOCK), lambda i, j: (0, j)),
        ],
        out_specs=pl.BlockSpec((_BLOCK, _BLOCK), lambda i, j: (i, j)),
        out_shape=jax.ShapeDtypeStruct((m, n), x.dtype),
    )(x, weight, bias.reshape(1, n))
