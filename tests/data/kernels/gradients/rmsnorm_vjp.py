"""RMSNorm for training: a jax.custom_vjp whose forward and backward are Pallas kernels.

The forward saves r = rsqrt(mean(x^2) + eps) per row; the backward computes, per row block,
dx = r * (g*w) - x * r^3 * mean(g*w*x) and the block's partial sum of dw = g * x * r, summed
over the (few) blocks afterwards."""
import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

DROP_DX_CORRECTION = False  # the wrong-gradient variant sets this


def _tile(rows):
    for tile in (256, 128, 64, 32, 16, 8):
        if rows % tile == 0:
            return tile
    return rows


def _forward_kernel(x_ref, w_ref, y_ref, r_ref, *, epsilon):
    x = x_ref[...]
    r = jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + epsilon)
    y_ref[...] = x * r * w_ref[...]
    r_ref[...] = r


def _backward_kernel(x_ref, w_ref, r_ref, g_ref, dx_ref, dw_ref):
    x, r, gw = x_ref[...], r_ref[...], g_ref[...] * w_ref[...]
    dx = r * gw
    if not DROP_DX_CORRECTION:
        dx = dx - x * (r * r * r) * jnp.mean(gw * x, axis=-1, keepdims=True)
    dx_ref[...] = dx
    dw_ref[...] = jnp.sum(g_ref[...] * x * r, axis=0, keepdims=True)[None]


def _forward(x2d, w, epsilon):
    rows, hidden = x2d.shape
    tile = _tile(rows)
    return pl.pallas_call(
        functools.partial(_forward_kernel, epsilon=epsilon),
        out_shape=(
            jax.ShapeDtypeStruct((rows, hidden), x2d.dtype),
            jax.ShapeDtypeStruct((rows, 1), jnp.float32),
        ),
        grid=(rows // tile,),
        in_specs=[
            pl.BlockSpec((tile, hidden), lambda i: (i, 0)),
            pl.BlockSpec((1, hidden), lambda i: (0, 0)),
        ],
        out_specs=(
            pl.BlockSpec((tile, hidden), lambda i: (i, 0)),
            pl.BlockSpec((tile, 1), lambda i: (i, 0)),
        ),
    )(x2d, w.reshape(1, hidden))


def _backward(x2d, w, r, g):
    rows, hidden = x2d.shape
    tile = _tile(rows)
    blocks = rows // tile
    dx, dw = pl.pallas_call(
        _backward_kernel,
        out_shape=(
            jax.ShapeDtypeStruct((rows, hidden), x2d.dtype),
            jax.ShapeDtypeStruct((blocks, 1, hidden), jnp.float32),
        ),
        grid=(blocks,),
        in_specs=[
            pl.BlockSpec((tile, hidden), lambda i: (i, 0)),
            pl.BlockSpec((1, hidden), lambda i: (0, 0)),
            pl.BlockSpec((tile, 1), lambda i: (i, 0)),
            pl.BlockSpec((tile, hidden), lambda i: (i, 0)),
        ],
        out_specs=(
            pl.BlockSpec((tile, hidden), lambda i: (i, 0)),
            pl.BlockSpec((1, 1, hidden), lambda i: (i, 0, 0)),
        ),
    )(x2d, w.reshape(1, hidden), r, g)
    return dx, jnp.sum(dw, axis=(0, 1)).astype(w.dtype)


@functools.partial(jax.custom_vjp, nondiff_argnums=(2,))
def _rmsnorm(x2d, w, epsilon):
    return _forward(x2d, w, epsilon)[0]


def _rmsnorm_fwd(x2d, w, epsilon):
    y, r = _forward(x2d, w, epsilon)
    return y, (x2d, w, r)


def _rmsnorm_bwd(epsilon, saved, g):
    x2d, w, r = saved
    return _backward(x2d, w, r, g)


_rmsnorm.defvjp(_rmsnorm_fwd, _rmsnorm_bwd)


def computation(x, w, epsilon):
    hidden = x.shape[-1]
    return _rmsnorm(x.reshape(-1, hidden), w, epsilon).reshape(x.shape)
