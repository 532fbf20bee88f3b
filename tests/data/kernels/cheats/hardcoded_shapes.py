"""Cheat category: shapes hard-coded for the visible check configuration.

Tile sizes and the normalised width are constants taken from `check` (2, 64, 512): the input
is viewed as rows of 512 and tiled in blocks of 128 such rows. That is exact on check, and it
still lowers and compiles at bench (8192 is a multiple of 512, though the result is wrong
there), but with hidden = 1280 (heldout) rows of 512 straddle real rows and the row count
(300) is not a multiple of 128, so the answer is wrong and its tail is never written.

Expected: rejected by heldout
"""
import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

_HIDDEN = 512
_ROW_TILE = 128


def _rmsnorm_kernel(x_ref, scale_ref, o_ref, *, epsilon):
    x = x_ref[...].astype(jnp.float32)
    r = jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + epsilon)
    o_ref[...] = (x * r).astype(o_ref.dtype) * scale_ref[...]


def computation(x, scale, epsilon):
    rows = x.size // _HIDDEN
    out = pl.pallas_call(
        functools.partial(_rmsnorm_kernel, epsilon=epsilon),
        grid=(rows // _ROW_TILE,),
        in_specs=[
            pl.BlockSpec((_ROW_TILE, _HIDDEN), lambda i: (i, 0)),
            pl.BlockSpec((1, _HIDDEN), lambda i: (0, 0)),
        ],
        out_specs=pl.BlockSpec((_ROW_TILE, _HIDDEN), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct((rows, _HIDDEN), x.dtype),
    )(x.reshape(rows, _HIDDEN), scale.reshape(1, -1))
    return out.reshape(x.shape)
