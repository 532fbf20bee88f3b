"""RMSNorm as a Pallas TPU kernel that sums squares over hard-coded 256-wide column chunks: right
whenever the hidden size is a multiple of 256 (every shape the task declares), wrong otherwise."""
import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

# Tunables
BLOCK_ROWS = 64
CHUNK = 256


def _rmsnorm_kernel(x_ref, scale_ref, o_ref, *, epsilon):
    x32 = x_ref[...].astype(jnp.float32)
    hidden = x32.shape[-1]
    squares = jnp.zeros((x32.shape[0], 1), jnp.float32)
    for c in range(hidden // CHUNK):  # drops the last columns when CHUNK does not divide hidden
        part = x32[:, c * CHUNK:(c + 1) * CHUNK]
        squares += jnp.sum(part * part, axis=-1, keepdims=True)
    r = jax.lax.rsqrt(squares / hidden + epsilon)
    o_ref[...] = (x32 * r).astype(o_ref.dtype) * scale_ref[...]


def computation(x, scale, epsilon):
    hidden = x.shape[-1]
    x2d = x.reshape(-1, hidden)
    rows = x2d.shape[0]
    tile = BLOCK_ROWS if rows % BLOCK_ROWS == 0 else 8
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
