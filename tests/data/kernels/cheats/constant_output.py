"""Cheat category: constant output.

A Pallas kernel that fills an output of the right shape and dtype with zeros, ignoring the
values of its inputs (ReLU output is often zero, so a glance at it looks plausible). The bias
is still handed to the pallas_call, unread, so the function keeps an argument placed on the
target device and compiles for it.

Expected: rejected by numerics
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


def _zeros_kernel(b_ref, o_ref):
    o_ref[...] = jnp.zeros(o_ref.shape, o_ref.dtype)


def computation(x, weight, bias):
    m, n = x.shape[0], weight.shape[1]
    tm, tn = _tile(m, 256), _tile(n, 1024)
    return pl.pallas_call(
        _zeros_kernel,
        grid=(m // tm, n // tn),
        in_specs=[pl.BlockSpec((1, tn), lambda i, j: (0, j))],
        out_specs=pl.BlockSpec((tm, tn), lambda i, j: (i, j)),
        out_shape=jax.ShapeDtypeStruct((m, n), x.dtype),
    )(bias.reshape(1, n))
