"""Cheat category: out-of-bounds read.

A Pallas RMSNorm with an off-by-one grid: it runs one step more than there are row blocks, so
the last step reads (and writes) the block just past the end of the arrays. On hardware that
read returns whatever lies beyond the buffer; in TPU interpret mode with
out_of_bounds_reads="raise" it raises.

Expected: rejected by numerics
"""
import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def _row_tile(rows, hidden):
    # Largest row tile dividing `rows` whose f32 working copy stays within about 2 MiB of VMEM.
    for tile in (512, 256, 128, 64, 32, 16, 8):
        if rows % tile == 0 and tile * hidden * 4 <= 2 * 1024 * 1024:
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
    out = pl.pallas_call(
        functools.partial(_rmsnorm_kernel, epsilon=epsilon),
        grid=(rows // tile + 1,),
        in_specs=[
            pl.BlockSpec((tile, hidden), lambda i: (i, 0)),
            pl.BlockSpec((1, hidden), lambda i: (0, 0)),
        ],
        out_specs=pl.BlockSpec((tile, hidden), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct((rows, hidden), x.dtype),
    )(x.reshape(rows, hidden), scale.reshape(1, hidden))
    return out.reshape(x.shape)
