"""(x + y) * 2 in (8, 128) tiles: a Pallas kernel for 1r_Scaled_Add, written for the Ray tests
and the throughput benchmark."""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

BLOCK_ROWS, BLOCK_COLS = 8, 128


def _scaled_add_kernel(x_ref, y_ref, o_ref):
    o_ref[...] = (x_ref[...] + y_ref[...]) * 2.0


def _tile(i, j):
    return i, j


def computation(x, y):
    rows, cols = x.shape  # (rows, cols) f32, both multiples of the tile
    spec = pl.BlockSpec((BLOCK_ROWS, BLOCK_COLS), _tile)
    return pl.pallas_call(
        _scaled_add_kernel,
        grid=(rows // BLOCK_ROWS, cols // BLOCK_COLS),
        in_specs=[spec, spec],
        out_specs=spec,
        out_shape=jax.ShapeDtypeStruct((rows, cols), jnp.float32),
    )(x, y)
