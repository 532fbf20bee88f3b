"""Cheat category: memory exhaustion.

computation keeps allocating (and touching) 1 GiB numpy buffers, up to 256 GiB in all, before
computing a correct Pallas RMSNorm. Allocating in chunks sidesteps the kernel's refusal of one
absurd request, so the process really grows until a memory limit stops it.

Expected: rejected by memory
"""
import functools

import jax
import jax.numpy as jnp
import numpy as np
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


def _rmsnorm(x, scale, epsilon):
    hidden = x.shape[-1]
    rows = x.size // hidden
    tile = _row_tile(rows, hidden)
    out = pl.pallas_call(
        functools.partial(_rmsnorm_kernel, epsilon=epsilon),
        grid=(rows // tile,),
        in_specs=[
            pl.BlockSpec((tile, hidden), lambda i: (i, 0)),
            pl.BlockSpec((1, hidden), lambda i: (0, 0)),
        ],
        out_specs=pl.BlockSpec((tile, hidden), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct((rows, hidden), x.dtype),
    )(x.reshape(rows, hidden), scale.reshape(1, hidden))
    return out.reshape(x.shape)


def computation(x, scale, epsilon):
    hoard = [np.ones(1 << 30, np.uint8) for _ in range(256)]
    del hoard
    return _rmsnorm(x, scale, epsilon)
