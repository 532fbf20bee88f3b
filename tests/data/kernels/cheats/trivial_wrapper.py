"""Cheat category: token Pallas wrapper around XLA work.

The GEMM and bias add (all the FLOPs) run in XLA outside Pallas; a real pallas_call only
applies the elementwise ReLU, so the jaxpr has a pallas_call but the heavy work is elsewhere.

Expected: rejected by trace
"""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def _tile(dim, preferred):
    # The whole dim when small, else the largest power-of-two divisor up to `preferred`.
    if dim <= preferred:
        return dim
    tile = preferred
    while dim % tile:
        tile //= 2
    return tile


def _relu_kernel(y_ref, o_ref):
    o_ref[...] = jnp.maximum(y_ref[...], 0.0)


def computation(x, weight, bias):
    pre_activation = jnp.matmul(x, weight) + bias
    rows, cols = pre_activation.shape
    tm, tn = _tile(rows, 256), _tile(cols, 1024)
    return pl.pallas_call(
        _relu_kernel,
        grid=(rows // tm, cols // tn),
        in_specs=[pl.BlockSpec((tm, tn), lambda i, j: (i, j))],
        out_specs=pl.BlockSpec((tm, tn), lambda i, j: (i, j)),
        out_shape=jax.ShapeDtypeStruct(pre_activation.shape, pre_activation.dtype),
    )(pre_activation)
