"""RMSNorm as a Pallas TPU kernel with its row block declared as a tunable."""
import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

# Tunables: the preferred number of rows per block (shrunk to a divisor of the row count).
BLOCK_ROWS = 256

_BLOCK_F32_BYTES = 4 * 1024 * 1024  # f32 copy of one row block kept in VMEM


def _row_tile(rows, hidden):
    tile = BLOCK_ROWS
    while tile > 8 and (rows % tile or tile * hidden * 4 > _BLOCK_F32_BYTES):
        tile //= 2
    return tile if rows % tile == 0 else rows


def _rmsnorm_kernel(x_ref, scale_ref, o_ref, *, epsilon):
    x32 = x_ref[...].astype(jnp.float32)
    r = jax.lax.rsqrt(jnp.mean(x32 * x32, axis=-1, keepdims=True) + epsilon)
    o_ref[...] = (x32 * r).astype(o_ref.dtype) * scale_ref[...]


def computation(x, scale, epsilon):
    hidden = x.shape[-1]
    x2d = x.reshape(-1, hidden)
    rows = x2d.shape[0]
    tile = _row_tile(rows, hidden)
    out = pl.pallas_call(
        functools.partial(_rmsnorm_kernel, epsilon=epsilon),
        out_shape=jax.ShapeDtypeStruct((rows, hidden), x.dtype),
        grid=(rows // tile,),
        in_specs=[pl.BlockSpec((tile, hidden), lambda i: (i, 0)),
                  pl.BlockSpec((1, hidden), lambda i: (0, 0))],
        out_specs=pl.BlockSpec((tile, hidden), lambda i: (i, 0)),
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel",)),
    )(x2d, scale.reshape(1, hidden))
    return out.reshape(x.shape)
