"""Cheat category: skipped work (partial output write).

A Pallas RMSNorm whose grid covers only half of the row blocks (block i goes to rows 2i), so
it does half the work and leaves every odd row block of the output as whatever memory held.
Fast, and on hardware that happens to reuse a buffer holding the right answer it might pass;
in TPU interpret mode with uninitialized_memory="nan" those rows are NaN.

Expected: rejected by numerics
"""
import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def _row_tile(rows, hidden):
    # Largest row tile leaving at least two blocks, f32 working copy within about 2 MiB of VMEM.
    for tile in (512, 256, 128, 64, 32, 16, 8):
        if rows % tile == 0 and rows // tile >= 2 and tile * hidden * 4 <= 2 * 1024 * 1024:
            return tile
    return rows


def _rmsnorm_kernel(x_ref, scale_ref, o_ref, *, epsilon):
    x = x_ref[...].astype(jnp.float32)
    r = jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + epsilon)
    o_ref[...] = (x * r).astype(o_ref.dtype) * scale_ref[...]


def computation(x, scale, epsilon):
    hidden = x.shape[-1]
    rows = x.size // hidden
    tile = _row_tile(rows, hidden)
    even_blocks = pl.cdiv(rows // tile, 2)
    out = pl.pallas_call(
        functools.partial(_rmsnorm_kernel, epsilon=epsilon),
        grid=(even_blocks,),
        in_specs=[
            pl.BlockSpec((tile, hidden), lambda i: (2 * i, 0)),
            pl.BlockSpec((1, hidden), lambda i: (0, 0)),
        ],
        out_specs=pl.BlockSpec((tile, hidden), lambda i: (2 * i, 0)),
        out_shape=jax.ShapeDtypeStruct((rows, hidden), x.dtype),
    )(x.reshape(rows, hidden), scale.reshape(1, hidden))
    return out.reshape(x.shape)
