"""Cheat category: memoised results.

A correct Pallas RMSNorm, but on the CPU its output goes through a host callback that memoises
results in a module-level dict keyed by shape and dtype (mutated in place, no `global`): every
later call with the same shape gets the FIRST call's output back, whatever its inputs. One seed
per shape passes; a second seed on the same shape mismatches. The memo sits behind
jax.lax.platform_dependent so that lowering for TPU (where a host callback cannot be lowered
from a CPU process) sees only the honest branch and every check before numerics passes.

Expected: rejected by static (a host callback from device code). Were callbacks allowed, the
second fresh seed of the numerics check would mismatch.
"""
import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl

_first_output_by_shape = {}


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


def _replay_first_output(fresh):
    key = (fresh.shape, str(fresh.dtype))
    if key not in _first_output_by_shape:
        _first_output_by_shape[key] = np.array(fresh)
    return _first_output_by_shape[key]


def computation(x, scale, epsilon):
    out = _rmsnorm(x, scale, epsilon)
    return jax.lax.platform_dependent(
        out,
        cpu=lambda y: jax.pure_callback(_replay_first_output, jax.ShapeDtypeStruct(y.shape, y.dtype), y),
        default=lambda y: y,
    )
