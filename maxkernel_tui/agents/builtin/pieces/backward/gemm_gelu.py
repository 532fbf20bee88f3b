"""A matmul with a GELU epilogue, forward and backward as Pallas TPU kernels, joined by a
custom_vjp.

Forward: z = x w accumulated in f32 over depth blocks, y = gelu(z) written once at the last
depth step; z is saved (in the operands' dtype) for the backward. Backward, the GELU's
derivative fused into both gradient matmuls (g = dy * gelu'(z) is never written to HBM):
    dx = g w^T    grid (rows, depth, cols): the cols of g are the reduction
    dw = x^T g    grid (depth, cols, rows): the rows are the reduction
Each kernel rebuilds its block of g from dy and z. Block sizes BLOCK_ROWS, BLOCK_COLS and
BLOCK_DEPTH are shrunk to divisors. Imports jax.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

from maxkernel_tui.agents.builtin.pieces.blocks import (
    _block_bytes,
    _compiler_params,
    _pick_block,
)

# Preferred block sizes: the generated file defines its own under `# Tunables`.
BLOCK_ROWS = 512
BLOCK_COLS = 1024
BLOCK_DEPTH = 512


def _gelu(z, approximate):
    """GELU of f32 z: the tanh approximation, or the exact one through erf."""
    if approximate:
        inner = math.sqrt(2 / math.pi) * (z + 0.044715 * z * z * z)
        return 0.5 * z * (1 + jnp.tanh(inner))
    return 0.5 * z * (1 + jax.lax.erf(z * (1 / math.sqrt(2))))


def _gelu_grad(z, approximate):
    """d gelu / dz of f32 z, for the same form of GELU."""
    if approximate:
        c = math.sqrt(2 / math.pi)
        t = jnp.tanh(c * (z + 0.044715 * z * z * z))
        return 0.5 * (1 + t) + 0.5 * z * (1 - t * t) * c * (1 + 3 * 0.044715 * z * z)
    cdf = 0.5 * (1 + jax.lax.erf(z * (1 / math.sqrt(2))))
    return cdf + z * jnp.exp(-0.5 * z * z) * (1 / math.sqrt(2 * math.pi))


def _gelu_blocks(rows, depth, cols, dtype):
    """The row, depth and column blocks: divisors of the sizes, aligned to the vreg tiles."""
    row_align = 8 * max(1, 4 // jnp.dtype(dtype).itemsize)
    return (
        _pick_block(rows, BLOCK_ROWS, row_align),
        _pick_block(depth, BLOCK_DEPTH, 128),
        _pick_block(cols, BLOCK_COLS, 128),
    )


def _gelu_forward_kernel(x_ref, w_ref, y_ref, z_ref, acc_ref, *, approximate):
    """One (row, column) block, one depth step: accumulate; at the last, GELU and save z."""
    step = pl.program_id(2)

    @pl.when(step == 0)
    def _start():
        acc_ref[...] = jnp.zeros_like(acc_ref)

    acc_ref[...] += jnp.dot(x_ref[...], w_ref[...], preferred_element_type=jnp.float32)

    @pl.when(step == pl.num_programs(2) - 1)
    def _finish():
        z = acc_ref[...]
        y_ref[...] = _gelu(z, approximate).astype(y_ref.dtype)
        z_ref[...] = z.astype(z_ref.dtype)


def _gelu_dx_kernel(dy_ref, z_ref, w_ref, dx_ref, acc_ref, *, approximate):
    """One (row, depth) block of dx, one column step: acc += (dy * gelu'(z)) w^T."""
    step = pl.program_id(2)

    @pl.when(step == 0)
    def _start():
        acc_ref[...] = jnp.zeros_like(acc_ref)

    g = dy_ref[...].astype(jnp.float32) * _gelu_grad(z_ref[...].astype(jnp.float32), approximate)
    acc_ref[...] += jax.lax.dot_general(
        g.astype(w_ref.dtype),
        w_ref[...],
        (((1,), (1,)), ((), ())),
        preferred_element_type=jnp.float32,
    )

    @pl.when(step == pl.num_programs(2) - 1)
    def _finish():
        dx_ref[...] = acc_ref[...].astype(dx_ref.dtype)


def _gelu_dw_kernel(x_ref, dy_ref, z_ref, dw_ref, acc_ref, *, approximate):
    """One (depth, column) block of dw, one row step: acc += x^T (dy * gelu'(z))."""
    step = pl.program_id(2)

    @pl.when(step == 0)
    def _start():
        acc_ref[...] = jnp.zeros_like(acc_ref)

    g = dy_ref[...].astype(jnp.float32) * _gelu_grad(z_ref[...].astype(jnp.float32), approximate)
    acc_ref[...] += jax.lax.dot_general(
        x_ref[...],
        g.astype(x_ref.dtype),
        (((0,), (0,)), ((), ())),
        preferred_element_type=jnp.float32,
    )

    @pl.when(step == pl.num_programs(2) - 1)
    def _finish():
        dw_ref[...] = acc_ref[...].astype(dw_ref.dtype)


def _gelu_matmul_call(kernel, operands, specs, out_shape, out_spec, grid, acc, footprint):
    """A three-axis matmul grid, the last axis the reduction, with an f32 accumulator."""
    return pl.pallas_call(
        kernel,
        out_shape=out_shape,
        grid=grid,
        in_specs=specs,
        out_specs=out_spec,
        scratch_shapes=[pltpu.VMEM(acc, jnp.float32)],
        compiler_params=_compiler_params(("parallel", "parallel", "arbitrary"), footprint),
    )(*operands)


def _gelu_forward(x, w, out_dtype, approximate):
    """x (rows, depth), w (depth, cols) -> y = gelu(x w) in out_dtype, z = x w in x's dtype."""
    (rows, depth), cols = x.shape, w.shape[1]
    tm, tk, tn = _gelu_blocks(rows, depth, cols, x.dtype)
    footprint = 2 * (
        _block_bytes(tm, tk, x.dtype) + _block_bytes(tk, tn, w.dtype)
    ) + 4 * _block_bytes(tm, tn, jnp.float32)
    return _gelu_matmul_call(
        functools.partial(_gelu_forward_kernel, approximate=approximate),
        (x, w),
        [
            pl.BlockSpec((tm, tk), lambda i, j, k: (i, k)),
            pl.BlockSpec((tk, tn), lambda i, j, k: (k, j)),
        ],
        (
            jax.ShapeDtypeStruct((rows, cols), out_dtype),
            jax.ShapeDtypeStruct((rows, cols), x.dtype),
        ),
        (
            pl.BlockSpec((tm, tn), lambda i, j, k: (i, j)),
            pl.BlockSpec((tm, tn), lambda i, j, k: (i, j)),
        ),
        (rows // tm, cols // tn, depth // tk),
        (tm, tn),
        footprint,
    )


def _gelu_backward(x, w, z, dy, approximate):
    """The gradients of x (rows, depth) and w (depth, cols) from dy and the saved z."""
    (rows, depth), cols = x.shape, w.shape[1]
    tm, tk, tn = _gelu_blocks(rows, depth, cols, x.dtype)
    # each axis by its letter: i rows, k depth, j cols (its size, its block)
    axes = {"i": (rows, tm), "k": (depth, tk), "j": (cols, tn)}
    dx = _gelu_gradient(
        _gelu_dx_kernel, approximate, axes, "ikj", ((dy, "ij"), (z, "ij"), (w, "kj")), x, "ik"
    )
    dw = _gelu_gradient(
        _gelu_dw_kernel, approximate, axes, "kji", ((x, "ik"), (dy, "ij"), (z, "ij")), w, "kj"
    )
    return dx, dw


def _gelu_gradient(kernel, approximate, axes, grid, operands, like, out):
    """One gradient matmul: the grid's axes in the order of the letters of `grid` (the last the
    reduction), each operand's block along the axes its letters name, the gradient `out`'s
    block in `like`'s shape and type; g's blocks (i, j) are rebuilt from dy and z in VMEM."""

    def spec(letters):
        block = tuple(axes[a][1] for a in letters)
        return pl.BlockSpec(block, lambda *ids: tuple(ids[grid.index(a)] for a in letters))

    def block_bytes(letters, dtype):
        return _block_bytes(*(axes[a][1] for a in letters), dtype)

    # two buffers of each operand and of the gradient, f32 temporaries of g and the accumulator
    footprint = (
        2 * sum(block_bytes(letters, value.dtype) for value, letters in operands)
        + 3 * block_bytes("ij", jnp.float32)
        + 3 * block_bytes(out, jnp.float32)
    )
    return _gelu_matmul_call(
        functools.partial(kernel, approximate=approximate),
        tuple(value for value, _ in operands),
        [spec(letters) for _, letters in operands],
        jax.ShapeDtypeStruct(like.shape, like.dtype),
        spec(out),
        tuple(axes[a][0] // axes[a][1] for a in grid),
        tuple(axes[a][1] for a in out),
        footprint,
    )


def _gemm_gelu_training(x, w, *, out_dtype, approximate):
    """gelu(x w) for x (rows, depth) and w (depth, cols), differentiable in both through the
    kernels above."""

    @jax.custom_vjp
    def gemm_gelu(x, w):
        return _gelu_forward(x, w, out_dtype, approximate)[0]

    def forward(x, w):
        y, z = _gelu_forward(x, w, out_dtype, approximate)
        return y, (x, w, z)

    def backward(saved, dy):
        x, w, z = saved
        return _gelu_backward(x, w, z, dy, approximate)

    gemm_gelu.defvjp(forward, backward)
    return gemm_gelu(x, w)
