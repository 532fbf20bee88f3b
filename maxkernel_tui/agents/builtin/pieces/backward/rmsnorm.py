"""RMSNorm forward and backward as Pallas TPU kernels, joined by a custom_vjp.

Forward: y = (x * r).astype(out) * scale with r = rsqrt(mean(x^2) + eps) in f32, rows in blocks
of BLOCK_ROWS with the whole hidden axis per block; r is saved (one f32 per row) for the
backward. Backward, one pass over the rows: with xhat = x * r and dxhat = dy * scale,
    dx = r * (dxhat - xhat * mean(dxhat * xhat))
    dscale = sum over rows of dy * round(xhat)
dscale accumulates in an f32 block that stays in VMEM across the row blocks (the row axis is
'arbitrary' for that reason). Imports jax.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from maxkernel_tui.agents.builtin.pieces.blocks import (
    _block_bytes,
    _compiler_params,
    _pick_block,
)

# Preferred rows per block: the generated file defines its own under `# Tunables`.
BLOCK_ROWS = 256


def _rms_rows_forward_kernel(x_ref, scale_ref, y_ref, r_ref, *, eps):
    """One block of rows: the normalised rows times the scale, and each row's 1/rms."""
    x = x_ref[...].astype(jnp.float32)
    r = jax.lax.rsqrt(jnp.mean(x * x, axis=1, keepdims=True) + eps)
    y_ref[...] = (x * r).astype(y_ref.dtype) * scale_ref[...]
    r_ref[...] = r


def _rms_rows_backward_kernel(x_ref, scale_ref, r_ref, dy_ref, dx_ref, dscale_ref):
    """One block of rows: their dx, and their share of dscale added to the running sum."""

    @pl.when(pl.program_id(0) == 0)
    def _start():
        dscale_ref[...] = jnp.zeros_like(dscale_ref)

    x = x_ref[...].astype(jnp.float32)
    r = r_ref[...]
    dy = dy_ref[...].astype(jnp.float32)
    xhat = x * r
    # the forward rounds xhat before the scale: dscale sees the rounded value, dx the f32 one
    rounded = xhat.astype(dx_ref.dtype).astype(jnp.float32)
    dscale_ref[...] += jnp.sum(dy * rounded, axis=0, keepdims=True)
    dxhat = dy * scale_ref[...].astype(jnp.float32)
    mean = jnp.mean(dxhat * xhat, axis=1, keepdims=True)
    dx_ref[...] = (r * (dxhat - xhat * mean)).astype(dx_ref.dtype)


def _rms_row_spec(block_rows, hidden):
    """A block of rows, the whole hidden axis."""
    return pl.BlockSpec((block_rows, hidden), lambda i: (i, 0))


def _rms_forward(x2, scale2, eps, out_dtype):
    """x2 (rows, hidden), scale2 (1, hidden) -> y (rows, hidden), r (rows, 1) f32."""
    rows, hidden = x2.shape
    block = _pick_block(rows, BLOCK_ROWS, 8 * max(1, 4 // x2.dtype.itemsize))
    # two buffers of x and y, three f32 temporaries of the block
    footprint = 4 * _block_bytes(block, hidden, x2.dtype) + 3 * _block_bytes(
        block, hidden, jnp.float32
    )
    return pl.pallas_call(
        functools.partial(_rms_rows_forward_kernel, eps=eps),
        out_shape=(
            jax.ShapeDtypeStruct((rows, hidden), out_dtype),
            jax.ShapeDtypeStruct((rows, 1), jnp.float32),
        ),
        grid=(rows // block,),
        in_specs=[_rms_row_spec(block, hidden), pl.BlockSpec((1, hidden), lambda i: (0, 0))],
        out_specs=(_rms_row_spec(block, hidden), pl.BlockSpec((block, 1), lambda i: (i, 0))),
        compiler_params=_compiler_params(("parallel",), footprint),
    )(x2, scale2)


def _rms_backward(x2, scale2, r, dy2):
    """The gradients of x2 (rows, hidden) and of scale2 (1, hidden; f32 sum over the rows)."""
    rows, hidden = x2.shape
    block = _pick_block(rows, BLOCK_ROWS, 8 * max(1, 4 // x2.dtype.itemsize))
    # two buffers of x, dy and dx, five f32 temporaries of the block
    footprint = 6 * _block_bytes(block, hidden, x2.dtype) + 5 * _block_bytes(
        block, hidden, jnp.float32
    )
    return pl.pallas_call(
        _rms_rows_backward_kernel,
        out_shape=(
            jax.ShapeDtypeStruct((rows, hidden), x2.dtype),
            jax.ShapeDtypeStruct((1, hidden), jnp.float32),
        ),
        grid=(rows // block,),
        in_specs=[
            _rms_row_spec(block, hidden),
            pl.BlockSpec((1, hidden), lambda i: (0, 0)),
            pl.BlockSpec((block, 1), lambda i: (i, 0)),
            _rms_row_spec(block, hidden),
        ],
        out_specs=(_rms_row_spec(block, hidden), pl.BlockSpec((1, hidden), lambda i: (0, 0))),
        # dscale's block is revisited by every row block: the rows run in order
        compiler_params=_compiler_params(("arbitrary",), footprint),
    )(x2, scale2, r, dy2)


def _rmsnorm_training(x, scale, *, eps):
    """RMSNorm of x (..., hidden) by scale (hidden,), differentiable in both through the
    kernels above."""
    hidden = x.shape[-1]

    @jax.custom_vjp
    def rmsnorm(x, scale):
        y, _ = _rms_forward(x.reshape(-1, hidden), scale.reshape(1, hidden), eps, x.dtype)
        return y.reshape(x.shape)

    def forward(x, scale):
        y, r = _rms_forward(x.reshape(-1, hidden), scale.reshape(1, hidden), eps, x.dtype)
        return y.reshape(x.shape), (x, scale, r)

    def backward(saved, dy):
        x, scale, r = saved
        dx, dscale = _rms_backward(
            x.reshape(-1, hidden), scale.reshape(1, hidden), r, dy.reshape(-1, hidden)
        )
        return dx.reshape(x.shape), dscale.reshape(scale.shape).astype(scale.dtype)

    rmsnorm.defvjp(forward, backward)
    return rmsnorm(x, scale)
